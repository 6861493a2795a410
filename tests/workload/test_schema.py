"""One job schema (issue 31 step 4b): every entry point accepts and refuses a job alike.

A job spec reaches carbonsched through the workload file (JSON, CSV), the API
(``POST /v1/jobs``, ``POST /v1/placements``) and the service store's stored spec; all go through
:class:`~carbonsched.workload.schema.JobSpec`. The same record must become the same
:class:`~carbonsched.domain.Job` at each, and the same bad value must get the same message:
the file's is ``"<path>, jobs[0] (id 'x'), field 'f': <message> (see docs/workload.md)"``, the
API's 422 ``detail`` holds ``<message>`` at ``loc`` ``[..., 'f']``. The API is the real app
(:func:`carbonsched.api.app.create_app`) behind FastAPI's TestClient, with a store of the test's
own and no plan (submitted jobs wait for the next run).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from carbonsched.domain import Job
from carbonsched.errors import InputError, WorkloadError
from carbonsched.limits import (
    MAX_ALLOWED_SITES,
    MAX_CHECKPOINT_OVERHEAD_MINUTES,
    MAX_COMMAND_CHARS,
    MAX_DOMAINS,
    MAX_DURATION_HOURS,
    MAX_DURATION_MINUTES,
    MAX_ENV_VALUE_CHARS,
    MAX_ENV_VARS,
    MAX_GPU_TYPE_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_JOB_GPUS,
    MAX_PATH_CHARS,
    MAX_PIECES,
    MAX_POD_TEMPLATE_BYTES,
    MAX_POWER_PER_GPU_KW,
    MAX_SCRIPT_BYTES,
    MAX_VOLUMES,
)
from carbonsched.service.runs import job_from_spec as run_job_from_spec
from carbonsched.store.rolling_state import job_from_spec as rolling_job_from_spec
from carbonsched.store.rolling_state import job_spec as rolling_job_spec
from carbonsched.workload.files import read_workload
from carbonsched.workload.schema import JOB_FIELDS, JobSpec, invalid_spec_detail

TOKEN = "job-schema-test-admin-token-5b1e"

RECORD = {"id": "ft-1", "tenant": "research", "kind": "training", "gpu_type": "A100",
          "gpus": 8, "duration_minutes": 90, "power_per_gpu_kw": 0.8125,
          "earliest_start": "2023-07-15T00:20:00+02:00", "deadline": "2023-07-15T20:00:00Z",
          "allowed_sites": ["cn-nm-horinger", "cn-he-zhangjiakou"], "preemptible": True,
          "checkpoint_overhead_minutes": 5, "max_pieces": 3}
"""A job using every field: sub-hour start and duration, preemptible, in pieces."""


def record(**over: object) -> dict:
    """RECORD with fields replaced (``None`` drops a field)."""
    out = RECORD | over
    return {k: v for k, v in out.items() if v is not None}


# --- the entry points -----------------------------------------------------------------------------

def from_json(tmp_path: Path, rec: dict, name: str = "jobs.json") -> Job:
    p = tmp_path / name
    p.write_text(json.dumps({"jobs": [rec]}))
    return read_workload(p).jobs[0]


JSON_CELLS = ("command", "args", "env", "volumes", "pod_template")
"""Payload columns whose list or mapping is JSON text in a CSV cell (docs/workload.md)."""


def cell(v: object, column: str = "") -> str:
    """A value as a CSV cell, the way a person writes one."""
    if column in JSON_CELLS and not isinstance(v, str) and v is not None:
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ";".join(v)
    return "" if v is None else str(v)


def csv_text(rec: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = ["kind", *(k for k in rec if k != "kind")]
    w.writerow(cols)
    w.writerow([cell(rec.get(c, "batch" if c == "kind" else None), c) for c in cols])
    return buf.getvalue()


def from_csv(tmp_path: Path, rec: dict, name: str = "jobs.csv") -> Job:
    p = tmp_path / name
    p.write_text(csv_text(rec))
    return read_workload(p).jobs[0]


def file_error(tmp_path: Path, rec: dict, suffix: str) -> str:
    p = tmp_path / f"bad{suffix}"
    p.write_text(json.dumps({"jobs": [rec]}) if suffix == ".json" else csv_text(rec))
    with pytest.raises(WorkloadError) as info:
        read_workload(p)
    return str(info.value)


def schema_message(rec: dict) -> tuple[str, str]:
    """The job schema's own first error for ``rec``: ``(field, message)``."""
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(rec)
    e = info.value.errors()[0]
    return str(e["loc"][0]), e["msg"]


class Api:
    """The service app behind FastAPI's TestClient (admin token; no plan loaded)."""

    def __init__(self, client, app) -> None:
        self.client, self.app = client, app

    def post(self, path: str, body: dict):
        return self.client.post(path, json=body, headers={"Authorization": f"Bearer {TOKEN}"})

    def stored_spec(self, job_id: str) -> dict:
        """The spec the store holds for a submitted job, as its JSON text reads back."""
        row = self.app.state.svc.db.get_job(job_id)
        assert row is not None, job_id
        return json.loads(json.dumps(row["spec"]))


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    from fastapi.testclient import TestClient

    from carbonsched.api.app import create_app
    from carbonsched.config import Settings

    d = tmp_path_factory.mktemp("api")
    settings = Settings(database_url=f"sqlite:///{d}/service.sqlite", cron_enabled=False,
                        bootstrap_admin_token=TOKEN)
    app = create_app(settings)
    with TestClient(app) as client:
        yield Api(client, app)


# --- the same record, the same job --------------------------------------------------------------

