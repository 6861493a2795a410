"""The job schema's topology fields (issue 37 item 2): ``topology = "same-domain"`` or
``max_domains = N``, one conversion to ``Job.max_domains``, the cross-field rules, and the
workload files keep them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from carbonsched.domain import Workload
from carbonsched.workload.files import read_workload, write_workload
from carbonsched.workload.schema import JobSpec

from .test_schema import record


@pytest.mark.parametrize(("over", "span"), [
    ({"topology": "same-domain"}, 1),
    ({"max_domains": 3}, 3),
    ({"topology": "same-domain", "max_domains": 1}, 1),   # both, agreeing: just at the rule
    ({"topology": ""}, None),                              # an empty CSV cell: not given
    ({}, None),
])
def test_topology_becomes_max_domains(over, span):
    job = JobSpec.model_validate(record(max_pieces=1, **over)).to_job()
    assert job.max_domains == span
    back = JobSpec.from_job(job).to_job()
    assert back == job and back.max_domains == span


@pytest.mark.parametrize(("over", "field", "message"), [
    ({"topology": "same-domain", "max_domains": 2, "max_pieces": 1}, "max_domains",
     "max_domains 2 with topology 'same-domain' (one domain); give one of them: topology "
     "'same-domain', or max_domains = N"),
    ({"topology": "same-domain"}, "max_pieces",      # the record is preemptible, max_pieces 3
     "max_pieces 3 > 1 on a gang with a topology constraint; a topology-bound gang runs in one "
     "piece: set max_pieces to 1, or drop topology / max_domains"),
    ({"max_domains": 0, "max_pieces": 1}, "max_domains", None),
])
def test_topology_rules_name_the_field_and_the_fix(over, field, message):
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(record(**over))
    e = info.value.errors()[0]
    assert e["loc"][0] == field
    if message:
        assert e["msg"] == message


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_workload_files_keep_the_span(tmp_path, suffix):
    jobs = [JobSpec.model_validate(record(id=f"j{n}", max_pieces=1, **over)).to_job()
            for n, over in enumerate(({"topology": "same-domain"}, {"max_domains": 2}, {}))]
    p = write_workload(Workload(jobs, []), tmp_path / f"w{suffix}")
    assert [j.max_domains for j in read_workload(p).jobs] == [1, 2, None]


def test_a_file_without_spans_has_no_span_column(tmp_path):
    job = JobSpec.model_validate(record(max_pieces=1)).to_job()
    text = write_workload(Workload([job], []), tmp_path / "w.csv").read_text()
    assert "max_domains" not in text.splitlines()[0]
    assert "max_domains" not in write_workload(Workload([job], []),
                                               tmp_path / "w.json").read_text()
