"""What each dispatch path does with each kind of exception an adapter call raises.

One table per path: the store's own error, an outage (``BackendUnavailableError``), the
backend's own error (``BackendError``), an input error and an adapter fault (anything else),
raised from the refresh pass's accounting read, the release pass's release and its bound by the
planned stop, the dispatch pass's accounting read, and a cancel's status read, accounting read
and cancel call. The paths differ on purpose (a refresh records what it could not read and goes
on; a cancel that cannot tell whether the unit ended refuses to cancel it), and these tables
hold each path to its own answers. SQLite store; the backend is a keyed stand-in whose one
named call raises (``test_adapter_faults.py`` breaks the real Kubernetes adapter the same way).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import BackendJob
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import cancel_job, reconcile, refresh_backends, release_due
from carbonsched.domain import JobState, ReasonCode
from carbonsched.errors import (
    BackendError,
    BackendUnavailableError,
    InputError,
    StoreUnavailableError,
)
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

T0 = datetime(2027, 3, 14, 6, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
CATALOG = load_catalog("global")
SITE, NAME, KEY = "ca-on-toronto", "kubernetes:ca/carbonsched", "j#0"
FAULT = ("(a fault in the adapter, not the backend's answer; the traceback is in the log); "
         "tried again in the next pass")


def _kinds() -> dict[str, BaseException]:
    """One exception of each kind (new objects per test: a raised one keeps its traceback)."""
    return {
        "store-driver": OperationalError("SELECT 1", {}, Exception("database is locked")),
        "store": StoreUnavailableError("o.sqlite", "reading the outbox", "disk I/O error"),
        "outage": BackendUnavailableError(f"{NAME}: connection refused"),
        "backend": BackendError(f"{NAME}: jobs.batch is forbidden"),
        "input": InputError("the manifest names no container"),
        "fault": KeyError("metadata"),
    }


class Backend:
    """A keyed stand-in backend whose call ``fails`` raises ``exc``; the others answer."""

    def __init__(self, fails: str, exc: BaseException, listed: dict | None = None) -> None:
        self.name, self.fails, self.exc, self.listed = NAME, fails, exc, listed or {}

    def _call(self, what: str) -> None:
        if what == self.fails:
            raise self.exc

    def status(self, keys=None):
        self._call("status")
        return {k: v for k, v in self.listed.items() if keys is None or k in keys}

    def accounting(self, units):
        self._call("accounting")
        return {}

    def release(self, key: str) -> bool:
        self._call("release")
        return False

    def keep_planned_stops(self, keys) -> dict[str, str]:
        self._call("keep_planned_stops")
        return {}

    def cancel(self, key: str) -> bool:
        self._call("cancel")
        return True

    def submit(self, request):  # pragma: no cover - never called here
        raise AssertionError("submit")

    def render(self, request):  # pragma: no cover
        raise AssertionError("render")


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'o.sqlite'}")


def _add(store: Store, state: str, **kw) -> None:
    with Session(store.engine) as s:
        s.add(DispatchRow(
            key=KEY, job_id="j", piece=0, plan_id="p1", site=SITE, backend=NAME, state=state,
            reason="Submitted", detail="", request_json="{}", planned_start=T0,
            planned_end=T0 + timedelta(hours=1), attempts=0, created_at=T0, updated_at=T0,
            submit_attempted_at=T0, **kw))
        s.commit()


def _row(store: Store) -> DispatchRow:
    with Session(store.engine) as s:
        return s.scalars(select(DispatchRow).where(DispatchRow.key == KEY)).one()


def _raised_as_is(call, exc: BaseException) -> None:
    with pytest.raises(type(exc)) as e:
        call()
    assert e.value is exc


# --------------------------------------------------------------------- refresh: accounting
@pytest.mark.parametrize("kind", list(_kinds()))
def test_the_refresh_pass_accounting_read(store, kind):
    """Not in the backend's list, its accounting unreadable: the unit is kept, the detail says
    why; only the store's own errors end the pass."""
    exc = _kinds()[kind]
    _add(store, "Dispatched", backend_id="ca:42", submitted_at=T0)
    b = Backend("accounting", exc)

    def refresh():
        return refresh_backends(store, CATALOG, adapters={SITE: b}, clock=lambda: NOW)

    if kind in ("store-driver", "store"):
        _raised_as_is(refresh, exc)
        return
    assert refresh() == 1
    said = {"outage": str(exc), "backend": str(exc), "input": str(exc),
            "fault": f"{NAME}: accounting raised KeyError: 'metadata' {FAULT}"}[kind]
    row = _row(store)
    assert (row.state, row.detail) == (
        "Dispatched", f"{NAME} no longer reports ca:42; its accounting could not be read: {said}")