SAME = {
    "every field": record(),
    "fraction of an hour": record(id="ft-2", duration_minutes=None, duration_hours=1.5,
                                  preemptible=None, checkpoint_overhead_minutes=None,
                                  max_pieces=None),
    "defaults only": {"id": "ft-3", "gpu_type": "T4", "gpus": 1, "duration_minutes": 45,
                      "power_per_gpu_kw": 0.14, "earliest_start": "2023-07-15T00:00:00Z",
                      "deadline": "2023-07-15T03:00:00Z"},
}


@pytest.mark.parametrize("rec", SAME.values(), ids=SAME.keys())
def test_the_same_record_is_the_same_job_at_every_entry_point(tmp_path, api, rec):
    want = JobSpec.model_validate(rec).to_job()
    assert from_json(tmp_path, rec) == want
    assert from_csv(tmp_path, rec) == want
    r = api.post("/v1/jobs", {"jobs": [rec]})
    assert r.status_code == 201, r.text
    stored = api.stored_spec(rec["id"])
    assert run_job_from_spec(stored) == want             # the daily run's reading
    assert rolling_job_from_spec(stored) == want         # the rolling run's reading
    # JobSpec -> stored JSON -> JobSpec -> Job
    again = JobSpec.model_validate_json(JobSpec.model_validate(rec).model_dump_json())
    assert again.to_job() == want
    assert rolling_job_from_spec(json.loads(json.dumps(rolling_job_spec(want)))) == want


def test_sub_hour_durations_and_pieces_are_accepted_by_the_api(api):
    """The fault: the API refused minutes, preemptible and pieces that the file accepts."""
    rec = record(id="pieces-1", duration_minutes=50)
    r = api.post("/v1/jobs", {"jobs": [rec]})
    assert r.status_code == 201, r.text
    job = run_job_from_spec(api.stored_spec("pieces-1"))
    assert (job.duration_minutes, job.preemptible, job.checkpoint_overhead_minutes,
            job.max_pieces) == (50, True, 5, 3)
    hours = record(id="pieces-2", duration_minutes=None, duration_hours=0.75)
    assert api.post("/v1/jobs", {"jobs": [hours]}).status_code == 201
    assert run_job_from_spec(api.stored_spec("pieces-2")).duration_minutes == 45


def test_csv_text_is_read_as_values_and_a_wrong_flag_is_refused(tmp_path):
    rec = {k: cell(v) for k, v in record(id="text-1").items()}
    assert JobSpec.model_validate(rec).to_job() == from_json(tmp_path, record(id="text-1"))
    for word, want in (("true", True), ("1", True), ("yes", True), ("", False),
                       ("false", False), ("0", False), ("no", False)):
        spec = JobSpec.model_validate(rec | {"preemptible": word, "max_pieces": "1"})
        assert spec.preemptible is want, word
    assert schema_message(rec | {"preemptible": "maybe"}) == (
        "preemptible", "expected true or false, got 'maybe'; give true or false (CSV: "
        "true/false, 1/0 or empty)")


# --- every field: one bad value and one at the limit -------------------------------------------

FAR = "2200-12-31T00:00:00Z"
SITES = [f"site-{i}" for i in range(MAX_ALLOWED_SITES)]
LIMITS = [
    # field, known-bad record, record with the field at its limit
    ("id", record(id="x" * (MAX_IDENTIFIER_CHARS + 1)), record(id="x" * MAX_IDENTIFIER_CHARS)),
    ("tenant", record(tenant="t" * (MAX_IDENTIFIER_CHARS + 1)),
     record(tenant="t" * MAX_IDENTIFIER_CHARS)),
    ("kind", record(kind="gaming"), record(kind="batch")),
    ("gpu_type", record(gpu_type="G" * (MAX_GPU_TYPE_CHARS + 1)),
     record(gpu_type="G" * MAX_GPU_TYPE_CHARS)),
    ("gpus", record(gpus=0), record(gpus=MAX_JOB_GPUS)),
    ("duration_minutes", record(duration_minutes=MAX_DURATION_MINUTES + 1, deadline=FAR),
     record(duration_minutes=MAX_DURATION_MINUTES, deadline=FAR)),
    ("duration_hours", record(duration_minutes=None, duration_hours=0.01),
     record(duration_minutes=None, duration_hours=MAX_DURATION_HOURS, deadline=FAR)),
    ("power_per_gpu_kw", record(power_per_gpu_kw=MAX_POWER_PER_GPU_KW + 0.5),
     record(power_per_gpu_kw=MAX_POWER_PER_GPU_KW)),
    ("earliest_start", record(earliest_start="2023-07-15T00:00:00"),
     record(earliest_start="1970-01-01T00:00:00Z")),
    ("deadline", record(deadline="9999-01-01T00:00:00Z"), record(deadline=FAR)),
    ("allowed_sites", record(allowed_sites=[*SITES, "one-more"]), record(allowed_sites=SITES)),
    ("preemptible", record(preemptible="maybe"), record(preemptible="yes")),
    ("checkpoint_overhead_minutes",
     record(checkpoint_overhead_minutes=MAX_CHECKPOINT_OVERHEAD_MINUTES + 1),
     record(checkpoint_overhead_minutes=MAX_CHECKPOINT_OVERHEAD_MINUTES)),
    ("max_pieces", record(max_pieces=MAX_PIECES + 1), record(max_pieces=MAX_PIECES)),
    ("topology", record(topology="same-rack"), record(topology="same-domain", max_pieces=1)),
    ("max_domains", record(max_domains=MAX_DOMAINS + 1),
     record(max_domains=MAX_DOMAINS, max_pieces=1)),
    # payload fields (docs/workload.md, "Payload fields")
    ("template", record(template="t" * (MAX_IDENTIFIER_CHARS + 1)),
     record(template="llm-pretrain")),
    ("script", record(script="#!/bin/sh\n" + "x" * (MAX_SCRIPT_BYTES - 9)),
     record(script="#!/bin/sh\n" + "x" * (MAX_SCRIPT_BYTES - 10))),
    ("script_path", record(script_path="jobs/train.sh"),
     record(script_path="/" + "p" * (MAX_PATH_CHARS - 1))),
    ("command", record(command="x" * (MAX_COMMAND_CHARS + 1)),
     record(command="x" * MAX_COMMAND_CHARS)),
    ("args", record(command=["python3"], args=["a" * (MAX_COMMAND_CHARS + 1)]),
     record(command=["python3"], args=["a" * MAX_COMMAND_CHARS])),
    ("workdir", record(workdir="relative/dir"), record(workdir="/" + "w" * (MAX_PATH_CHARS - 1))),
    ("env", record(env={f"V{i}": "1" for i in range(MAX_ENV_VARS + 1)}),
     record(env={**{f"V{i}": "1" for i in range(MAX_ENV_VARS - 1)},
                 "_" + "N" * 127: "v" * MAX_ENV_VALUE_CHARS})),
    ("account", record(account="a" * 65), record(account="a" * 64)),
    ("partition", record(partition="gpu,cpu"), record(partition="p" * 64)),
    ("qos", record(qos="high prio"), record(qos="q" * 64)),
    ("image", record(image="ghcr.io/org/train:1.4 latest"),
     record(image="r" * 512)),
    ("volumes", record(volumes=[{"name": f"v{i}", "mount_path": f"/m{i}", "empty_dir": True}
                                for i in range(MAX_VOLUMES + 1)]),
     record(volumes=[{"name": f"v{i}", "mount_path": f"/m{i}", "empty_dir": True}
                     for i in range(MAX_VOLUMES)])),
    ("service_account", record(service_account="Trainer"),
     record(service_account="s" * 253)),
    ("pod_template", record(pod_template={"spec": {"containers": [
        {"name": "job", "image": "busybox", "args": ["x" * MAX_POD_TEMPLATE_BYTES]}]}}),
     record(pod_template={"spec": {"containers": [{"name": "job", "image": "busybox"}]}})),
    ("gpu_milli", record(gpus=1, gpu_milli=1001), record(gpus=1, gpu_milli=1000)),
    ("mig_profile", record(gpus=1, mig_profile="1g.40gb"),
     record(gpus=1, mig_profile="7g.80gb")),
]


