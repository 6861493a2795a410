"""A cancel claims the unit's outbox row first, so it never races a submission or rewrites an end.

Before, ``cancel_unit`` took no lease and checked no state: a cancel during a dispatcher's
submission recorded ``Cancelled`` while the submission went on (the job ran, and the
dispatcher's own record could overwrite the cancel), and cancelling a finished unit rewrote
its ``Succeeded`` record. SQLite; the real-Slurm cancel is in ``test_dispatch_slurm.py``.
Passing ``adapters={}`` proves no backend is called (any call would raise ``KeyError``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import BackendJob
from carbonsched.catalog import load_catalog
from carbonsched.dispatch.lease import Claimant
from carbonsched.dispatch.outbox import cancel_job, cancel_unit
from carbonsched.domain import JobState, ReasonCode
from carbonsched.errors import BackendError, BackendUnavailableError, InputError, UnitHeldError
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

T0 = datetime(2027, 3, 14, 6, tzinfo=UTC)
CATALOG = load_catalog("global")


@pytest.fixture
def store(tmp_path) -> Store:
    st = Store(f"sqlite:///{tmp_path / 'o.sqlite'}")
    with Session(st.engine) as s:
        s.add(DispatchRow(
            key="j#0", job_id="j", piece=0, plan_id="p1", site="ca-on-toronto",
            backend="slurm:ontario", state="Pending", reason="AwaitingSubmit", detail="",
            request_json="{}", planned_start=T0, planned_end=T0 + timedelta(hours=1),
            attempts=0, created_at=T0, updated_at=T0))
        s.commit()
    return st


def _row(store: Store) -> DispatchRow:
    with Session(store.engine) as s:
        return s.scalars(select(DispatchRow).where(DispatchRow.key == "j#0")).one()


def _set(store: Store, **values) -> None:
    with store.engine.begin() as c:
        c.execute(update(DispatchRow).where(DispatchRow.key == "j#0").values(**values))


def test_a_unit_a_live_dispatcher_holds_is_not_cancelled_under_it(store):
    other = Claimant(store, 120, owner="host-b/dispatcher", is_dead=lambda _: False)
    assert other.claim(["ca-on-toronto"]).ids                      # a submission may be in flight
    with pytest.raises(UnitHeldError, match=r"j#0 of job j is being dispatched by "
                                            r"host-b/dispatcher \(its lease ends .*\); "
                                            r"nothing was cancelled"):
        cancel_unit(store, CATALOG, "j", adapters={})
    assert (_row(store).state, _row(store).lease_owner) == ("Pending", "host-b/dispatcher")


def test_a_pending_unit_never_tried_is_cancelled_without_a_backend_and_never_submitted(store):
    # its lease lapsed a second ago (the just-expired limit): the cancel may take it
    _set(store, lease_owner="host-b/dispatcher",
         lease_expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert cancel_unit(store, CATALOG, "j", adapters={}) == "cancelled"
    row = _row(store)
    assert (row.state, row.reason, row.lease_owner) == ("Cancelled", "Cancelled", None)
    # a dispatcher coming after it finds nothing to submit
    assert Claimant(store, 120, owner="host-c/dispatcher").claim(["ca-on-toronto"]).ids == []


@pytest.mark.parametrize("state", ["Succeeded", "Failed", "Cancelled"])
def test_an_ended_unit_keeps_its_record(store, state):
    end = T0 + timedelta(minutes=50)
    _set(store, state=state, reason="Completed", actual_start=T0, actual_end=end,
         submit_attempted_at=T0)
    assert cancel_unit(store, CATALOG, "j", adapters={}) == "already-ended"
    row = _row(store)
    assert (row.state, row.reason, row.actual_end) == (state, "Completed", end)
    assert row.lease_owner is None                                   # the cancel's lease let go


def test_a_unit_never_dispatched_is_named(store):
    with pytest.raises(InputError, match="job 'k' was never dispatched"):
        cancel_unit(store, CATALOG, "k", adapters={})


def test_carbonsched_cancel_says_what_it_did_to_each_piece(store):
    from tests.service.conftest import cli

    env = {"CARBONSCHED_DATABASE_URL": str(store.engine.url)}
    r = cli("cancel", "nope", "--catalog", "global", env=env)
    assert r.returncode == 2
    assert "job 'nope' was never dispatched; `carbonsched status` lists" in r.stderr
    r = cli("cancel", "j", "--from-piece", "1", "--catalog", "global", env=env)
    assert r.returncode == 2 and "job 'j' has no piece 1; its pieces: 0" in r.stderr
    r = cli("cancel", "j", "--catalog", "global", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cancelled j#0 at ca-on-toronto (slurm:ontario)"
    r = cli("cancel", "j", "--catalog", "global", env=env)             # again: nothing to do
    assert r.stdout.strip() == "j#0 had already ended (Cancelled); left as it is"


def _add_pieces(store: Store, n: int) -> None:
    with Session(store.engine) as s:
        for p in range(1, n):
            s.add(DispatchRow(
                key=f"j#{p}", job_id="j", piece=p, plan_id="p1", site="ca-on-toronto",
                backend="slurm:ontario", state="Pending", reason="AwaitingSubmit", detail="",
                request_json="{}", planned_start=T0 + timedelta(hours=2 * p),
                planned_end=T0 + timedelta(hours=2 * p + 1), attempts=0, created_at=T0,
                updated_at=T0))
        s.commit()


def _states(store: Store) -> dict[str, str]:
    with Session(store.engine) as s:
        return {r.key: r.state for r in s.scalars(select(DispatchRow))}


def test_a_job_in_pieces_is_claimed_whole_before_any_piece_is_cancelled(store):
    # before: pieces were claimed, cancelled and released one by one, so a dispatcher could
    # take a later piece between two of them and run it without its predecessor
    _add_pieces(store, 3)
    with store.engine.begin() as c:      # a live dispatcher holds the last piece
        c.execute(update(DispatchRow).where(DispatchRow.key == "j#2").values(
            lease_owner="host-b/dispatcher",
            lease_expires_at=datetime.now(UTC) + timedelta(minutes=2)))
    with pytest.raises(UnitHeldError, match="j#2 of job j is being dispatched by host-b"):
        cancel_job(store, CATALOG, "j", adapters={})
    assert _states(store) == {"j#0": "Pending", "j#1": "Pending", "j#2": "Pending"}
    with Session(store.engine) as s:     # the pieces the cancel had taken are let go
        assert {r.key: r.lease_owner for r in s.scalars(select(DispatchRow))} == {
            "j#0": None, "j#1": None, "j#2": "host-b/dispatcher"}
    _set_all(store, "j#2", lease_expires_at=datetime.now(UTC) - timedelta(seconds=1))
    done = cancel_job(store, CATALOG, "j", 1, adapters={})         # piece 1 and after
    assert [(o.key, o.outcome, o.state_before) for o in done] == [
        ("j#1", "cancelled", "Pending"), ("j#2", "cancelled", "Pending")]
    assert _states(store) == {"j#0": "Pending", "j#1": "Cancelled", "j#2": "Cancelled"}


def _set_all(store: Store, key: str, **values) -> None:
    with store.engine.begin() as c:
        c.execute(update(DispatchRow).where(DispatchRow.key == key).values(**values))


def test_a_unit_whose_lease_the_cancel_lost_is_not_written(store):
    # the cancel's renewals failed past the expiry and a dispatcher took the row over: the
    # cancel must not record Cancelled over the dispatcher's submission
    from carbonsched.dispatch.outbox import _cancel_held

    me = Claimant(store, 120, owner="host-a/cancel")
    assert me.claim_key("j#0")[0]
    _set(store, lease_owner="host-b/dispatcher")                      # taken over
    with pytest.raises(UnitHeldError, match="j#0 of job j: the cancel lost its lease to "
                                            "host-b/dispatcher"):
        _cancel_held(store, me, "j#0", "j", lambda: {}, lambda: T0)
    assert (_row(store).state, _row(store).lease_owner) == ("Pending", "host-b/dispatcher")
    _set(store, lease_owner="host-a/cancel")                           # still ours: written
    assert _cancel_held(store, me, "j#0", "j", lambda: {}, lambda: T0).outcome == "cancelled"


# -- a unit over on its backend before the outbox recorded it -------------------------------
# Before, the cancel read only the outbox row: a unit recorded Dispatched or Running (the refresh
# that records ends runs every few minutes, and never in CLI-only setups) but finished on its
# backend was cancelled there (a Kubernetes cancel deletes the completed Job and its logs) and
# recorded Cancelled for good (the refresh skips ended rows).

START, END = T0 + timedelta(minutes=2), T0 + timedelta(minutes=40)


class FakeBackend:
    """A backend whose current list reports ``listed`` (key -> BackendJob); records cancels."""

    def __init__(self, listed: dict | None = None, name: str = "kubernetes:ca/carbonsched",
                 down: bool = False) -> None:
        self.name, self.listed, self.down = name, listed or {}, down
        self.cancelled: list[str] = []

    def status(self, keys=None):
        if self.down:
            raise BackendUnavailableError(f"{self.name}: connection refused")
        return {k: v for k, v in self.listed.items() if keys is None or k in keys}

    def cancel(self, key: str) -> bool:
        self.cancelled.append(key)
        return key in self.listed

    def submit(self, request):  # pragma: no cover - never called here
        raise AssertionError("submit")

    def render(self, request):  # pragma: no cover
        raise AssertionError("render")


class FakeSlurm(FakeBackend):
    """A Slurm-like backend that also keeps accounting (``sacct``) of jobs its list forgot."""

    def __init__(self, listed=None, kept=None, accounting_down: bool = False) -> None:
        super().__init__(listed, name="slurm:ontario")
        self.kept, self.accounting_down = kept or {}, accounting_down
        self.asked: list[list[str]] = []

    def accounting(self, units):
        self.asked.append([u.key for u in units])
        if self.accounting_down:
            raise BackendError("sacct: Slurm accounting storage is disabled")
        return {u.key: self.kept[u.key] for u in units if u.key in self.kept}


def _job(state: str, reason: str, raw: str, end: datetime | None = END) -> BackendJob:
    return BackendJob(key="j#0", backend_id="ontario:42", state=JobState(state),
                      reason=ReasonCode(reason), raw_state=raw, actual_start=START,
                      actual_end=end, detail=f"backend says {raw}")


def _on_backend(store: Store, state: str) -> None:
    _set(store, state=state, reason="Started" if state == "Running" else "Submitted",
         backend_id="ontario:42", submit_attempted_at=T0, submitted_at=T0,
         actual_start=START if state == "Running" else None)


@pytest.mark.parametrize("outbox", ["Dispatched", "Running"])
@pytest.mark.parametrize(("state", "reason", "raw"), [
    ("Succeeded", "Completed", "complete"), ("Failed", "BackendFailed", "failed")])
def test_a_unit_over_on_its_backend_is_recorded_as_it_ended_not_cancelled(
        store, outbox, state, reason, raw):
    _on_backend(store, outbox)
    backend = FakeBackend({"j#0": _job(state, reason, raw)})
    (o,) = cancel_job(store, CATALOG, "j", adapters={"ca-on-toronto": backend})
    assert (o.outcome, o.state_before, o.state, o.ended_on_backend) == (
        "already-ended", outbox, state, True)
    assert backend.cancelled == []                        # the Job and its logs are kept
    row = _row(store)
    assert (row.state, row.reason, row.actual_start, row.actual_end, row.times_source) == (
        state, reason, START, END, "job-status")
    assert row.lease_owner is None


def test_a_slurm_unit_its_list_forgot_is_recorded_from_its_accounting(store):
    # squeue forgets a finished job after a few minutes; sacct keeps it
    _on_backend(store, "Running")
    kept = _job("Succeeded", "Completed", "COMPLETED", end=END + timedelta(seconds=7))
    backend = FakeSlurm(kept={"j#0": kept})
    assert cancel_unit(store, CATALOG, "j", adapters={"ca-on-toronto": backend}) == (
        "already-ended")
    assert (backend.cancelled, backend.asked) == ([], [["j#0"]])
    row = _row(store)
    assert (row.state, row.actual_end, row.times_source) == (
        "Succeeded", END + timedelta(seconds=7), "sacct")


def test_a_unit_still_running_on_its_backend_is_cancelled(store):
    # the limit: the backend reports it running (no end yet): cancelled as before
    _on_backend(store, "Running")
    backend = FakeSlurm({"j#0": _job("Running", "Started", "RUNNING", end=None)})
    (o,) = cancel_job(store, CATALOG, "j", adapters={"ca-on-toronto": backend}, clock=lambda: END)
    assert (o.outcome, o.state) == ("cancelled", "Cancelled")
    assert (backend.cancelled, backend.asked) == (["j#0"], [])      # no accounting read
    row = _row(store)
    assert (row.state, row.reason, row.actual_end) == ("Cancelled", "Cancelled", END)


def test_a_unit_no_backend_record_knows_is_recorded_cancelled(store):
    _on_backend(store, "Dispatched")
    backend = FakeSlurm()
    assert cancel_unit(store, CATALOG, "j", adapters={"ca-on-toronto": backend}) == (
        "not-on-backend")
    assert backend.cancelled == ["j#0"] and _row(store).state == "Cancelled"


@pytest.mark.parametrize("backend", [
    FakeBackend(down=True), FakeSlurm(accounting_down=True)], ids=["list", "accounting"])
def test_a_unit_whose_backend_cannot_say_is_left_as_it_was(store, backend):
    # not known whether it ended: not cancelled blind, nothing written; the cancel is retried
    _on_backend(store, "Running")
    with pytest.raises(BackendError, match=r"j#0 of job j: .*whether it has ended is not "
                                           r"known, so it was not cancelled"):
        cancel_unit(store, CATALOG, "j", adapters={"ca-on-toronto": backend})
    assert backend.cancelled == []
    row = _row(store)
    assert (row.state, row.actual_end, row.lease_owner) == ("Running", None, None)


def test_carbonsched_cancel_says_a_unit_ended_on_its_backend(store, monkeypatch):
    from typer.testing import CliRunner

    import carbonsched.dispatch.outbox as outbox
    from carbonsched.cli.app import app
    from carbonsched.config import get_settings

    _on_backend(store, "Running")
    backend = FakeSlurm({"j#0": _job("Succeeded", "Completed", "COMPLETED")})
    monkeypatch.setattr(outbox, "build_adapters", lambda *a, **k: {"ca-on-toronto": backend})
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", str(store.engine.url))
    get_settings.cache_clear()
    try:
        r = CliRunner().invoke(app, ["cancel", "j", "--catalog", "global"])
    finally:
        get_settings.cache_clear()
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == ("j#0 had already ended (Succeeded) on its backend "
                                "(slurm:ontario); nothing cancelled; recorded Succeeded")
    assert backend.cancelled == []
