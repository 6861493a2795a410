"""The service's rolling step: carry-over through the store (SQLite and PostgreSQL), commit
before the next run, dispatch only what is committed (real adapters, dry run), keyed runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time

import pandas as pd
import pytest

from carbonsched.clock import ManualClock
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan
from carbonsched.service.cron import DailyCron
from carbonsched.service.runs import planning_pipeline
from carbonsched.store import Store
from carbonsched.store.rolling_state import RollingStore
from carbonsched.store.service import ServiceStore
from tests.conftest import FIXTURES

pytestmark = pytest.mark.shared_data

CATALOG = str(FIXTURES / "catalog" / "frankfurt.toml")


def workload(tmp_path) -> str:
    jobs = [
        # arrives 18:00 on 07-10, may wait 24 h: the forecast's cleanest 2 h are on 07-11
        {"id": "evening", "gpu_type": "A100", "gpus": 1, "duration_hours": 2,
         "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T18:00:00Z",
         "deadline": "2023-07-11T20:00:00Z"},
        # must run on 07-10 morning: committed by the first run
        {"id": "morning", "gpu_type": "A100", "gpus": 2, "duration_hours": 3,
         "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T00:00:00Z",
         "deadline": "2023-07-10T08:00:00Z"},
        # a window that closes before the second run: it ends there as DeadlinePassed
        {"id": "late-arrival", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
         "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-09T00:00:00Z",
         "deadline": "2023-07-09T23:00:00Z"},
    ]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": jobs}))
    return str(path)


def settings(tmp_path, shared_data, url: str) -> Settings:
    return Settings(catalog=CATALOG, data_dir=shared_data, database_url=url,
                           workload_file=workload(tmp_path), horizon_hours=72, rolling=True,
                           time_limit_s=30.0)


def run_two_days(tmp_path, shared_data, url: str):
    s = settings(tmp_path, shared_data, url)
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    summaries = []

    def dry_dispatch(store, plan_id, catalog, *, clock, commit_before):
        assert callable(clock)  # dispatch_plan calls it for "now"
        # the fixture catalog's own cluster: never the clusters scripts/test may have started
        out = dispatch_plan(store, plan_id, catalog, dry_run=True, clock=clock,
                            commit_before=commit_before,
                            settings=Settings(slurm_conf_dir=None, kubeconfig=None),
                            placeholder=True)   # the fixture's jobs name nothing to run
        summaries.append(out)
        return out.to_dict()

    # an API submission (as POST /v1/jobs stores it) that may start until 07-12
    spec = {"id": "api-1", "tenant": "t", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T12:00:00Z",
            "deadline": "2023-07-12T12:00:00Z", "kind": "batch"}
    now = clock.now()
    db.add_jobs([{"job_id": "api-1", "tenant": "t", "spec_json": json.dumps(spec),
                  "submitted_at": now, "updated_at": now, "reserved": False, "detail": "",
                  "state": "Pending", "reason": "AwaitingPlan"}])
    pipe = planning_pipeline(s, db, clock, dry_dispatch)
    cron = DailyCron(db, pipe, clock, "UTC", time(0, 0), offset_days=1)
    rec1 = cron.tick()
    state1 = {r["job_id"]: r for r in RollingStore(db.store).rows()}
    plan1 = db.store.get_plan(rec1["plan_id"])
    again = cron.tick()                       # the same planning date: not run again
    clock.set(datetime(2023, 7, 10, 23, 0, tzinfo=UTC))
    rec2 = cron.tick()
    state2 = {r["job_id"]: r for r in RollingStore(db.store).rows()}
    plan2 = db.store.get_plan(rec2["plan_id"])
    return rec1, state1, plan1, again, rec2, state2, plan2, summaries, db


def check(tmp_path, shared_data, url: str) -> None:
    rec1, state1, plan1, again, rec2, state2, plan2, summaries, db = run_two_days(
        tmp_path, shared_data, url)
    assert rec1["dispatch"].startswith("dispatch: "), rec1["dispatch"]
    assert rec1["planning_date"] == "2023-07-10" and rec1["status"] == "succeeded"
    assert again is None
    # run 1 (issued 07-10 00:00, H = 72 h): the morning job is committed, the evening job is
    # planned for 07-11 and stays pending, the job whose window closed ends DeadlinePassed
    r1 = plan1["rolling"]
    assert r1["horizon_hours"] == 72 and r1["commit_before"] == "2023-07-11T00:00:00Z"
    assert "morning" in r1["committed"]
    assert [d["job_id"] for d in r1["deferred"] if d["job_id"] == "evening"] == ["evening"]
    evening_start = pd.Timestamp(next(d["start"] for d in r1["deferred"]
                                      if d["job_id"] == "evening"))
    assert evening_start >= pd.Timestamp("2023-07-11T00:00Z")
    assert [(e["job_id"], e["reason"]) for e in r1["ended"]] == [
        ("late-arrival", "DeadlinePassed")]
    assert state1["evening"]["state"] == "Pending" and state1["evening"]["reason"] == \
        "NotCommitted"
    assert state1["morning"]["state"] == "Dispatched"
    assert state1["late-arrival"]["state"] == "Failed"
    assert "latest start 2023-07-09T22:00:00+00:00 is before the run" in \
        state1["late-arrival"]["detail"]
    assert plan1["horizon_hours"] == 72 and len(plan1["site_hours"]) > 0
    # dispatch got only what starts before the next run; the rest is NotCommitted
    acts = {o.job_id: o.action for o in summaries[0].outcomes}
    assert acts["morning"] == "dry_run" and acts["evening"] == "not_committed"
    rendered = next(o.rendered for o in summaries[0].outcomes if o.job_id == "morning")
    assert "sbatch --parsable --job-name=carbonsched-morning-0" in rendered
    assert "--begin=2023-07-10T05:00:00" in rendered
    # run 2 (issued 07-11 00:00): the carried evening job is committed on 07-11, the running
    # morning job (ended at 07-10) is not planned again, no pinned stand-in reaches the plan
    r2 = plan2["rolling"]
    assert rec2["planning_date"] == "2023-07-11"
    assert "evening" in r2["committed"]
    assert state2["evening"]["state"] == "Dispatched"
    assert pd.Timestamp("2023-07-11T00:00Z") <= state2["evening"]["start"] <= \
        pd.Timestamp("2023-07-11T18:00Z")
    assert all(not p["job_id"].startswith("__running__") for p in plan2["placements"])
    assert "morning" not in {p["job_id"] for p in plan2["placements"]}
    acts2 = {o.job_id: o.action for o in summaries[1].outcomes}
    assert acts2["evening"] == "dry_run"
    # the API job was carried too: planned in one of the two runs, its state follows
    api = db.get_job("api-1")
    assert api["state"] in ("Planned", "Pending")
    if api["state"] == "Planned":
        assert state2["api-1"]["state"] == "Dispatched"
    else:
        assert api["reason"] == "NotCommitted" and state2["api-1"]["state"] == "Pending"


def test_carry_over_through_sqlite(tmp_path, shared_data):
    check(tmp_path, shared_data, f"sqlite:///{tmp_path / 'store.sqlite'}")


def test_carry_over_through_postgresql(tmp_path, shared_data, pg_db):
    check(tmp_path, shared_data, pg_db)


def test_state_survives_a_new_process(tmp_path, shared_data):
    # what one run wrote is what the next process loads: pending jobs with their deadlines
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    run_two_days(tmp_path, shared_data, url)
    st = RollingStore(Store(url)).load()
    assert "evening" in st.committed and "late-arrival" in st.ended
    assert st.last_issued_at == pd.Timestamp("2023-07-11T00:00Z")
    assert st.jobs["evening"].deadline == pd.Timestamp("2023-07-11T20:00Z")


def test_rolling_needs_a_horizon_at_least_the_interval(tmp_path, shared_data):
    from carbonsched.catalog import load_catalog
    from carbonsched.domain import Workload
    from carbonsched.errors import InputError
    from carbonsched.service.rolling import rolling_step

    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    with pytest.raises(InputError, match="shorter than the run interval"):
        rolling_step(store, load_catalog(CATALOG), CATALOG, "2023-07-10",
                     pd.Timestamp("2023-07-10T00:00Z"), [], Workload([], []), shared_data,
                     "highs", 10.0, 12, 24)


def test_cli_plan_dispatch_rolling(tmp_path, shared_data, monkeypatch):
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    monkeypatch.delenv("CARBONSCHED_DISPATCHER", raising=False)
    args = ["plan", "--dispatch", "--rolling", "--catalog", CATALOG, "--jobs",
            workload(tmp_path), "--data-dir", str(shared_data), "--hours", "72"]
    r1 = CliRunner().invoke(app, [*args, "--date", "2023-07-10"])
    assert r1.exit_code == 0, r1.output
    rows = {r["job_id"]: r for r in RollingStore(Store(url)).rows()}
    assert rows["evening"]["state"] == "Pending" and rows["morning"]["state"] == "Dispatched"
    again = CliRunner().invoke(app, [*args, "--date", "2023-07-10"])
    assert again.exit_code == 0 and "already has a run" in again.stderr
    r2 = CliRunner().invoke(app, [*args, "--date", "2023-07-11"])
    assert r2.exit_code == 0, r2.output
    rows = {r["job_id"]: r for r in RollingStore(Store(url)).rows()}
    assert rows["evening"]["state"] == "Dispatched"
    assert json.loads(r2.stdout.strip().splitlines()[-1])["dispatch"] == \
        "dispatch: not configured"


def test_cli_rolling_needs_dispatch(tmp_path, shared_data):
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    r = CliRunner().invoke(app, ["plan", "--rolling", "--catalog", CATALOG, "--date",
                                 "2023-07-10", "--data-dir", str(shared_data)])
    assert r.exit_code == 2 and "--rolling needs --dispatch" in r.stderr