def test_every_field_has_a_case():
    assert {f for f, _, _ in LIMITS} == set(JOB_FIELDS)


@pytest.mark.parametrize(("field", "bad", "edge"), LIMITS, ids=[c[0] for c in LIMITS])
def test_each_field_the_same_message_from_file_and_api(tmp_path, api, field, bad, edge):
    where, message = schema_message(bad)
    assert where == field
    # the workload file (JSON): the schema's message behind the entry and field
    path = tmp_path / "bad.json"
    assert file_error(tmp_path, bad, ".json") == (
        f"{path}, jobs[0] (id {bad['id']!r}), field {field!r}: {message} (see docs/workload.md)")
    # the workload file (CSV): the same rule, on the cells' text
    # (a CSV row's kind is checked first by the reader: the column also says 'inference')
    if field != "kind":
        text = {k: cell(v, k) for k, v in bad.items()}
        csv_where, csv_message = schema_message(text)
        assert file_error(tmp_path, bad, ".csv") == (
            f"{tmp_path / 'bad.csv'}, line 2, field {csv_where!r}: {csv_message} "
            "(see docs/workload.md)")
        assert csv_where == field
    # the API: 422 with the same message at the field, for a submission and a placement query
    r = api.post("/v1/jobs", {"jobs": [bad]})
    assert r.status_code == 422, r.text
    assert {"loc": ["body", "jobs", 0, field], "msg": message} in [
        {"loc": e["loc"], "msg": e["msg"]} for e in r.json()["detail"]]
    assert f"body.jobs.0.{field}: {message}" in r.json()["message"]
    r = api.post("/v1/placements", bad)
    assert r.status_code == 422, r.text
    assert message in [e["msg"] for e in r.json()["detail"]]
    # at the limit: accepted by the file and the API alike
    at = edge | {"id": edge["id"] if field == "id" else f"edge-{field}"}
    want = JobSpec.model_validate(at).to_job()
    assert from_json(tmp_path, at) == want
    r = api.post("/v1/jobs", {"jobs": [at]})
    if field == "allowed_sites":
        # the schema takes them; the service's catalog then refuses a site it lacks before
        # storing anything (the planner would refuse the job at every run)
        assert r.status_code == 404 and "unknown site 'site-0'" in r.json()["detail"], r.text
        return
    assert r.status_code == 201, r.text
    assert run_job_from_spec(api.stored_spec(at["id"])) == want


@pytest.mark.parametrize(("over", "field", "message"), [
    ({"gpus": 0}, "gpus",
     "must be 1..100000 GPUs, got 0; give a whole number of GPUs in 1..100000"),
    ({"deadline": "9999-01-01T00:00:00Z"}, "deadline",
     "timestamp '9999-01-01T00:00:00Z' is outside the supported years 1970..2200; give a time "
     "in the years 1970..2200"),
    ({"gpus": None}, "gpus", "is missing; give gpus for every job"),
    ({"duration_minutes": None}, "duration_minutes",
     "is missing; give duration_minutes (or duration_hours) for every job"),
    ({"max_pieces": 2, "preemptible": False}, "max_pieces",
     "max_pieces 2 > 1 on a job that is not preemptible; set preemptible to true, or "
     "max_pieces to 1"),
    ({"deadline": "2023-07-14T23:30:00Z"}, "deadline",
     "deadline 2023-07-14T23:30:00+00:00 is before earliest_start + duration "
     "(2023-07-14T23:50:00+00:00); give a deadline at least the job's duration after "
     "earliest_start"),
    ({"id": "a\nb"}, "id", "job id 'a\\nb' holds the non-printable character U+000A; give "
     "1..100 printable characters without '/', '\\', control or invisible characters, not "
     "'.' or '..'"),
    # below one minute: it passed the whole-minutes check as 0 minutes and failed later, unnamed
    ({"duration_minutes": None, "duration_hours": 5e-324}, "duration_hours",
     "5e-324 h is shorter than one minute (0.0166667 h); give at least 1 minute: "
     "duration_minutes >= 1 or duration_hours >= 1/60"),
])
def test_the_messages_read_as_documented(tmp_path, api, over, field, message):
    bad = record(**over)                 # None: the field is left out
    assert schema_message(bad) == (field, message)
    assert f"field {field!r}: {message} (see docs/workload.md)" in \
        file_error(tmp_path, bad, ".json")
    r = api.post("/v1/jobs", {"jobs": [bad]})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == message


