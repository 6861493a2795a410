"""Outages are states, not tracebacks: the database dies under `carbonsched plan --dispatch`, a
replica dies holding the day's run. Real processes, real PostgreSQL.

The database is stopped at one line every time: the configured dispatch step
(``tests/service/steps/stop_database.py``) runs ``pg_ctl stop`` and then the real dispatch
step, after the plan was made, written and stored; the replica is killed (SIGKILL) while its
dispatch step (``steps/block.py``) holds the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.service.conftest import CATALOG, mint

pytestmark = pytest.mark.shared_data

ROOT = Path(__file__).resolve().parents[2]
PDATE = "2023-07-17"
LEASE_S = "3"
"""A short lease, so that the tests wait seconds, not a minute. [s]"""


def plan_dispatch(url: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "carbonsched.cli.app", "plan", "--dispatch", "--date", PDATE,
         "--catalog", CATALOG, "--time-limit", "20", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "CARBONSCHED_DATABASE_URL": url, "PYTHONPATH": str(ROOT),
             "CARBONSCHED_LEASE_S": LEASE_S, **env})


def record(url: str, pdate: str = PDATE) -> dict:
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            row = c.execute(text("SELECT *, lease_expires_at < now() AS lease_over FROM "
                                 "pipeline_runs WHERE planning_date = :d"), {"d": pdate})
            out = row.mappings().first()
            return dict(out) if out else {}
    finally:
        eng.dispose()


def test_plan_dispatch_whose_database_dies_is_exit_3_with_one_line(private_pg, tmp_path):
    out = tmp_path / "plan.json"
    r = plan_dispatch(private_pg.url, out,
                      CARBONSCHED_DISPATCHER="tests.service.steps.stop_database:"
                                             "stop_then_dispatch",
                      CARBONSCHED_TEST_PG_STOP=json.dumps(private_pg.pg_ctl("stop")))
    assert r.returncode == 3, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    msg = lines[0]
    # the outage is named where the run met it: dispatching (an outage there interrupts the
    # run for a retry; before, dispatch was recorded failed and the outcome's write failed)
    doc = json.loads(out.read_text())
    assert msg.startswith(f"error: database postgresql+psycopg2://postgres:***@127.0.0.1:"
                          f"{private_pg.port}/carbonsched is unreachable (dispatching plan "
                          f"{doc['plan_id']}: "), msg
    assert msg.endswith(f"the plan is written to {out}; once the database is back, run "
                        f"`carbonsched plan --dispatch --date {PDATE}` again (it takes the "
                        f"date's run record over {LEASE_S} s after this run's last heartbeat)")
    assert "pw-not-shown" not in r.stderr and "Traceback" not in r.stderr
    doc = json.loads(out.read_text())
    assert doc["run"]["planning_date"] == PDATE and doc["catalog"] == CATALOG
    # the database is back: the record the dead run left is 'running' under a lease that runs
    # out by itself, and the same command then takes the date over
    private_pg.start()
    rec = record(private_pg.url)
    assert rec["status"] == "running" and rec["replica"].startswith("cli@")
    # it names the plan it stored before dispatching it: the run is finished from that plan
    assert rec["plan_id"] == doc["plan_id"] and rec["lease_expires_at"] is not None
    deadline = time.monotonic() + 120
    while not record(private_pg.url)["lease_over"] and time.monotonic() < deadline:
        time.sleep(0.2)
    again = plan_dispatch(private_pg.url, tmp_path / "again.json")
    assert again.returncode == 0, again.stderr[-3000:]
    rec = record(private_pg.url)
    assert (rec["status"], rec["attempts"]) == ("succeeded", 2), rec
    assert rec["error"].startswith("taken over: the previous attempt (cli@")
    assert rec["plan_id"] == json.loads((tmp_path / "again.json").read_text())["plan_id"]
    # not planned again: dispatch may have submitted units of the first plan before the outage
    assert rec["plan_id"] == doc["plan_id"]
    assert "finished from that plan, not planned again" in rec["notes"]


AS_OF = "2023-07-14T23:30:00Z"
"""07:30 in Asia/Shanghai: the 06:00 run of local day 2023-07-15 is due; it plans 2023-07-16."""
CRON_DATE = "2023-07-16"


def test_a_replica_killed_holding_the_days_run_hands_it_over_within_a_minute(
        pg_db, tmp_path, start_server):
    marker = tmp_path / "holding"
    env = {"CARBONSCHED_LEASE_S": LEASE_S, "CARBONSCHED_TIME_LIMIT_S": "20",
           "CARBONSCHED_BOOK_REFRESH_S": "0.5", "PYTHONPATH": str(ROOT),
           "CARBONSCHED_DISPATCHER": "tests.service.steps.block:hold"}
    token = mint(pg_db, "read")
    a = start_server(pg_db, "--as-of", AS_OF,
                     env=env | {"CARBONSCHED_REPLICA_NAME": "a",
                                "CARBONSCHED_TEST_BLOCK_MARKER": str(marker)})
    deadline = time.monotonic() + 300
    while not marker.exists() and time.monotonic() < deadline:
        assert a.proc.poll() is None, a.logs()[-3000:]
        time.sleep(0.2)
    assert marker.exists(), a.logs()[-3000:]        # a holds the run, in its dispatch step
    b = start_server(pg_db, "--as-of", AS_OF, env=env | {"CARBONSCHED_REPLICA_NAME": "b"})
    # while a lives, its heartbeat keeps the run its own, lease after lease
    beats = set()
    deadline = time.monotonic() + 120
    while len(beats) < 4 and time.monotonic() < deadline:
        rec = record(pg_db, CRON_DATE)
        assert (rec["status"], rec["replica"], rec["attempts"]) == ("running", "a", 1), rec
        beats.add(rec["heartbeat_at"])
        time.sleep(0.3)
    assert len(beats) >= 4, beats
    assert httpx.get(b.url + "/readyz").json()["checks"]["cron"] == "standby"
    a.kill()
    killed = time.monotonic()
    claimed = None
    deadline = killed + 300
    while time.monotonic() < deadline:
        rec = record(pg_db, CRON_DATE)
        if claimed is None and rec["replica"] == "b":
            claimed = time.monotonic() - killed
        if rec["status"] != "running":
            break
        time.sleep(0.2)
    assert claimed is not None and claimed < 60, (claimed, b.logs()[-3000:])
    assert (rec["status"], rec["replica"], rec["attempts"]) == ("succeeded", "b", 2), rec
    assert rec["error"].startswith("taken over: the previous attempt (a) stopped renewing "
                                   "its lease"), rec["error"]
    h = {"Authorization": f"Bearer {token}"}
    runs = httpx.get(b.url + "/v1/runs", headers=h).json()
    assert runs["cron"]["leader"] is True and runs["count"] == 1
    print(f"takeover: b claimed the run {claimed:.1f} s after a was killed (lease {LEASE_S} s)")
    assert "Traceback" not in b.logs()
