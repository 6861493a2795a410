"""`carbonsched serve` asked to stop (SIGTERM) exits within bounds while its cron's run dispatches.

Before, uvicorn stopped serving and the lifespan's shutdown returned, but the cron's run went on
in its scheduler thread, which the interpreter waits for at exit: a dispatch pass (here a step
holding five claims, as a long pass does) kept the process alive until it ended (ten minutes
here; in a pod, until the kubelet's SIGKILL left the run record ``running`` and the claims held).
Now the signal sets the service's stop event at once: a dispatch step that takes ``stop`` (as
``dispatch_plan`` does: no submission begins after it) returns, its claims released and its
units pending; the requests and then the background work get ``CARBONSCHED_SHUTDOWN_TIMEOUT_S``
each (uvicorn's ``timeout_graceful_shutdown``), and work still running after that is left
behind and named on the interruption's line, the process exiting 143 anyway.

Real `carbonsched serve` processes on loopback, a real daily run (planned, then the step).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.service.conftest import CATALOG

pytestmark = pytest.mark.shared_data

ROOT = Path(__file__).resolve().parents[2]
AS_OF = "2023-07-14T23:30:00Z"
"""07:30 in Asia/Shanghai: the start-up run of local day 2023-07-15 plans 2023-07-16."""
CRON_DATE = "2023-07-16"


def _query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _serve_and_signal(tmp_path, start_server, step: str, shutdown_s: str):
    db, marker = tmp_path / "store.db", tmp_path / "holding"
    srv = start_server(f"sqlite:///{db}", "--as-of", AS_OF, "--catalog", CATALOG,
                       env={"CARBONSCHED_DISPATCHER": f"tests.service.steps.claim_hold:{step}",
                            "CARBONSCHED_TEST_BLOCK_MARKER": str(marker),
                            "CARBONSCHED_TIME_LIMIT_S": "20", "PYTHONPATH": str(ROOT),
                            "CARBONSCHED_SHUTDOWN_TIMEOUT_S": shutdown_s})
    deadline = time.monotonic() + 600
    while not marker.exists() and time.monotonic() < deadline:
        assert srv.proc.poll() is None, srv.logs()[-3000:]
        time.sleep(0.2)
    assert marker.read_text().split()[1] == "5", srv.logs()[-3000:]   # five claims held
    assert _query(db, "SELECT count(*) FROM dispatch_intents WHERE lease_owner IS NOT NULL"
                  ) == [(5,)]
    srv.proc.send_signal(signal.SIGTERM)
    try:
        srv.proc.wait(120)   # a generous limit; before the fix: ten minutes
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve still running 120 s after SIGTERM:\n{srv.logs()[-3000:]}")
    return db, srv


def test_sigterm_stops_a_dispatch_that_honours_stop_claims_released_units_pending(
        tmp_path, start_server):
    db, srv = _serve_and_signal(tmp_path, start_server, "claim_until_stopped", "30")
    logs = srv.logs()
    assert srv.proc.returncode == 143, logs[-3000:]
    assert "Traceback" not in logs
    assert logs.strip().splitlines()[-1] == "interrupted: SIGTERM; nothing was held"
    assert "still running after" not in logs
    # the units: pending, unclaimed, for the dispatch loops or the next run
    assert _query(db, "SELECT state, count(*), sum(lease_owner IS NOT NULL), "
                      "sum(submit_attempted_at IS NOT NULL) FROM dispatch_intents "
                      "GROUP BY state") == [("Pending", 5, 0, 0)]
    # the run finished (its plan stored) and says dispatch left units pending
    [(status, lease, notes)] = _query(db, "SELECT status, lease_expires_at, notes FROM "
                                          f"pipeline_runs WHERE planning_date = '{CRON_DATE}'")
    assert (status, lease) == ("succeeded", None)
    assert "dispatch left units pending (5 interrupted)" in notes


def test_sigterm_leaves_behind_a_step_that_ignores_stop_after_the_shutdown_timeout(
        tmp_path, start_server):
    db, srv = _serve_and_signal(tmp_path, start_server, "claim_and_hold", "3")
    logs = srv.logs()
    assert srv.proc.returncode == 143, logs[-3000:]
    assert "Traceback" not in logs
    assert logs.strip().splitlines()[-1] == (
        "interrupted: SIGTERM; cron still running after 3 s (CARBONSCHED_SHUTDOWN_TIMEOUT_S): "
        "left behind; a run it held is taken over once its lease runs out")
    # the run record keeps its lease (taken over once it runs out, as for a process that died)
    [(status, lease)] = _query(db, "SELECT status, lease_expires_at FROM pipeline_runs WHERE "
                                   f"planning_date = '{CRON_DATE}'")
    assert status == "running" and lease is not None


def test_a_cron_tick_after_the_service_stopped_begins_no_run(tmp_path):
    """The service's stop sets the event its cron reads: a tick that fires after shutdown
    began (the scheduler's, or POST /v1/runs's thread) claims and plans nothing."""
    from carbonsched.api.state import ServiceState
    from carbonsched.clock import FixedClock, parse_as_of
    from carbonsched.config import Settings
    from tests.conftest import shared_data_dir

    s = Settings(database_url=f"sqlite:///{tmp_path / 's.db'}", catalog=CATALOG,
                 cron_enabled=True, cron_startup_run=True, as_of=parse_as_of(AS_OF),
                 data_dir=shared_data_dir(), dispatcher="", dispatch_loops=False)
    state = ServiceState(s, FixedClock(s.as_of))
    state.start()
    try:
        assert state.stop() == []
        # before the fix: the tick claimed run 2023-07-16 and planned it after the shutdown
        assert state.cron.tick("manual") is None
        assert _query(tmp_path / "s.db", "SELECT count(*) FROM pipeline_runs") == [(0,)]
    finally:
        state.store.engine.dispose()