def test_one_minute_in_hours_is_the_shortest_job():
    job = JobSpec.model_validate(record(duration_minutes=None, duration_hours=1 / 60)).to_job()
    assert job.duration_minutes == 1


def test_unknown_fields_are_named_first(tmp_path, api):
    bad = record(gpu=8, gpus=None)      # a typo: 'gpu' for 'gpus'
    fields = ", ".join(JOB_FIELDS)
    message = f"unknown field; remove it or use one of {fields}"
    assert schema_message(bad) == ("gpu", message)
    assert f"field 'gpu': {message}" in file_error(tmp_path, bad, ".json")
    r = api.post("/v1/jobs", {"jobs": [bad]})
    assert r.json()["detail"][0] == {"loc": ["body", "jobs", 0, "gpu"], "msg": message,
                                     "type": "extra_forbidden"}


def test_a_stored_spec_the_schema_refuses_is_named_by_its_first_field():
    # the InvalidSpec detail both read-backs of a stored spec give (the API's jobs, the
    # rolling state): two fields refused, the first named, to the letter
    bad = record(gpus=0, power_per_gpu_kw=-1)
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(bad)
    assert [e["loc"] for e in info.value.errors()] == [("gpus",), ("power_per_gpu_kw",)]
    assert invalid_spec_detail(info.value) == (
        "its stored spec no longer passes the job schema (field 'gpus': must be 1..100000 "
        "GPUs, got 0; give a whole number of GPUs in 1..100000); submit it again as the "
        "schema asks, under a new id (docs/workload.md)")
    # another error (JobSpec.to_job's InputError) is named by its text
    assert invalid_spec_detail(InputError("no such thing; give one")) == (
        "its stored spec no longer passes the job schema (no such thing; give one); submit "
        "it again as the schema asks, under a new id (docs/workload.md)")


