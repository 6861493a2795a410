"""``POST /v1/jobs`` stores all of a request or none of it, and its answer says which.

Before, each job of a submission was committed on its own: when job k lost every booking
attempt (503 "nothing was reserved — retry") or met an id a racing request had just stored
(409 "nothing of the request is stored"), jobs 0..k-1 were stored all the same, and the
client's retry of the same request answered 409 for the first of them. Now the jobs stored
before the failure are withdrawn (deleted as they were stored, dropped from the book): the
answer says so and a retry of the same request succeeds. A job that cannot be withdrawn (the
store failed too, or a run recorded it meanwhile) is named in the answer, as standing.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from carbonsched.api.app import create_app
from carbonsched.clock import FixedClock, parse_as_of
from carbonsched.config import Settings
from carbonsched.errors import StoreUnavailableError
from carbonsched.service import booking
from tests.conftest import shared_data_dir
from tests.service.conftest import AS_OF, CATALOG, copy_db

pytestmark = pytest.mark.shared_data

TOKEN = "cst_atomic-" + "x" * 30
AUTH = {"Authorization": f"Bearer {TOKEN}"}
IDS = ("sub-a", "sub-b", "sub-c")
BODY = {"jobs": [{"id": i, "tenant": "t1", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
                  "power_per_gpu_kw": 0.7, "earliest_start": "2023-07-15T00:00:00Z",
                  "deadline": "2023-07-15T20:00:00Z"} for i in IDS]}


@pytest.fixture
def service(plan_db, tmp_path):
    s = Settings(database_url=copy_db(plan_db, tmp_path), catalog=CATALOG, cron_enabled=False,
                 as_of=parse_as_of(AS_OF), bootstrap_admin_token=TOKEN,
                 data_dir=shared_data_dir(), dispatcher="", dispatch_loops=False)
    app = create_app(s, FixedClock(s.as_of))
    with TestClient(app) as c:
        state = app.state.svc
        assert state.book is not None     # the plan's free capacity: jobs are booked
        yield c, state


def failing_on_second(monkeypatch, before=None, contention=True):
    """Make the request's 2nd booking fail: ``before(job)`` first, then 503 (``contention``)
    or the real booking."""
    calls = []

    def reserve(book, db, job, spec, now, alternatives=3):
        calls.append(job.id)
        if len(calls) == 2:
            if before is not None:
                before(job)
            if contention:
                raise booking.BookingContentionError(
                    f"job {job.id!r}: the capacity offered was taken by other reservations 8 "
                    "times in a row while booking; nothing was reserved — retry in 1 s")
        return booking.reserve_job(book, db, job, spec, now, alternatives)

    monkeypatch.setattr("carbonsched.api.routes.jobs.reserve_job", reserve)
    return calls


def stored(state) -> dict:
    return {i: state.db.get_job(i) for i in IDS if state.db.get_job(i) is not None}


def test_a_booking_that_fails_midway_stores_nothing_and_a_retry_succeeds(service, monkeypatch):
    c, state = service
    calls = failing_on_second(monkeypatch)
    r = c.post("/v1/jobs", json=BODY, headers=AUTH)
    assert calls == ["sub-a", "sub-b"]
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert r.json()["detail"] == (
        "job 'sub-b': the capacity offered was taken by other reservations 8 times in a row "
        "while booking; nothing was reserved — retry in 1 s; the 1 job(s) of this request "
        "stored before it were withdrawn: nothing of the request is stored; submit it again")
    # before: sub-a stayed stored (Planned, its capacity booked) under that answer
    assert stored(state) == {}
    assert "sub-a" not in state.book.reservations
    assert c.get("/v1/jobs/sub-a", headers=AUTH).status_code == 404
    # the retry of the same request (before: 409 for sub-a) stores every job, booked
    monkeypatch.undo()
    r = c.post("/v1/jobs", json=BODY, headers=AUTH)
    assert r.status_code == 201, r.text
    assert [(d["id"], d["state"]) for d in r.json()["data"]] == [(i, "Planned") for i in IDS]
    assert set(stored(state)) == set(IDS) and set(IDS) <= set(state.book.reservations)


def test_an_id_a_racing_request_stored_first_withdraws_only_this_requests_jobs(
        service, monkeypatch):
    c, state = service
    # another request stores sub-b between this request's check and its booking
    failing_on_second(monkeypatch, before=lambda job: state.db.add_jobs([booking.job_row(
        BODY["jobs"][1] | {"tenant": "other"}, None, False, state.clock.now())]),
        contention=False)
    r = c.post("/v1/jobs", json=BODY, headers=AUTH)
    assert r.status_code == 409, r.text
    assert r.json()["detail"] == (
        "job 'sub-b' already exists; job ids must be unique; the 1 job(s) of this request "
        "stored before it were withdrawn: nothing of the request is stored; submit it again")
    # this request's sub-a is gone; the racer's sub-b stays as it stored it
    assert set(stored(state)) == {"sub-b"} and stored(state)["sub-b"]["tenant"] == "other"


def test_jobs_that_cannot_be_withdrawn_are_named(service, monkeypatch):
    c, state = service
    failing_on_second(monkeypatch)

    def down(rows):
        raise StoreUnavailableError("store.sqlite", "withdrawing the jobs a refused request "
                                    "stored", "disk I/O error")

    monkeypatch.setattr(state.db, "withdraw_jobs", down)
    r = c.post("/v1/jobs", json=BODY, headers=AUTH)
    assert r.status_code == 503, r.text
    assert r.json()["detail"].endswith(
        "; job(s) 'sub-a' of this request were stored before it and could not be withdrawn "
        "(the store failed: disk I/O error): they stand (GET /v1/jobs/{id}) and a retry of "
        "the request answers 409 for them; submit the others without them")
    assert set(stored(state)) == {"sub-a"}
    # as said: the retry answers 409 for sub-a, the others are accepted without it
    monkeypatch.undo()
    assert c.post("/v1/jobs", json=BODY, headers=AUTH).status_code == 409
    r = c.post("/v1/jobs", json={"jobs": BODY["jobs"][1:]}, headers=AUTH)
    assert r.status_code == 201 and set(stored(state)) == set(IDS), r.text


def test_a_job_a_run_recorded_meanwhile_is_left_and_named(service, monkeypatch):
    c, state = service

    def recorded_by_a_run(job):
        state.db.update_job("sub-a", state="Pending", reason="InsufficientCapacity",
                            updated_at=state.clock.now().replace(microsecond=1))

    failing_on_second(monkeypatch, before=recorded_by_a_run)
    r = c.post("/v1/jobs", json=BODY, headers=AUTH)
    assert r.status_code == 503, r.text
    assert r.json()["detail"].endswith(
        "; job(s) 'sub-a' of this request were stored before it and could not be withdrawn "
        "(a run in progress may have read them, or one recorded them meanwhile): they stand "
        "(GET /v1/jobs/{id}) and a retry of the request answers 409 for them; submit the "
        "others without them")
    assert stored(state)["sub-a"]["reason"] == "InsufficientCapacity"


@pytest.mark.parametrize("live", [True, False])
def test_a_job_a_run_in_progress_may_have_read_is_left_and_named(service, monkeypatch, live):
    # before, it was deleted while a run that had read it planned and dispatched it: the job
    # ran with no record, under an answer that said nothing of the request was stored. At
    # the limit: a run whose lease has run out (its process died) does not hold them
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from carbonsched.store.service_models import RunRow

    c, state = service
    now = state.clock.now()
    assert state.db.claim_run("2023-07-16", "2023-07-16", now, "scheduled", "r1", now,
                              timedelta(minutes=5))
    until = datetime.now(UTC) + timedelta(minutes=5 if live else -5)
    with Session(state.db.engine) as s, s.begin():
        s.execute(update(RunRow).values(lease_expires_at=until))
    failing_on_second(monkeypatch)
    r = c.post("/v1/jobs", json=BODY, headers=AUTH)
    assert r.status_code == 503, r.text
    if live:
        assert "job(s) 'sub-a' of this request were stored before it and could not be " \
            "withdrawn (a run in progress may have read them" in r.json()["detail"]
        assert set(stored(state)) == {"sub-a"}
    else:
        assert r.json()["detail"].endswith("nothing of the request is stored; submit it again")
        assert stored(state) == {}
