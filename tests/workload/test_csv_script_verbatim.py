"""A CSV workload keeps a batch script as written, as the JSON file and the API do.

Before, the CSV reader stripped every cell: a script with a leading space was accepted from
CSV (and rewritten) while JSON and the API refused it, and every CSV script lost its
trailing newline.
"""

from __future__ import annotations

import csv

import pytest

from carbonsched.errors import WorkloadError
from carbonsched.workload.files import read_workload

ROW = {"kind": "batch", "id": "s1", "tenant": "t", "gpu_type": "A100", "gpus": "1",
       "duration_hours": "1", "power_per_gpu_kw": "0.5",
       "earliest_start": "2023-07-15T00:00:00Z", "deadline": "2023-07-15T12:00:00Z"}


def _write(tmp_path, script: str, name: str = "jobs.csv"):
    p = tmp_path / name
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*ROW, "script"])
        w.writeheader()
        w.writerow({**ROW, "script": script})
    return p


def test_a_script_keeps_its_trailing_newline(tmp_path):
    wl = read_workload(_write(tmp_path, "#!/bin/bash\necho hi\n"))
    assert wl.jobs[0].payload.script == "#!/bin/bash\necho hi\n"


def test_a_script_with_a_leading_space_is_refused_as_from_json(tmp_path):
    import json

    bad = " #!/bin/bash\necho hi\n"
    with pytest.raises(WorkloadError, match=r"field 'script'") as from_csv:
        read_workload(_write(tmp_path, bad))
    j = tmp_path / "jobs.json"
    j.write_text(json.dumps({"jobs": [{**{k: v for k, v in ROW.items() if k != "kind"},
                                       "kind": "batch", "gpus": 1, "duration_hours": 1,
                                       "power_per_gpu_kw": 0.5, "script": bad}]}))
    with pytest.raises(WorkloadError, match=r"field 'script'") as from_json:
        read_workload(j)
    # the same problem and fix, whichever file said it
    assert str(from_csv.value).split("field 'script'")[1] == \
        str(from_json.value).split("field 'script'")[1]


def test_a_cell_of_spaces_is_no_script(tmp_path):
    # at the limit: only spaces is an empty cell (no payload), not a script to refuse
    wl = read_workload(_write(tmp_path, "   "))
    assert wl.jobs[0].payload is None