def test_year_9999_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    from carbonsched.cli.app import app
    from carbonsched.pipeline import daily

    def boom(*a, **k):
        raise AssertionError("forecasting started before the input was refused")

    monkeypatch.setattr(daily, "gather_forecasts", boom)
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", f"sqlite:///{tmp_path}/store.db")
    p = tmp_path / "far.json"
    p.write_text(json.dumps({"jobs": [record(deadline="9999-01-01T00:00:00Z")]}))
    r = CliRunner().invoke(app, ["plan", "--no-store", "--date", "2023-07-15", "--jobs", str(p)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert "field 'deadline': timestamp '9999-01-01T00:00:00Z' is outside the supported years " \
        "1970..2200" in " ".join(r.output.split())


# --- the OpenAPI document states the rules the schema refuses by (issue 32 item 11) -------------

@pytest.fixture(scope="module")
def job_document(api):
    """A validator of ``JobCreate`` as the API's OpenAPI document states it (JSON Schema 2020-12,
    the document's components resolving its references)."""
    import jsonschema

    doc = api.client.get("/openapi.json").json()
    root = {"$ref": "#/components/schemas/JobCreate", "components": doc["components"]}
    return jsonschema.Draft202012Validator(root)


AGREE = [
    # what, record, accepted
    ("duration in minutes", record(), True),
    ("no duration", record(duration_minutes=None), False),
    ("a null duration", RECORD | {"duration_minutes": None}, False),
    ("both durations null", RECORD | {"duration_minutes": None, "duration_hours": None}, False),
    ("one minute in hours, the shortest", record(duration_minutes=None, duration_hours=1 / 60),
     True),
    ("below a minute: 5e-324 h", record(duration_minutes=None, duration_hours=5e-324), False),
    ("not whole minutes", record(duration_minutes=None, duration_hours=0.01), False),
    ("1.5 h", record(duration_minutes=None, duration_hours=1.5), True),
    ("pieces without preemptible", record(preemptible=False), False),
    ("pieces, preemptible not given", record(preemptible=None), False),
    ("one piece, not preemptible", record(preemptible=False, max_pieces=1), True),
    ("a blank id", record(id="   "), False),
    ("an id in blanks", record(id=" padded "), True),
    ("a blank GPU type", record(gpu_type="\u3000"), False),
    ("the last year as written", record(earliest_start="2200-12-31T19:00:00-05:00",
                                        deadline="2200-12-31T22:00:00-05:00"), True),
    ("the first year as written", record(earliest_start="1970-01-01T00:00:00+13:00",
                                         deadline="1970-01-01T05:00:00+13:00"), True),
    ("after the last year", record(deadline="2201-01-01T00:00:00+05:00"), False),
]


@pytest.mark.parametrize(("what", "rec", "accepted"), AGREE, ids=[a[0] for a in AGREE])
def test_the_openapi_document_accepts_what_the_api_accepts(api, job_document, what, rec,
                                                           accepted):
    """A job the document calls valid is accepted, and one it refuses is refused (422): the
    rules no JSON Schema states (deadline after earliest_start + duration, agreeing duration
    spellings) are kept out of these records."""
    if rec["id"] == RECORD["id"]:
        rec = rec | {"id": f"agree-{what}"}    # each accepted job is stored: ids differ
    errors = [e.message for e in job_document.iter_errors(rec)]
    assert (not errors) == accepted, errors
    r = api.post("/v1/jobs", {"jobs": [rec]})
    assert r.status_code == (201 if accepted else 422), r.text


# --- payloads (issue 33 item 1): one schema, rules across fields, templates -------------------

PAYLOAD = record(id="pay-1", command=["python3", "train.py"], args=["--epochs", "3"],
                 workdir="/scratch/run", env={"OMP_NUM_THREADS": "8", "RUN": "a;b=c"},
                 account="research", partition="a100", qos="low",
                 image="ghcr.io/org/train:1.4", service_account="trainer",
                 volumes=[{"name": "data", "mount_path": "/data", "claim": "datasets",
                           "read_only": True}])


def test_a_payload_is_the_same_at_every_entry_point(tmp_path, api):
    """The payload is not part of a Job's equality (the planner never reads it): compared
    here on its own, through the file (JSON, CSV), the API's stored spec and the rolling
    state's."""
    want = JobSpec.model_validate(PAYLOAD).to_job()
    assert want.payload is not None and want.payload.env_map["RUN"] == "a;b=c"
    assert from_json(tmp_path, PAYLOAD).payload == want.payload
    assert from_csv(tmp_path, PAYLOAD).payload == want.payload
    r = api.post("/v1/jobs", {"jobs": [PAYLOAD]})
    assert r.status_code == 201, r.text
    assert run_job_from_spec(api.stored_spec("pay-1")).payload == want.payload
    assert rolling_job_from_spec(json.loads(json.dumps(rolling_job_spec(want)))).payload == \
        want.payload


@pytest.mark.parametrize(("over", "field", "message"), [
    ({"env": {"1BAD": "x"}}, "env", "variable name '1BAD' is not a shell name; use letters, "
     "digits and '_', not starting with a digit, at most 128 characters"),
    ({"env": {"N" * 129: "x"}}, "env", f"variable name '{'N' * 129}' is not a shell name; use "
     "letters, digits and '_', not starting with a digit, at most 128 characters"),
    ({"env": {"carbonsched_piece": "7"}}, "env", "variable 'carbonsched_piece' is set by "
     "carbonsched for every piece (CARBONSCHED_*); rename it"),
    ({"env": "A=1;B"}, "env", "'B' is not NAME=value; write NAME=value pairs separated by ';' "
     "(or a JSON object)"),
    ({"script": "set -e\ntrue\n"}, "script", "the script starts with 'set -e', not '#!'; start "
     "it with an interpreter line such as '#!/bin/bash' (sbatch refuses a script without one)"),
    ({"script": "#!/bin/sh\ntrue\n", "command": "true"}, "command", "script and command are "
     "both given; give one of script, script_path, command (what the job runs)"),
    ({"pod_template": {"spec": {"containers": [{"name": "job", "image": "b"}]}},
      "image": "busybox"}, "image", "image is given with pod_template; put it inside the pod "
     "template, or drop pod_template"),
    ({"pod_template": {"spec": {"containers": []}}}, "pod_template", "the pod template has no "
     "spec.containers list of {name, image}; give spec.containers with at least one container "
     "with a name and an image (the one named 'job', else the first, gets the GPUs)"),
    ({"args": ["x"]}, "args", "args without command or image; give command (or image) with "
     "args"),
    ({"gpu_milli": 500}, "gpus", "a job with gpu_milli asks for one slice of one GPU, got gpus "
     "8; set gpus to 1 (or drop gpu_milli for whole GPUs)"),
    ({"gpus": 1, "gpu_milli": 0}, "gpu_milli", "must be 1..1000 1/1000 GPU, got 0; give a "
     "whole number of 1/1000 GPU in 1..1000"),
    ({"gpus": 1, "gpu_milli": 500, "mig_profile": "1g.10gb"}, "mig_profile", "gpu_milli and "
     "mig_profile are both given; give one: gpu_milli for a shared GPU, mig_profile for a MIG "
     "slice"),
    ({"gpus": 1, "gpu_type": "T4", "mig_profile": "1g.10gb"}, "mig_profile", "MIG profile "
     "'1g.10gb' is not one of the GPU type's; T4 has no MIG profiles (MIG GPUs: A30, "
     "A100-40GB, A100-80GB, H100, H100-94GB, H200) (NVIDIA MIG User Guide, Supported MIG "
     "Profiles); give one of its profiles, or gpu_milli"),
    ({"gpus": 1, "mig_profile": "1g10gb"}, "mig_profile", "'1g10gb' is not a valid MIG "
     "profile; give e.g. '1g.10gb'"),
    ({"volumes": [{"name": "d", "mount_path": "/d", "claim": "c", "host_path": "/x"}]},
     "volumes", "volume 'd' names 2 sources (host_path, claim); give exactly one of "
     "host_path, claim, config_map, secret, empty_dir"),
    # before: a false empty_dir counted as a source at entry, none at read-back, so a stored
    # job made every later run fail
    ({"volumes": [{"name": "d", "mount_path": "/d", "empty_dir": "no"}]},
     "volumes", "volume 'd' names 0 sources (none); give exactly one of "
     "host_path, claim, config_map, secret, empty_dir"),
    # before: accepted, then refused by sbatch ("DOS line breaks") at dispatch
    ({"script": "#!/bin/bash\r\necho hi\r\n", "command": None}, "script",
     "the script has Windows line ends (a carriage return, \\r); save it with Unix line "
     "ends (\\n): sbatch refuses a script with DOS line breaks"),
    ({"command": "python train.py\r\n"}, "command", "the command has Windows line ends (a "
     "carriage return, \\r); use Unix line ends (\\n): a shell reads the \\r as part of a "
     "word, and sbatch refuses a script with DOS line breaks"),
])
def test_payload_rules_read_as_documented(tmp_path, api, over, field, message):
    bad = record(**over)
    assert schema_message(bad) == (field, message)
    assert f"field {field!r}: {message} (see docs/workload.md)" in \
        file_error(tmp_path, bad, ".json")
    r = api.post("/v1/jobs", {"jobs": [bad]})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == message


POD = [{"name": "job", "image": "busybox:1.36"}]
"""The one container of the pod templates below."""


def pod(**spec) -> dict:
    """A pod template of :data:`POD` and ``spec``'s fields."""
    return {"spec": {"containers": POD, **spec}}


@pytest.mark.parametrize(("template", "message"), [
    (pod(nodeSelector=["zone-a"]), "the pod template's spec.nodeSelector is ['zone-a'], not a "
     "map of strings to strings; give it as JSON like {\"disktype\": \"ssd\"}"),
    (pod(nodeSelector={"zone": 1}), "the pod template's spec.nodeSelector is {'zone': 1}, not "
     "a map of strings to strings; give it as JSON like {\"disktype\": \"ssd\"}"),
    (pod(tolerations={"key": "gpu"}), "the pod template's spec.tolerations is {'key': 'gpu'}, "
     "not a list of objects; give it as JSON like [{\"key\": \"gpu\", \"operator\": \"Exists\", "
     "\"effect\": \"NoSchedule\"}]"),
    (pod(tolerations=[{"key": "gpu", "tolerationSeconds": "60"}]), "the pod template's "
     "spec.tolerations[0].tolerationSeconds is '60', not an integer; give it as JSON like 30"),
    (pod(affinity=["zone-a"]), "the pod template's spec.affinity is ['zone-a'], not an object; "
     "give it as JSON like {\"nodeAffinity\": {\"requiredDuringSchedulingIgnoredDuringExecution"
     "\": {...}}}"),
    (pod(volumes={"name": "data"}), "the pod template's spec.volumes is {'name': 'data'}, not a "
     "list of objects; give it as JSON like [{\"name\": \"data\", \"persistentVolumeClaim\": "
     "{\"claimName\": \"datasets\"}}]"),
    (pod(volumes=[{"emptyDir": {}}]), "the pod template's spec.volumes[0] has no name; give it a "
     "name (a non-empty string)"),
    ({"spec": {"containers": [{**POD[0], "resources": {"limits": ["nvidia.com/gpu"]}}]}},
     "the pod template's spec.containers[0].resources.limits is ['nvidia.com/gpu'], not a map "
     "of resource names to quantities (strings or integers); give it as JSON like "
     "{\"memory\": \"8Gi\", \"cpu\": 4}"),
    ({"spec": {"containers": [{**POD[0], "resources": {"requests": {"cpu": 0.5}}}]}},
     "the pod template's spec.containers[0].resources.requests is {'cpu': 0.5}, not a map of "
     "resource names to quantities (strings or integers); give it as JSON like "
     "{\"memory\": \"8Gi\", \"cpu\": 4}"),
    ({"spec": {"containers": [{**POD[0], "resources": "8Gi"}]}}, "the pod template's "
     "spec.containers[0].resources is '8Gi', not an object; give it as JSON like "
     "{\"limits\": {\"memory\": \"8Gi\"}, \"requests\": {\"cpu\": \"4\"}}"),
    ({"spec": {"containers": [{**POD[0], "env": {"OMP_NUM_THREADS": "8"}}]}}, "the pod "
     "template's spec.containers[0].env is {'OMP_NUM_THREADS': '8'}, not a list of objects; "
     "give it as JSON like [{\"name\": \"OMP_NUM_THREADS\", \"value\": \"8\"}]"),
    ({"spec": {"containers": [{**POD[0], "env": [{"name": "N", "value": 8}]}]}}, "the pod "
     "template's spec.containers[0].env[0].value is 8, not a string; give it as JSON like "
     "\"value\""),
    ({"metadata": {"labels": ["team"]}, **pod()}, "the pod template's metadata.labels is "
     "['team'], not a map of strings to strings; give it as JSON like {\"team\": \"vision\"}"),
    ({"metadata": {"labels": {"team": 7}}, **pod()}, "the pod template's metadata.labels is "
     "{'team': 7}, not a map of strings to strings; give it as JSON like {\"team\": \"vision\"}"),
    ({"metadata": {"annotations": {"owner": ["a"]}}, **pod()}, "the pod template's "
     "metadata.annotations is {'owner': ['a']}, not a map of strings to strings; give it as JSON "
     "like {\"example.com/owner\": \"vision-team\"}"),
    ({"metadata": {"labels": {"team": "v" * 64}}, **pod()}, "the pod template's label 'team' "
     f"has the value {'v' * 40!r}... (64 characters), not a Kubernetes label value;"
     " give at most 63 characters of [A-Za-z0-9-_.] with alphanumeric ends (or an "
     "empty value)"),
    ({"metadata": {"annotations": {"Owner Team": "a"}}, **pod()}, "the pod template's "
     "metadata.annotations key 'Owner Team' is not a Kubernetes annotation key; give "
     "[prefix/]name: a name of at most 63 characters of [A-Za-z0-9-_.] with alphanumeric ends, "
     "an optional DNS subdomain prefix"),
    ({"metadata": {"name": "mine", "labels": {"team": "v"}}, **pod()}, "the pod template's "
     "metadata has name, which carbonsched does not use (it names and places each object "
     "itself); give only labels and annotations (merged into the pod's metadata)"),
], ids=["nodeSelector-list", "nodeSelector-int", "tolerations-map", "toleration-seconds",
        "affinity-list", "volumes-map", "volume-no-name", "limits-list", "requests-float",
        "resources-text", "env-map", "env-value-int", "labels-list", "label-int",
        "annotation-list", "label-value-64", "annotation-key", "metadata-name"])
def test_a_pod_template_field_of_the_wrong_type_is_refused_naming_it(tmp_path, api, template,
                                                                    message):
    """Before, only spec.containers was read: these were accepted, and the first broke every
    dispatch pass (a TypeError building the pod), the metadata was dropped without a word."""
    bad = record(pod_template=template)
    assert schema_message(bad) == ("pod_template", message)
    assert f"field 'pod_template': {message} (see docs/workload.md)" in \
        file_error(tmp_path, bad, ".json")
    assert f"field 'pod_template': {message} (see docs/workload.md)" in \
        file_error(tmp_path, bad, ".csv")
    r = api.post("/v1/jobs", {"jobs": [bad]})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == message


GOOD_POD = {
    "metadata": {"labels": {"team": "v" * 63, "example.com/tier": "", "a": "b"},
                 "annotations": {"example.com/owner": "vision team, room 4", "note": ""}},
    "spec": {"containers": [{"name": "job", "image": "busybox:1.36",
                             "env": [{"name": "N", "value": "8"},
                                     {"name": "POD", "valueFrom": {"fieldRef": {
                                         "fieldPath": "metadata.name"}}}],
                             "resources": {"limits": {"memory": "8Gi", "cpu": 4},
                                           "requests": {"cpu": "500m"}},
                             "volumeMounts": [{"name": "data", "mountPath": "/data",
                                               "readOnly": True}]}],
             "nodeSelector": {"zone": "a"}, "affinity": {"nodeAffinity": {}},
             "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule",
                              "tolerationSeconds": 60}],
             "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
             "priorityClassName": "batch", "terminationGracePeriodSeconds": 30}}
