"""Grid events through the service and the CLI (issue 38 item 3).

A real ``carbonsched serve`` (dispatch loops on, the grid loop's interval left at 600 s so only
the POST's wake-up can act) pauses a running preemptible job on the real local Slurm within
seconds of ``POST /v1/grid-events``; the reduction is measured from the cluster. The route's
refusals are checked on the same server; the CLI adds, lists and shows events.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan
from carbonsched.store import Store
from tests.dispatch.helpers import one_plan, poll, squeue_jobs
from tests.service.conftest import cli

ADMIN = "grid-events-test-admin-7c1d"
SITE, CLUSTER = "ca-on-toronto", "ontario"
POLL_S = 180.0


def _slurm_dir() -> Path:
    d = os.environ.get("CARBONSCHED_SLURM_CONF_DIR")
    if not d:
        pytest.skip("CARBONSCHED_SLURM_CONF_DIR not set (scripts/test starts the Slurm clusters)")
    return Path(d)


def _hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _poll(fn, until, what: str):
    return poll(fn, until, what, POLL_S, 0.3)


def _ours(conf: Path, prefix: str) -> dict[str, dict]:
    return {j["name"]: j for j in squeue_jobs(conf) if prefix in j["name"]}


def _running_gpus(jobs: dict[str, dict]) -> int:
    return sum(int(j["gres"].rsplit(":", 1)[-1] or 0) for j in jobs.values()
               if j["states"][:1] == ["RUNNING"])


def test_a_posted_event_pauses_running_work_on_slurm_within_seconds(tmp_path, start_server):
    slurm_dir = _slurm_dir()
    conf = slurm_dir / CLUSTER / "slurm.conf"
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store(url)
    now = datetime.now(UTC).replace(microsecond=0)
    go = now + timedelta(seconds=2)
    ph = f"gs-{uuid.uuid4().hex[:6]}"
    doc = one_plan([
        {"job_id": f"{ph}-pre", "site": SITE, "start": go, "end": go + timedelta(hours=1),
         "gpu_type": "A100", "gpus": 2, "command": "sleep 3000", "piece": 0, "pieces": 2,
         "deadline": _iso(go + timedelta(days=1))},
        {"job_id": f"{ph}-rigid", "site": SITE, "start": go, "end": go + timedelta(hours=1),
         "gpu_type": "A100", "gpus": 1, "command": "sleep 3000",
         "deadline": _iso(go + timedelta(days=1))}])
    store.save_plan(doc)
    settings = Settings(slurm_conf_dir=slurm_dir, dispatch_backoff_s=0.01)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 2}
    store.engine.dispose()
    try:
        _poll(lambda: _ours(conf, ph), lambda js: _running_gpus(js) == 3, "the jobs starting")
        srv = start_server(url, "--catalog", "global", "--no-cron", env={
            "CARBONSCHED_DISPATCH_LOOPS": "true", "CARBONSCHED_SLURM_CONF_DIR": str(slurm_dir),
            "CARBONSCHED_GRID_EVENT_INTERVAL_S": "300", "CARBONSCHED_LEASE_S": "3",
            "CARBONSCHED_RECONCILE_INTERVAL_S": "600", "CARBONSCHED_STATUS_REFRESH_S": "600",
            "CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": ADMIN})
        c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN}"},
                         timeout=60)
        _poll(lambda: httpx.get(srv.url + "/metrics", timeout=10).text,
              lambda t: "carbonsched_cron_leader 1.0" in t, "the replica taking the lead")
        start = _hour()
        t0 = time.monotonic()
        r = c.post("/v1/grid-events", json={"site": SITE, "start": _iso(start),
                                             "end": _iso(start + timedelta(hours=2)),
                                             "target_fraction": 0.5, "notice_minutes": 0})
        assert r.status_code == 201, r.text
        ev = r.json()
        assert ev["event_id"].startswith("ge-") and ev["state"] == "active"
        assert ev["source"] == "api:admin"
        jobs = _poll(lambda: _ours(conf, ph), lambda js: _running_gpus(js) == 1,
                     "the pause reaching the cluster")
        reached_s = time.monotonic() - t0
        assert jobs[f"carbonsched-{ph}-pre-0"]["states"][0] == "SUSPENDED"
        assert jobs[f"carbonsched-{ph}-rigid-0"]["states"][0] == "RUNNING"
        # well inside the event's first interval, and long before the loop's own 300 s pass
        assert reached_s < 300, reached_s
        print(f"POST -> 2 of 3 GPUs paused on the cluster in {reached_s:.1f} s")
        shown = _poll(lambda: c.get(f"/v1/grid-events/{ev['event_id']}").json(),
                      lambda d: d["counts"] == {"pause:done": 1}, "the action recorded")
        assert shown["baseline_kw"] == pytest.approx(3 * 0.8125)
        assert shown["target_reduction_kw"] == pytest.approx(1.5 * 0.8125)
        assert shown["planned_reduction_kw"] == pytest.approx(2 * 0.8125)
        assert shown["shortfall_kw"] == 0.0
        (a,) = shown["actions"]
        assert (a["key"], a["action"], a["state"]) == (f"{ph}-pre#0", "pause", "done")
        assert a["detail"].startswith("done: scontrol suspend")
        # the service counts the action by backend (prometheus-client)
        _poll(lambda: httpx.get(srv.url + "/metrics", timeout=10).text,
              lambda t: 'carbonsched_grid_event_actions_total{action="pause",backend="slurm",'
              'outcome="done"} 1.0' in t, "the action counted in /metrics")
        listed = c.get("/v1/grid-events").json()
        assert listed["count"] == 1 and listed["data"][0]["actions"] == []

        # the route's refusals, on the same server
        body = {"site": SITE, "start": _iso(start), "end": _iso(start + timedelta(hours=1))}
        for bad, words in (
                ({**body, "target_kw": 5, "target_fraction": 0.5}, "exactly one of target_kw"),
                (body, "exactly one of target_kw"),
                ({**body, "target_fraction": 1.0001}, "must be a finite number > 0 and <= 1"),
                ({**body, "target_kw": 5, "end": body["start"]}, "is not after start"),
                ({**body, "target_kw": 5, "start": _iso(start + timedelta(minutes=5))},
                 "is not on the hour"),
                ({**body, "target_kw": 5, "start": "2026-07-01T17:00:00"}, "has no time zone"),
                ({**body, "target_kw": 5, "oops": 1}, "Extra inputs are not permitted")):
            r = c.post("/v1/grid-events", json=bad)
            assert r.status_code == 422, (bad, r.text)
            assert words in r.json()["message"], (bad, r.text)
        r = c.post("/v1/grid-events", json={**body, "site": "nowhere", "target_kw": 5})
        assert r.status_code == 404 and "ca-on-toronto" in r.json()["detail"], r.text
        # just at the limit: the whole baseline, at a site with no work (nothing to shed)
        r = c.post("/v1/grid-events", json={**body, "site": "gb-london",
                                             "target_fraction": 1.0})
        assert r.status_code == 201, r.text
        assert c.get("/v1/grid-events/ge-000000000000").status_code == 404
        assert c.get("/v1/grid-events/not-an-id").status_code == 422
        read = cli("token", "create", "--role", "read", env={"CARBONSCHED_DATABASE_URL": url})
        token = read.stdout.strip().splitlines()[-1]
        r = httpx.post(srv.url + "/v1/grid-events", json={**body, "target_kw": 5},
                       headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 403, r.text
        r = httpx.get(srv.url + f"/v1/grid-events/{ev['event_id']}",
                      headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["counts"] == {"pause:done": 1}
        assert "Traceback" not in srv.logs()
    finally:
        ids = [str(j["job_id"]) for j in _ours(conf, ph).values()]
        if ids:
            subprocess.run(["scancel", *ids], env={**os.environ, "SLURM_CONF": str(conf)},
                           capture_output=True)


def test_the_cli_adds_lists_and_shows_events_and_refuses_bad_ones(tmp_path):
    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 's.sqlite'}",
           "CARBONSCHED_CATALOG": "global"}
    start = _hour() + timedelta(hours=3)
    r = cli("grid-event", "add", "--site", SITE, "--start", _iso(start), "--end",
            _iso(start + timedelta(hours=3)), "--target-fraction", "0.25", "--json", env=env)
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    assert (ev["state"], ev["target_fraction"], ev["notice_s"]) == ("scheduled", 0.25, 14400.0)
    r = cli("grid-event", "list", env=env)
    assert r.returncode == 0 and ev["event_id"] in r.stdout and "scheduled" in r.stdout
    r = cli("grid-event", "show", ev["event_id"], env=env)
    assert r.returncode == 0 and "not re-planned yet" in r.stdout
    r = cli("grid-event", "add", "--site", SITE, "--start", _iso(start + timedelta(minutes=30)),
            "--end", _iso(start + timedelta(hours=3)), "--target-kw", "10", env=env)
    assert r.returncode == 2 and "is not on the hour" in r.stderr and "Traceback" not in r.stderr
    r = cli("grid-event", "add", "--site", "nowhere", "--start", _iso(start), "--end",
            _iso(start + timedelta(hours=1)), "--target-kw", "10", env=env)
    assert r.returncode == 2 and "nowhere" in r.stderr
    r = cli("grid-event", "show", "ge-000000000000", env=env)
    assert r.returncode == 2 and "grid-event list" in r.stderr
