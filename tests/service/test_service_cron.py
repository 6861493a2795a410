"""The cron inside real `carbonsched serve` processes: a restart on SQLite, two replicas on the
real PostgreSQL (exactly one runs the pipeline; the other takes over when the leader dies)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.service.conftest import copy_db, mint

pytestmark = pytest.mark.shared_data

# 2023-07-14T23:30Z is 07:30 on 2023-07-15 in Asia/Shanghai (the China catalog's zone): the
# 06:00 run of local day 2023-07-15 is due and plans 2023-07-16
AS_OF = "2023-07-14T23:30:00Z"
PLANNING_DATE = "2023-07-16"
FAST = {"CARBONSCHED_CRON_CHECK_INTERVAL_S": "1", "CARBONSCHED_BOOK_REFRESH_S": "0.5",
        "CARBONSCHED_LEASE_S": "3",
        "CARBONSCHED_TIME_LIMIT_S": "20"}


def wait_run(url: str, token: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = httpx.get(url + "/v1/runs", headers={"Authorization": f"Bearer {token}"},
                      timeout=10).json()
        done = [x for x in r["data"] if x["status"] != "running"]
        if done:
            return r
        time.sleep(0.5)
    raise TimeoutError("no finished run")


def metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")) and all(
                f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.split()[-1])
    return 0.0


def test_startup_run_once_and_not_again_after_a_restart(plan_db, tmp_path, start_server):
    url = copy_db(plan_db, tmp_path)
    token = mint(url, "read")
    srv = start_server(url, "--as-of", AS_OF, env=FAST)
    runs = wait_run(srv.url, token)
    assert [(r["planning_date"], r["status"]) for r in runs["data"]] == [
        (PLANNING_DATE, "succeeded")]
    assert runs["data"][0]["trigger"] in ("startup", "check")
    run = runs["data"][0]
    assert run["dispatch"] == "dispatch: not configured"
    assert run["local_day"] == "2023-07-15" and run["issued_at"] == "2023-07-16T00:00:00Z"
    # the next run: local day 2023-07-16's at 06:00, planning 2023-07-17 (before, this named
    # the run just made)
    assert runs["cron"] == {"enabled": True, "leader": True, "timezone": "Asia/Shanghai",
                            "at": "06:00:00", "next_due_planning_date": "2023-07-17",
                            "next_due_issue_time": "2023-07-17T00:00:00Z"}
    h = {"Authorization": f"Bearer {token}"}
    plan = httpx.get(srv.url + f"/v1/plans/{PLANNING_DATE}", headers=h).json()
    assert plan["plan_id"] == run["plan_id"] and plan["run"]["trigger"] == run["trigger"]
    assert metric(srv.url, "carbonsched_plan_runs_total", trigger=run["trigger"],
                  status="succeeded") == 1
    assert metric(srv.url, "carbonsched_dispatch_outcomes_total",
                  outcome="not_configured") == 1
    assert metric(srv.url, "carbonsched_solver_seconds_count") == 1
    srv.stop()
    srv2 = start_server(url, "--as-of", AS_OF, env=FAST)
    time.sleep(4)   # start-up tick and several safety-net ticks
    runs2 = httpx.get(srv2.url + "/v1/runs", headers=h).json()["data"]
    assert [(r["planning_date"], r["attempts"], r["plan_id"]) for r in runs2] == [
        (PLANNING_DATE, 1, run["plan_id"])]


def test_two_replicas_on_postgres_run_the_cron_once(pg_db, start_server):
    token = mint(pg_db, "read")
    h = {"Authorization": f"Bearer {token}"}
    a = start_server(pg_db, "--as-of", AS_OF, env=FAST | {"CARBONSCHED_REPLICA_NAME": "a"})
    b = start_server(pg_db, "--as-of", AS_OF, env=FAST | {"CARBONSCHED_REPLICA_NAME": "b"})
    runs = wait_run(a.url, token)["data"]
    assert len(runs) == 1 and runs[0]["status"] == "succeeded"
    leader_name = runs[0]["replica"]
    assert leader_name in ("a", "b")
    time.sleep(3)   # both replicas tick several times more
    assert len(httpx.get(b.url + "/v1/runs", headers=h).json()["data"]) == 1
    from sqlalchemy import create_engine, text

    eng = create_engine(pg_db)
    with eng.connect() as c:
        assert c.execute(text("SELECT count(*) FROM plans")).scalar() == 1
        assert c.execute(text("SELECT count(*) FROM pipeline_runs")).scalar() == 1
    eng.dispose()
    leader, standby = (a, b) if leader_name == "a" else (b, a)
    ready = {s: httpx.get(s.url + "/readyz").json()["checks"] for s in (leader, standby)}
    assert ready[leader]["cron"] == "leader" and ready[standby]["cron"] == "standby"
    # both answer from the new plan
    assert ready[leader]["plan"] == ready[standby]["plan"] == runs[0]["plan_id"]
    assert metric(leader.url, "carbonsched_plan_runs_total", status="succeeded") == 1
    assert metric(standby.url, "carbonsched_plan_runs_total", status="succeeded") == 0
    # the leader dies: its session ends, the standby takes the lead and runs nothing twice
    leader.kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if httpx.get(standby.url + "/readyz").json()["checks"]["cron"] == "leader":
            break
        time.sleep(0.5)
    assert httpx.get(standby.url + "/readyz").json()["checks"]["cron"] == "leader"
    assert len(httpx.get(standby.url + "/v1/runs", headers=h).json()["data"]) == 1
