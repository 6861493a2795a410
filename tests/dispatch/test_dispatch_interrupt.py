"""Ctrl-C or SIGTERM during a dispatch pass stops it: no submission begins after the signal.

Before, the signal raised :class:`~carbonsched.errors.Interrupted` in the main thread while the
thread pools went on with every queued unit: each still claimed its side effect and was
submitted to its backend after the operator asked to stop, and the process ended only after the
last one. Now a stop event is checked by each worker right before it claims a unit's side
effect: the units not yet begun are not submitted (pending, their claims released, taken by the
next run), a submission in flight finishes and is recorded, and the interruption's line says how
many units are left.

A real dispatcher process (``run_dispatcher.py``) dispatches twelve units to the Kubernetes
emulator through the real adapter, each submission slowed down after its claim (a slow API
server), and is sent the signal once the first submission has begun.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter
from carbonsched.store.models import DispatchRow

from .helpers import one_plan

RUNNER = Path(__file__).with_name("run_dispatcher.py")
ROOT = Path(__file__).resolve().parents[2]
UNITS = 12
WORKERS = 2
START = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0, second=0)


def _run(spec: dict) -> subprocess.Popen:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, str(RUNNER), json.dumps(spec)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": path})


def _rows(store) -> dict[str, DispatchRow]:
    with Session(store.engine) as s:
        return {r.key: r for r in s.scalars(select(DispatchRow))}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_pass_submits_nothing_more_and_the_next_run_submits_the_rest(
        store, emulator_kubeconfig, tmp_path, sig, code):
    prefix = uuid.uuid4().hex[:8]
    doc = one_plan([{"job_id": f"{prefix}-{i:02d}", "site": "us-ny-newyork", "start": START,
                     "end": START + timedelta(hours=1), "gpu_type": "A100", "gpus": 2,
                     "payload": {"command": "sleep 1"}} for i in range(UNITS)])
    store.save_plan(doc)
    keys = {f"{prefix}-{i:02d}#0" for i in range(UNITS)}
    started = tmp_path / "started"
    settings = {"kubeconfig": str(emulator_kubeconfig), "dispatch_workers": WORKERS,
                "dispatch_backoff_s": 0.01}
    url = f"sqlite:///{tmp_path / 'store.db'}"
    k8s = KubernetesAdapter("us-east-ny", "carbonsched", kubeconfig=str(emulator_kubeconfig))
    try:
        proc = _run({"url": url, "plan_id": doc["plan_id"], "settings": settings,
                     "out": str(tmp_path / "first.json"), "signals": True,
                     "started": str(started), "submit_delay_s": 3.0})
        try:
            t0 = time.monotonic()
            while not (started.exists() and started.read_text().strip()):
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() - t0 < 300, "no submission began in 300 s"
                time.sleep(0.05)
            proc.send_signal(sig)
            _, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == code, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        # the submissions that had begun (claimed) when the signal came: one per worker at most
        begun = started.read_text().split()
        assert 1 <= len(begun) <= WORKERS and len(set(begun)) == len(begun), begun
        left = UNITS - len(begun)
        assert stderr.strip().splitlines()[-1] == (
            f"interrupted: {sig.name}; dispatch stopped: {len(begun)} "
            f"unit{'s' * (len(begun) != 1)} on their backend (submitted or found before the "
            "stop; a submission in flight finished and was recorded), "
            f"{left} left pending for the next run ({left} interrupted)")
        # exactly those are on the backend, once each, and recorded
        on_backend = k8s.status(sorted(keys))
        assert set(on_backend) == set(begun)
        assert all(not j.duplicates for j in on_backend.values())
        rows = _rows(store)
        assert set(rows) == keys
        for k in begun:
            assert (rows[k].state, rows[k].backend_id, rows[k].attempts) == (
                "Dispatched", on_backend[k].backend_id, 1), k
        # the rest: pending, never attempted, unclaimed
        for k in keys - set(begun):
            r = rows[k]
            assert (r.state, r.reason, r.attempts, r.submit_attempted_at, r.lease_owner,
                    r.lease_expires_at) == ("Pending", "AwaitingSubmit", 0, None, None, None), k
        # a second run submits exactly the rest
        again = _run({"url": url, "plan_id": doc["plan_id"], "settings": settings,
                      "out": str(tmp_path / "second.json")})
        _, stderr = again.communicate(timeout=300)
        assert again.returncode == 0, stderr[-3000:]
        summary = json.loads((tmp_path / "second.json").read_text())
        assert summary["counts"] == {"recorded": len(begun), "submitted": left}
        assert {o["key"] for o in summary["outcomes"] if o["action"] == "submitted"} == (
            keys - set(begun))
        on_backend = k8s.status(sorted(keys))
        assert set(on_backend) == keys
        assert all(not j.duplicates for j in on_backend.values())
        assert {r.state for r in _rows(store).values()} == {"Dispatched"}
    finally:
        for k in keys:
            k8s.cancel(k)


class _Backend:
    """A backend that keeps what is submitted to it (the dispatch contract, in memory)."""

    name = "memory:us-east-ny"

    def __init__(self) -> None:
        self.submits: list[str] = []

    def submit(self, r):
        from carbonsched.adapters.dispatch.base import BackendJob
        from carbonsched.domain import JobState, ReasonCode

        self.submits.append(r.key)
        return BackendJob(key=r.key, backend_id=f"m:{len(self.submits)}",
                          state=JobState.DISPATCHED, reason=ReasonCode.SUBMITTED,
                          raw_state="PENDING")

    def status(self, keys=None):
        return {}

    def cancel(self, key):
        return False

    def render(self, r):
        return r.key


def test_a_stop_before_the_first_claim_leaves_every_unit_interrupted(store):
    """The stop event is set before the pass claims anything (a shutdown racing the run):
    every committed unit is ``interrupted`` (not ``unavailable``, as a backend outage), none
    is claimed or submitted, and the note counts them pending for the next run."""
    import threading

    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import dispatch_plan

    doc = one_plan([{"job_id": f"j{i}", "site": "us-ny-newyork", "start": START,
                     "end": START + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
                     "payload": {"command": "sleep 1"}} for i in range(3)])
    store.save_plan(doc)
    backend, stop = _Backend(), threading.Event()
    stop.set()
    summary = dispatch_plan(store, doc["plan_id"], "global", adapters={"us-ny-newyork": backend},
                            settings=Settings(), stop=stop,
                            commit_before=START + timedelta(days=1))
    assert sorted((o.key, o.action) for o in summary.outcomes) == [
        ("j0#0", "interrupted"), ("j1#0", "interrupted"), ("j2#0", "interrupted")]
    assert backend.submits == []
    rows = _rows(store)
    assert {k: (r.state, r.lease_owner) for k, r in rows.items()} == {
        k: ("Pending", None) for k in ("j0#0", "j1#0", "j2#0")}
    (note,) = [n for n in summary.notes if n.startswith("dispatch stopped")]
    assert note.startswith("dispatch stopped: 0 units on their backend")
    assert note.endswith("3 left pending for the next run (3 interrupted)")


def test_a_reconcile_stopped_before_its_first_claim_counts_the_pending_units(store):
    """``reconcile`` (the service's start-up pass, no plan) stopped before it claims anything:
    the pending units of its sites are ``interrupted`` and counted in the note."""
    import threading

    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import dispatch_plan, reconcile

    doc = one_plan([{"job_id": f"r{i}", "site": "us-ny-newyork", "start": START,
                     "end": START + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
                     "payload": {"command": "sleep 1"}} for i in range(2)])
    store.save_plan(doc)
    backend, stop = _Backend(), threading.Event()
    stop.set()
    dispatch_plan(store, doc["plan_id"], "global", adapters={"us-ny-newyork": backend},
                  settings=Settings(), stop=stop, commit_before=START + timedelta(days=1))
    summary = reconcile(store, "global", adapters={"us-ny-newyork": backend},
                        settings=Settings(), stop=stop)
    assert sorted((o.key, o.action) for o in summary.outcomes) == [
        ("r0#0", "interrupted"), ("r1#0", "interrupted")]
    assert backend.submits == []
    assert summary.notes[-1].endswith("2 left pending for the next run (2 interrupted)")
