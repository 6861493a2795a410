"""One release pass reads the outbox once: the same rows serve the release and the bound.

``release_due`` releases the held units whose planned start has come, then, on the backends
whose released jobs may start late (Kueue), bounds the released units not over by their
planned stops. The bound read the outbox (and the grid events' holds) again for rows the
release had just read. SQLite store; the backends are keyed stand-ins that record each call
(the Kueue behaviour itself is in ``test_k8s_workloads.py``, on the Kubernetes emulator).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import release_due
from carbonsched.errors import BackendError
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

T0 = datetime(2027, 3, 14, 6, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
CATALOG = load_catalog("global")
KUEUE, SLURM = "us-pjm-ashburn", "ca-on-toronto"


class Plain:
    """A backend that holds jobs itself (Slurm ``--begin``): nothing to release or bound."""

    def __init__(self, name: str) -> None:
        self.name = name

    def status(self, keys=None):  # pragma: no cover - never called here
        raise AssertionError("status")

    def cancel(self, key):  # pragma: no cover
        raise AssertionError("cancel")

    def submit(self, request):  # pragma: no cover
        raise AssertionError("submit")

    def render(self, request):  # pragma: no cover
        raise AssertionError("render")


class Kueue(Plain):
    """Releases held jobs and bounds released ones; the release of ``refuses`` fails."""

    def __init__(self, name: str, refuses: str) -> None:
        super().__init__(name)
        self.refuses = refuses
        self.released: list[str] = []
        self.bounded: list[list[str]] = []

    def release(self, key: str) -> bool:
        self.released.append(key)
        if key == self.refuses:
            raise BackendError(f"{self.name}: jobs.batch {key!r} is forbidden")
        return True

    def keep_planned_stops(self, keys) -> dict[str, str]:
        self.bounded.append(sorted(keys))
        return {k: "activeDeadlineSeconds: 3300" for k in keys if k.startswith("run")}


@pytest.fixture
def store(tmp_path) -> Store:
    st = Store(f"sqlite:///{tmp_path / 'o.sqlite'}")
    with Session(st.engine) as s:
        for key, site, state, start in (
                ("due#0", KUEUE, "Dispatched", T0),             # released, then bounded
                ("run#0", KUEUE, "Running", T0 - timedelta(hours=1)),   # bounded
                ("later#0", KUEUE, "Dispatched", NOW + timedelta(hours=1)),  # not yet due
                ("refused#0", KUEUE, "Dispatched", T0),         # its release fails: not bounded
                ("slurm#0", SLURM, "Running", T0),              # its backend keeps its stops
                ("done#0", KUEUE, "Succeeded", T0)):            # over
            s.add(DispatchRow(
                key=key, job_id=key[:-2], piece=0, plan_id="p1", site=site, backend=site,
                state=state, reason="Submitted", detail="", request_json="{}",
                planned_start=start, planned_end=start + timedelta(hours=1), attempts=0,
                created_at=T0, updated_at=T0, backend_id=f"b-{key}"))
        s.commit()
    return st


def test_one_release_pass_reads_the_outbox_and_the_holds_once(store):
    kueue = Kueue("kubernetes:va/carbonsched", refuses="refused#0")
    tables: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("SELECT"):
            tables.extend(t for t in ("dispatch_intents", "grid_event_actions")
                          if f"FROM {t}" in statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        released = release_due(store, CATALOG, adapters={
            KUEUE: kueue, SLURM: Plain("slurm:ontario")}, clock=lambda: NOW)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert (tables.count("dispatch_intents"), tables.count("grid_event_actions")) == (1, 1)
    assert released == ["due#0"]
    assert sorted(kueue.released) == ["due#0", "refused#0"]
    assert kueue.bounded == [["due#0", "run#0"]]
    with Session(store.engine) as s:
        detail = {r.key: r.detail for r in s.scalars(select(DispatchRow))}
    assert detail == {
        "due#0": "released at 2027-03-14T06:05:00Z",
        "run#0": ("bounded by its planned stop at 2027-03-14T06:05:00Z: "
                  "activeDeadlineSeconds: 3300"),
        "later#0": "",
        "refused#0": ("ReleaseFailed: release at the planned start failed at "
                      "2027-03-14T06:05:00Z, retried in the next release pass: "
                      "kubernetes:va/carbonsched: jobs.batch 'refused#0' is forbidden"),
        "slurm#0": "",
        "done#0": ""}
