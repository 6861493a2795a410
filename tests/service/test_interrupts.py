"""SIGTERM and Ctrl-C stop `carbonsched plan --dispatch` cleanly: real processes, real signals.

Before, SIGTERM (a CronJob's pod deleted) ended the process with no ``finally`` run: the dispatch
claims it held blocked the next dispatcher for their lease (120 s here) and the run record stayed
``running`` (the retry was refused as "being run by" the dead process). Ctrl-C's
KeyboardInterrupt escaped the run's failure handler, leaving the record ``running`` too, and
Typer ended the process silently. The process is signalled while its dispatch step
(``steps/claim_hold.py``) holds five claims under the real
:class:`~carbonsched.dispatch.lease.Claimant` heartbeat.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.service.conftest import CATALOG

pytestmark = pytest.mark.shared_data

ROOT = Path(__file__).resolve().parents[2]
PDATE = "2023-07-17"


def _plan_dispatch(db: Path, out: Path, **env: str) -> subprocess.Popen:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "carbonsched.cli.app", "plan", "--dispatch", "--date", PDATE,
         "--catalog", CATALOG, "--time-limit", "20", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "CARBONSCHED_DATABASE_URL": f"sqlite:///{db}", "PYTHONPATH": path,
             "CARBONSCHED_DISPATCHER": "tests.service.steps.claim_hold:claim_and_hold", **env})


def _query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_dispatch_releases_the_claims_and_marks_the_run_interrupted(
        tmp_path, sig, code):
    db, marker = tmp_path / "store.db", tmp_path / "holding"
    proc = _plan_dispatch(db, tmp_path / "plan.json",
                          CARBONSCHED_TEST_BLOCK_MARKER=str(marker))
    try:
        deadline = time.monotonic() + 600
        while not marker.exists() and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"plan --dispatch exited {proc.returncode}: "
                            f"{proc.stderr.read()[-3000:]}")
            time.sleep(0.1)
        assert marker.read_text().split()[1] == "5"            # it holds five claims
        held = _query(db, "SELECT count(*) FROM dispatch_intents WHERE lease_owner IS NOT NULL")
        assert held == [(5,)]
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last == (f"interrupted: {sig.name}; 5 dispatch claims released (another dispatcher "
                    f"may take them at once); run {PDATE} recorded interrupted (run it again "
                    "now)"), stderr[-3000:]
    assert _query(db, "SELECT count(*) FROM dispatch_intents WHERE lease_owner IS NOT NULL "
                      "OR lease_expires_at IS NOT NULL") == [(0,)]
    [(status, lease, error)] = _query(db, "SELECT status, lease_expires_at, error FROM "
                                          "pipeline_runs")
    assert (status, lease) == ("interrupted", None)
    assert error == f"interrupted by {sig.name} (the process was asked to stop)"
    # run again at once: the date is claimed (no lease to wait out) and finishes
    again = _plan_dispatch(db, tmp_path / "again.json")
    _, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stderr[-3000:]
    [(status, attempts, error)] = _query(db, "SELECT status, attempts, error FROM pipeline_runs")
    assert (status, attempts) == ("succeeded", 2)
    assert error.startswith("retried: the previous attempt (cli@") and sig.name in error