"""A pod template at the limits of the checks: a 63-character label value, an empty one, a
prefixed key, integer and string quantities, every checked field of the right type."""


def test_a_pod_template_of_the_right_types_is_accepted_whole(tmp_path, api):
    spec = JobSpec.model_validate(record(pod_template=GOOD_POD))
    assert spec.pod_template == GOOD_POD
    assert from_json(tmp_path, record(pod_template=GOOD_POD)).payload.pod_template == GOOD_POD
    assert from_csv(tmp_path, record(pod_template=GOOD_POD)).payload.pod_template == GOOD_POD
    r = api.post("/v1/jobs", {"jobs": [record(id="pod-ok", pod_template=GOOD_POD)]})
    assert r.status_code == 201, r.text


def test_a_pod_template_container_image_given_as_a_path_is_refused(tmp_path, api):
    """A pod template runs only on Kubernetes, which cannot pull an OCI bundle path; the job's
    own ``image`` may be one (Slurm's ``--container``: the planner keeps it to Slurm sites)."""
    message = ("the pod template's spec.initContainers[0].image is '/opt/bundles/init', a path "
               "(an OCI bundle, which only Slurm's --container runs), not an image a pod can "
               "pull; give a registry image such as 'ghcr.io/org/train:1.4'")
    bad = record(pod_template=pod(initContainers=[{"name": "init",
                                                   "image": "/opt/bundles/init"}]))
    assert schema_message(bad) == ("pod_template", message)
    r = api.post("/v1/jobs", {"jobs": [bad]})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == message
    # at the limit: the job's own image as a path is a Slurm payload, accepted
    job = JobSpec.model_validate(record(image="/opt/bundles/train", command="true")).to_job()
    assert job.payload.bundle_image and not job.payload.runs_on("kubernetes")


