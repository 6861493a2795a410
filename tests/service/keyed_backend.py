"""Stand-in scheduler backends for the service tests: one kept in a JSON file, one in memory.

A stand-in for a site's scheduler (the Slurm clusters and the Kubernetes emulator need
services): :class:`KeyedBackend` keeps one job per dispatch key, as a real backend keeps the
key (Slurm ``--comment``, a Kubernetes label), and counts every submission it receives, so a
test sees a unit submitted twice. The file outlives the process, so a run interrupted in one
process and run again in another meets the jobs the first one submitted (the rolling runs'
resume tests). :class:`MemoryBackend` keeps its jobs in the test's process, and a test moves
a unit on (started, ended) as the cluster's status would report it.

:func:`service_home` sets up a resume test's service: its own SQLite store, clock and keyed
backend, one API job submitted.

:func:`dispatch` is a run path dispatch step (``CARBONSCHED_DISPATCHER =
tests.service.keyed_backend:dispatch``, the backend file in ``KEYED_BACKEND_FILE``): the real
outbox (:func:`carbonsched.dispatch.outbox.dispatch_plan`) over this backend at every site.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from carbonsched.adapters.dispatch.base import BackendJob, DispatchRequest
from carbonsched.domain import JobState, ReasonCode
from carbonsched.errors import Interrupted

if TYPE_CHECKING:
    from carbonsched.clock import ManualClock
    from carbonsched.store.service import ServiceStore


class KeyedBackend:
    """Jobs by dispatch key in ``path``; ``submissions`` counts each key's submissions.

    ``stop_after``: once this object took that many submissions, every further submit raises
    :class:`~carbonsched.errors.Interrupted` (SIGTERM, as the CLI's handler raises it) and
    submits nothing (the outbox's pool of threads finishes the calls it began): a run stopped
    in the middle of its dispatch.
    """

    defers_start = True   # holds a job until its planned start itself, as Slurm's --begin

    def __init__(self, path: str | Path, name: str = "slurm:keyed",
                 stop_after: int | None = None) -> None:
        self.path, self.name = Path(path), name
        self.stop_after = stop_after
        self._taken = 0
        self._lock = threading.Lock()     # the outbox submits from a pool of threads

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"jobs": {}, "submissions": {}}
        return json.loads(self.path.read_text())

    def _job(self, key: str, j: dict[str, Any]) -> BackendJob:
        return BackendJob(key=key, backend_id=j["backend_id"], state=JobState.DISPATCHED,
                          reason=ReasonCode.SUBMITTED, raw_state="PENDING",
                          plan_id=j["plan_id"], begin=datetime.fromisoformat(j["start"]))

    def submit(self, request: DispatchRequest) -> BackendJob:
        with self._lock:
            if self.stop_after is not None and self._taken >= self.stop_after:
                raise Interrupted(signal.SIGTERM)
            self._taken += 1
            return self._submit(request)

    def _submit(self, request: DispatchRequest) -> BackendJob:
        data = self._read()
        data["submissions"][request.key] = data["submissions"].get(request.key, 0) + 1
        job = data["jobs"].setdefault(request.key, {
            "backend_id": f"keyed:{request.key}", "plan_id": request.plan_id,
            "site": request.site, "start": request.start.isoformat(),
            "end": request.end.isoformat()})
        self.path.write_text(json.dumps(data, indent=1, sort_keys=True))
        return self._job(request.key, job)

    def status(self, keys: Collection[str] | None = None) -> dict[str, BackendJob]:
        jobs = self._read()["jobs"]
        return {k: self._job(k, j) for k, j in jobs.items() if keys is None or k in keys}

    def cancel(self, key: str) -> bool:
        return key in self._read()["jobs"]

    def render(self, request: DispatchRequest) -> str:
        return f"submit {request.key} at {request.site} from {request.start.isoformat()}"

    def jobs(self) -> dict[str, dict[str, Any]]:
        """Key -> the job kept (backend id, plan id, site, start, end)."""
        return self._read()["jobs"]

    def submissions(self) -> dict[str, int]:
        """Key -> submissions received. [-]"""
        return self._read()["submissions"]


class MemoryBackend:
    """A cluster kept in memory: what is submitted, and what its status says of each unit.

    ``submits`` lists the dispatch keys in the order they were submitted (a key submitted
    twice is listed twice); a submitted unit is ``Dispatched/Submitted`` (raw ``PENDING``)
    until :meth:`report` says otherwise.
    """

    name = "slurm:frankfurt"

    def __init__(self) -> None:
        self.jobs: dict[str, BackendJob] = {}
        self.submits: list[str] = []

    def submit(self, r: DispatchRequest) -> BackendJob:
        self.submits.append(r.key)
        self.jobs[r.key] = BackendJob(key=r.key, backend_id=f"frankfurt:{len(self.submits)}",
                                      state=JobState.DISPATCHED, reason=ReasonCode.SUBMITTED,
                                      raw_state="PENDING", plan_id=r.plan_id, begin=r.start)
        return self.jobs[r.key]

    def status(self, keys: Collection[str] | None = None) -> dict[str, BackendJob]:
        return {k: v for k, v in self.jobs.items() if keys is None or k in keys}

    def cancel(self, key: str) -> bool:
        return self.jobs.pop(key, None) is not None

    def render(self, r: DispatchRequest) -> str:
        return r.key

    def report(self, key: str, state: JobState, reason: ReasonCode, start: datetime,
               end: datetime | None = None) -> None:
        """The cluster starts (or ends) the unit: its status says so from now on.

        Parameters
        ----------
        key
            The unit's dispatch key (submitted before).
        state, reason
            Its lifecycle state and reason code from now on.
        start, end
            When it really started and ended (tz-aware UTC); ``end`` None while it runs.
        """
        j = self.jobs[key]
        self.jobs[key] = BackendJob(key=key, backend_id=j.backend_id, state=state,
                                    reason=reason, raw_state=str(state).upper(),
                                    plan_id=j.plan_id, actual_start=start, actual_end=end)


def dispatch_to(path: str | Path, stop_after: int | None = None) -> Any:
    """A run path dispatch step: the outbox over the :class:`KeyedBackend` at ``path``.

    ``stop_after``: the step's first dispatch is stopped after that many submissions
    (:class:`KeyedBackend`); later ones are not.
    """
    stops = [stop_after]

    def step(store: Any, plan_id: str, catalog: Any, *, clock: Any,
             commit_before: datetime | None = None) -> dict[str, Any]:
        from carbonsched.catalog import load_catalog
        from carbonsched.config import Settings
        from carbonsched.dispatch.outbox import dispatch_plan

        cat = load_catalog(catalog) if isinstance(catalog, str | Path) else catalog
        backend = KeyedBackend(path, stop_after=stops.pop() if stops else None)
        return dispatch_plan(store, plan_id, cat, clock=clock, commit_before=commit_before,
                             adapters={s.id: backend for s in cat.sites},
                             settings=Settings(slurm_conf_dir=None, kubeconfig=None,
                                               dispatch_workers=1),   # one order: no race
                             placeholder=True, sleep=lambda s: None).to_dict()
    return step


def dispatch(store: Any, plan_id: str, catalog: Any, *, clock: Any,
             commit_before: datetime | None = None) -> dict[str, Any]:
    """:func:`dispatch_to` the backend file named by ``KEYED_BACKEND_FILE``."""
    return dispatch_to(os.environ["KEYED_BACKEND_FILE"])(
        store, plan_id, catalog, clock=clock, commit_before=commit_before)


def service_home(tmp_path: Path, name: str, api_spec: dict[str, Any]
                 ) -> tuple[Path, str, ServiceStore, ManualClock, KeyedBackend]:
    """A service's own folder ``tmp_path/name``: its store, clock and backend, one API job.

    Parameters
    ----------
    tmp_path
        The test's folder; ``name`` (new) is made in it.
    name
        The service's folder name (``ref``, ``stopped``).
    api_spec
        The API job submitted: a workload job spec with ``id`` and ``tenant``; recorded
        ``Pending/AwaitingPlan`` at the clock's time.

    Returns
    -------
    tuple
        The folder, the SQLite URL of its store (``store.sqlite``), the store, a manual clock at
        2023-07-09 23:00 UTC (the evening before the 2023-07-10 run) and the
        :class:`KeyedBackend` kept in ``backend.json`` (not yet written).
    """
    # imported here, as in dispatch_to: the module is also a run path's dispatcher
    from carbonsched.clock import ManualClock
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    d = tmp_path / name
    d.mkdir()
    url = f"sqlite:///{d / 'store.sqlite'}"
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    now = clock.now()
    db.add_jobs([{"job_id": api_spec["id"], "tenant": api_spec["tenant"],
                  "spec_json": json.dumps(api_spec), "submitted_at": now, "updated_at": now,
                  "reserved": False, "detail": "", "state": "Pending",
                  "reason": "AwaitingPlan"}])
    return d, url, db, clock, KeyedBackend(d / "backend.json")