# ------------------------------------------------------------------- release pass: release
@pytest.mark.parametrize("kind", list(_kinds()))
def test_the_release_pass_release(store, kind):
    exc = _kinds()[kind]
    _add(store, "Dispatched", backend_id="ca:42")
    b = Backend("release", exc)

    def release():
        return release_due(store, CATALOG, adapters={SITE: b}, clock=lambda: NOW)

    if kind in ("store-driver", "store"):
        _raised_as_is(release, exc)
        return
    assert release() == []
    reason, said = {
        "outage": ("BackendUnavailable", str(exc)),
        "backend": ("ReleaseFailed", str(exc)),
        "input": ("ReleaseFailed", str(exc)),
        "fault": ("BackendUnavailable", f"{NAME}: release of {KEY} raised KeyError: 'metadata' "
                  f"{FAULT}")}[kind]
    row = _row(store)
    assert ReasonCode(reason) in (ReasonCode.BACKEND_UNAVAILABLE, ReasonCode.RELEASE_FAILED)
    assert (row.state, row.detail) == (
        "Dispatched", f"{reason}: release at the planned start failed at 2027-03-14T06:05:00Z, "
        f"retried in the next release pass: {said}")


# ------------------------------------------------------ release pass: bound by its planned stop
@pytest.mark.parametrize("kind", list(_kinds()))
def test_the_release_pass_bound_by_the_planned_stop(store, kind):
    exc = _kinds()[kind]
    _add(store, "Running", backend_id="ca:42")
    b = Backend("keep_planned_stops", exc)

    def release():
        return release_due(store, CATALOG, adapters={SITE: b}, clock=lambda: NOW)

    if kind in ("store-driver", "store"):
        _raised_as_is(release, exc)
        return
    assert release() == []
    reason, said = {
        "outage": ("BackendUnavailable", str(exc)),
        "backend": ("ReleaseFailed", str(exc)),
        "input": ("ReleaseFailed", str(exc)),
        "fault": ("BackendUnavailable", f"{NAME}: keep_planned_stops raised KeyError: "
                  f"'metadata' {FAULT}")}[kind]
    row = _row(store)
    assert ReasonCode(reason) in (ReasonCode.BACKEND_UNAVAILABLE, ReasonCode.RELEASE_FAILED)
    assert (row.state, row.detail) == (
        "Running", f"{reason}: bounding by its planned stop failed at 2027-03-14T06:05:00Z, "
        f"retried in the next release pass: {said}")


# --------------------------------------------------------------- dispatch pass: accounting
@pytest.mark.parametrize("kind", list(_kinds()))
def test_the_dispatch_pass_accounting_read(store, kind):
    """A submission that may have been made, not in the list, its accounting unreadable: not
    submitted again; an outage (the store's included) is the backend's outage for the pass."""
    exc = _kinds()[kind]
    _add(store, "Pending")
    b = Backend("accounting", exc)

    def drive():
        return reconcile(store, CATALOG, adapters={SITE: b}, clock=lambda: NOW,
                         settings=Settings(dispatch_backoff_s=0.01), max_attempts=1)

    if kind == "store-driver":
        _raised_as_is(drive, exc)
        return
    (o,) = drive().outcomes
    if kind in ("store", "outage"):
        detail = (f"a submission attempted at 2027-03-14T06:00:00Z may have reached {NAME}, "
                  f"which cannot be asked now ({exc}); not submitted again until it can")
    else:
        said = (str(exc) if kind == "backend"
                else f"{NAME}: accounting raised {type(exc).__name__}: {str(exc)[:300]} {FAULT}")
        detail = (f"a submission attempted at 2027-03-14T06:00:00Z may have reached {NAME}, "
                  f"whose records could not be read ({said}); not submitted again until they "
                  "can")
    assert (o.action, o.state, o.reason, o.detail) == (
        "unavailable", "Pending", "BackendUnavailable", detail)


# ------------------------------------------------------------------------------- cancel
def _running() -> BackendJob:
    return BackendJob(key=KEY, backend_id="ca:42", state=JobState.RUNNING,
                      reason=ReasonCode.STARTED, raw_state="running", actual_start=T0)


NOT_KNOWN = ("whether it has ended is not known, so it was not cancelled (the units before it "
             "are done, it and the later ones are left as they were); cancel again once the "
             "backend answers")