def test_every_mig_profile_of_the_table_is_accepted_for_its_gpu_type():
    from carbonsched.domain import MIG_PROFILES, mig_profiles

    assert mig_profiles("A100") == tuple(dict.fromkeys(
        MIG_PROFILES["A100-40GB"] + MIG_PROFILES["A100-80GB"]))
    assert mig_profiles("h800") == MIG_PROFILES["H100"] and mig_profiles("V100") == ()
    for gpu_type, profiles in MIG_PROFILES.items():
        for p in profiles:
            job = JobSpec.model_validate(record(gpus=1, gpu_type=gpu_type, mig_profile=p))
            assert job.to_job().payload.mig_profile == p


TEMPLATES = {"llm": {"image": "trainer:1", "command": ["torchrun", "train.py"],
                     "env": {"A": "1", "B": "template"}, "qos": "high"},
             "broken": {"env": {"CARBONSCHED_PIECE": "3"}}}


def test_a_template_lies_under_the_jobs_own_fields():
    from carbonsched.workload.schema import apply_templates

    job = JobSpec.model_validate(record(template="llm", env={"B": "job"}, qos="low")).to_job()
    (got,) = apply_templates([job], TEMPLATES)
    p = got.payload
    assert (p.template, p.image, p.command, p.qos) == ("llm", "trainer:1",
                                                       ("torchrun", "train.py"), "low")
    assert p.env_map == {"A": "1", "B": "job"}            # merged, the job's value wins
    # a job naming what it runs drops the template's run fields (no "both given")
    script = JobSpec.model_validate(record(template="llm", script="#!/bin/sh\ntrue\n")).to_job()
    (got,) = apply_templates([script], TEMPLATES)
    assert got.payload.command is None and got.payload.script == "#!/bin/sh\ntrue\n"
    assert apply_templates([got], TEMPLATES)[0].payload == got.payload    # idempotent


