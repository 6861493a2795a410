"""An error is one ``error:`` line when stderr is not a terminal, however long the message."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from carbonsched.cli.app import app


def test_a_long_error_is_one_physical_line(tmp_path):
    jobs = tmp_path / "bad-field.json"
    jobs.write_text(json.dumps({"jobs": [{
        "id": "j1", "tenant": "t", "gpu_type": "A100", "gpus": 1, "hours": 2,
        "power_per_gpu_kw": 0.5, "earliest_start": "2023-07-15T00:00:00Z",
        "deadline": "2023-07-15T12:00:00Z"}], "inference": []}))
    r = CliRunner().invoke(app, ["plan", "--no-store", "--date", "2023-07-15", "--jobs",
                                 str(jobs)])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and len(lines[0]) > 150  # longer than Rich's width
    assert lines[0].endswith("(see docs/workload.md)")