@pytest.mark.parametrize(("call", "kind", "raised", "message"), [
    # the status read: any BackendError (the store's outage one too) is the backend's
    ("status", "store", BackendUnavailableError,
     f"{KEY} of job j: {NAME} could not be asked for its state ({{exc}}); {NOT_KNOWN}"),
    ("status", "outage", BackendUnavailableError,
     f"{KEY} of job j: {NAME} could not be asked for its state ({{exc}}); {NOT_KNOWN}"),
    ("status", "backend", BackendError,
     f"{KEY} of job j: {NAME} could not be asked for its state ({{exc}}); {NOT_KNOWN}"),
    ("status", "input", BackendUnavailableError,
     f"{KEY} of job j: {NAME} could not be asked for its state ({NAME}: status of {KEY} "
     f"raised InputError: {{exc}} {FAULT}); {NOT_KNOWN}"),
    ("status", "fault", BackendUnavailableError,
     f"{KEY} of job j: {NAME} could not be asked for its state ({NAME}: status of {KEY} "
     f"raised KeyError: {{exc}} {FAULT}); {NOT_KNOWN}"),
    # the accounting read (the list lacks the job): an input error passes as the backend's
    ("accounting", "store", BackendUnavailableError,
     f"{KEY} of job j: {NAME} no longer lists it and its accounting could not be read "
     f"({{exc}}); {NOT_KNOWN}"),
    ("accounting", "outage", BackendUnavailableError,
     f"{KEY} of job j: {NAME} no longer lists it and its accounting could not be read "
     f"({{exc}}); {NOT_KNOWN}"),
    ("accounting", "backend", BackendError,
     f"{KEY} of job j: {NAME} no longer lists it and its accounting could not be read "
     f"({{exc}}); {NOT_KNOWN}"),
    ("accounting", "input", BackendError,
     f"{KEY} of job j: {NAME} no longer lists it and its accounting could not be read "
     f"({{exc}}); {NOT_KNOWN}"),
    ("accounting", "fault", BackendUnavailableError,
     f"{KEY} of job j: {NAME} no longer lists it and its accounting could not be read "
     f"({NAME}: accounting of {KEY} raised KeyError: {{exc}} {FAULT}); {NOT_KNOWN}"),
    # the cancel call: a BackendError goes up as it is; anything else is an adapter fault
    ("cancel", "input", BackendUnavailableError,
     f"{KEY} of job j: {NAME}: cancel of {KEY} raised InputError: {{exc}} {FAULT}; it may or "
     "may not be cancelled on its backend, and is recorded as it was (the units before it are "
     "done, it and the later ones are left as they were); cancel again once the adapter is "
     "fixed"),
    ("cancel", "fault", BackendUnavailableError,
     f"{KEY} of job j: {NAME}: cancel of {KEY} raised KeyError: {{exc}} {FAULT}; it may or "
     "may not be cancelled on its backend, and is recorded as it was (the units before it are "
     "done, it and the later ones are left as they were); cancel again once the adapter is "
     "fixed"),
])
def test_a_cancel_that_cannot_read_or_cancel_the_unit_leaves_it_as_it_was(
        store, call, kind, raised, message):
    exc = _kinds()[kind]
    _add(store, "Running", backend_id="ca:42")
    b = Backend(call, exc, listed={KEY: _running()} if call == "cancel" else {})
    with pytest.raises(BackendError) as e:
        cancel_job(store, CATALOG, "j", adapters={SITE: b})
    assert type(e.value) is raised
    assert str(e.value) == message.format(exc=exc)
    assert any(c is exc for c in (e.value.__cause__, e.value.__context__))
    row = _row(store)
    assert (row.state, row.reason, row.lease_owner) == ("Running", "Submitted", None)


@pytest.mark.parametrize(("call", "kind"), [
    *[(call, "store-driver") for call in ("status", "accounting", "cancel")],
    *[("cancel", kind) for kind in ("store", "outage", "backend")]])
def test_a_cancel_raises_the_stores_driver_error_and_a_cancel_calls_backend_error_as_they_are(
        store, call, kind):
    exc = _kinds()[kind]
    _add(store, "Running", backend_id="ca:42")
    b = Backend(call, exc, listed={KEY: _running()} if call == "cancel" else {})
    _raised_as_is(lambda: cancel_job(store, CATALOG, "j", adapters={SITE: b}), exc)
    row = _row(store)
    assert (row.state, row.lease_owner) == ("Running", None)