def test_an_unknown_template_or_a_bad_template_field_is_refused_naming_the_job():
    from carbonsched.workload.schema import apply_templates

    job = JobSpec.model_validate(record(template="nope")).to_job()
    with pytest.raises(WorkloadError, match=r"^jobs.json, job ft-1, field 'template': unknown "
                       r"template 'nope'; the catalog defines: broken, llm; use one of them, "
                       r"or define \[templates.nope\] in the catalog$"):
        apply_templates([job], TEMPLATES, "jobs.json")
    job = JobSpec.model_validate(record(template="broken")).to_job()
    with pytest.raises(WorkloadError, match="field 'env': variable 'CARBONSCHED_PIECE' is set "
                       "by carbonsched for every piece"):
        apply_templates([job], TEMPLATES)


def test_the_api_applies_the_catalogs_template_and_refuses_an_unknown_one(api):
    from carbonsched.catalog import load_catalog

    names = ", ".join(sorted(load_catalog("china-eastdata-westcompute").templates))
    r = api.post("/v1/jobs", {"jobs": [record(id="tmpl-1", template="llm-pretrain",
                                              env={"RUN": "7"})]})
    assert r.status_code == 201, r.text
    stored = api.stored_spec("tmpl-1")
    assert stored["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert stored["env"] == {"NCCL_DEBUG": "WARN", "PYTHONUNBUFFERED": "1", "RUN": "7"}
    assert stored["template"] == "llm-pretrain"          # recorded as submitted
    # the run reads the merged fields as the job: the template is not applied again
    job = run_job_from_spec(stored)
    assert job.payload.template is None
    assert job.payload.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    message = (f"unknown template 'nope'; the catalog defines: {names}; use one of them, or "
               "define [templates.nope] in the catalog")
    r = api.post("/v1/jobs", {"jobs": [record(id="tmpl-2"), record(id="tmpl-3",
                                                                   template="nope")]})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "jobs", 1, "template"]
    assert r.json()["detail"][0]["msg"] == message
    assert api.app.state.svc.db.get_job("tmpl-2") is None    # nothing of the request stored
    r = api.post("/v1/placements", record(id="tmpl-4", template="nope"))
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == message


def test_an_unknown_template_stops_the_plan_before_forecasting(tmp_path, monkeypatch):
    from carbonsched.cli.app import app
    from carbonsched.pipeline import daily

    def boom(*a, **k):
        raise AssertionError("forecasting started before the input was refused")

    monkeypatch.setattr(daily, "gather_forecasts", boom)
    p = tmp_path / "tmpl.json"
    p.write_text(json.dumps({"jobs": [record(template="nope")]}))
    r = CliRunner().invoke(app, ["plan", "--no-store", "--date", "2023-07-15", "--jobs", str(p)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert "job ft-1, field 'template': unknown template 'nope'; the catalog defines: " \
        "batch-eval, llm-pretrain" in " ".join(r.output.split())


def test_a_catalog_template_with_a_field_that_is_no_payload_field_is_refused(tmp_path):
    import tomllib

    from carbonsched.catalog import parse_catalog
    from carbonsched.errors import CatalogError

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "regions" / "global.toml"
                          ).read_text())
    data["templates"]["llm-pretrain"]["gpus"] = 8
    with pytest.raises(CatalogError, match="template 'llm-pretrain'.*unknown field\\(s\\) "
                       "'gpus'.*a template sets payload fields only"):
        parse_catalog(data, "global.toml", "global")


@pytest.mark.parametrize(("kind", "column", "value", "says"), [
    ("training", "slo_ms", "20", "field 'slo_ms': is not a field of training rows, got '20'; "
     "leave it empty in a training row (its fields: the job fields)"),
    ("batch", "area", "shanghai", "field 'area': is not a field of batch rows, got "
     "'shanghai'; leave it empty in a batch row (its fields: the job fields)"),
    ("inference", "duration_minutes", "90", "field 'duration_minutes': is not a field of "
     "inference rows, got '90'; leave it empty in an inference row (its fields: kind, "
     "gpu_type, gpus, power_per_gpu_kw, area, hour, slo_ms)"),
    ("inference", "duration_minutes", "", None),     # at the limit: empty cells are fine
    ("training", "slo_ms", " ", None),
])
def test_a_csv_value_in_a_column_of_the_other_kind_is_refused_not_dropped(tmp_path, kind,
                                                                          column, value, says):
    # before, the CSV reader kept only the row kind's columns: the inference row's 90 minutes
    # or the job's SLO were dropped without a word (the JSON reader refuses the field)
    header = ("kind,id,tenant,gpu_type,gpus,duration_hours,power_per_gpu_kw,earliest_start,"
              "deadline,area,hour,slo_ms,duration_minutes")
    if kind == "inference":
        cells = {"kind": kind, "gpu_type": "A100", "gpus": "2", "power_per_gpu_kw": "0.5",
                 "area": "shanghai", "hour": "2023-07-15T00:00:00Z", "slo_ms": "50"}
    else:
        cells = {"kind": kind, "id": "j", "tenant": "t", "gpu_type": "A100", "gpus": "1",
                 "duration_hours": "2", "power_per_gpu_kw": "0.5",
                 "earliest_start": "2023-07-15T00:00:00Z", "deadline": "2023-07-16T00:00:00Z"}
    cells[column] = value
    p = tmp_path / "w.csv"
    p.write_text(header + "\n" + ",".join(cells.get(c, "") for c in header.split(",")) + "\n")
    if says is None:
        wl = read_workload(p)
        assert len(wl.jobs) + len(wl.inference) == 1
        return
    with pytest.raises(WorkloadError) as info:
        read_workload(p)
    assert str(info.value) == f"{p}, line 2, {says} (see docs/workload.md)"
