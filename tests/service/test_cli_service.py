"""`carbonsched token create`, `carbonsched serve` input errors, `carbonsched plan --dispatch`."""

from __future__ import annotations

import json

import pytest

from tests.service.conftest import cli


def test_token_create_prints_the_token_alone_on_its_last_line(tmp_path):
    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 't.sqlite'}"}
    r = cli("token", "create", "--role", "submit", "--name", "ci", env=env)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("cst_") and " " not in last
    assert "role submit stored (hashed)" in r.stderr
    r = cli("token", "create", "--role", "root", env=env)
    assert r.returncode == 2
    assert "unknown role 'root'; use one of read, submit, admin" in r.stderr


@pytest.mark.parametrize("args, fragment", [
    (["--as-of", "2023-07-15T06:00:00"], "has no time zone"),
    (["--as-of", "yesterday"], "is not an ISO 8601 time"),
    (["--catalog", "atlantis"], "atlantis"),
    (["--config", "/nonexistent/carbonsched.toml"], "config file /nonexistent"),
])
def test_serve_refuses_bad_input_before_binding(tmp_path, args, fragment):
    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 's.sqlite'}"}
    r = cli("serve", "--port", "1", *args, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr


def test_serve_refuses_a_cron_that_would_issue_its_plans_before_it_runs(tmp_path):
    """New York, same-day plans at 06:00: each run would come 10-11 h after its plan's issue
    time (00:00 UTC). Refused before the port is bound, naming the settings and the fix; with
    the cron off the same settings pass that check (and stop at the port, which is taken)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 's.sqlite'}",
               "CARBONSCHED_CATALOG": "global", "CARBONSCHED_CRON_PLAN_OFFSET_DAYS": "0"}
        r = cli("serve", "--host", "127.0.0.1", "--port", port, env=env, timeout=60)
        said = " ".join(r.stderr.split())
        assert r.returncode == 2, r.stderr
        assert ("the daily cron would issue its plans before it runs: CARBONSCHED_CRON_TIME=06:00 "
                "in America/New_York") in said
        assert "set CARBONSCHED_CRON_PLAN_OFFSET_DAYS=1" in said and "cannot listen" not in said
        r = cli("serve", "--host", "127.0.0.1", "--port", port, "--no-cron", env=env, timeout=60)
        assert r.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in r.stderr, r.stderr


def test_serve_reads_a_config_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('catalog = "atlantis-from-config"\n')
    r = cli("serve", "--config", str(cfg), env={
        "CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 's.sqlite'}"}, timeout=60)
    assert r.returncode == 2 and "atlantis-from-config" in r.stderr


@pytest.mark.shared_data
def test_plan_dispatch_runs_the_pipeline_once_per_date(tmp_path, shared_data):
    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite'}"}
    out = tmp_path / "plan.json"
    r = cli("plan", "--dispatch", "--date", "2023-07-17", "--time-limit", "20",
            "--data-dir", str(shared_data), "--out", str(out), env=env)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert (rec["planning_date"], rec["status"], rec["trigger"]) == ("2023-07-17", "succeeded",
                                                                    "cli")
    assert rec["dispatch"] == "dispatch: not configured"
    assert json.loads(out.read_text())["plan_id"] == rec["plan_id"]
    r2 = cli("plan", "--dispatch", "--date", "2023-07-17", env=env)
    assert r2.returncode == 0
    assert "planning date 2023-07-17 already has a run (succeeded, cli" in r2.stderr
    assert json.loads(r2.stdout.strip().splitlines()[-1])["plan_id"] == rec["plan_id"]


@pytest.mark.shared_data
@pytest.mark.parametrize("dispatch", [True, False], ids=["plan --dispatch", "plan"])
def test_plan_takes_the_catalog_and_planner_settings_it_is_not_given(tmp_path, shared_data,
                                                                      dispatch):
    # a CronJob configures the run by its environment, as `serve` is configured. Before,
    # `plan` (and so `plan --dispatch`) passed its own defaults for the catalog, solver, time
    # limit and horizon, so CARBONSCHED_CATALOG=my-fleet planned the China catalog
    from tests.service.test_rolling_service import CATALOG

    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite'}",
           "CARBONSCHED_CATALOG": CATALOG, "CARBONSCHED_SOLVER": "cbc",
           "CARBONSCHED_HORIZON_HOURS": "36", "CARBONSCHED_TIME_LIMIT_S": "25",
           "CARBONSCHED_DATA_DIR": str(shared_data)}
    out = tmp_path / "plan.json"
    args = ["--dispatch"] if dispatch else []
    r = cli("plan", *args, "--date", "2023-07-10", "--out", str(out), env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["catalog"] == "frankfurt"
    assert (doc["solver"]["name"], doc["horizon_hours"]) == ("cbc", 36)
    # an option given still wins over the setting (the limit: one of each)
    r = cli("plan", *args, "--date", "2023-07-11", "--hours", "24", "--out", str(out), env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["horizon_hours"] == 24


@pytest.mark.parametrize(("var", "value", "says"), [
    ("CARBONSCHED_SOLVER", "auto", "solver: Input should be 'highs' or 'cbc'"),
    ("CARBONSCHED_TIME_LIMIT_S", "0", "time_limit_s: Input should be greater than 0"),
])
def test_a_setting_out_of_range_is_one_error_line_not_a_traceback(tmp_path, var, value, says):
    # before: `plan` raised pydantic's traceback, and CARBONSCHED_SOLVER=auto (which the docs
    # listed) was accepted by `serve` and failed every run
    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite'}", var: value}
    r = cli("plan", "--no-store", "--date", "2023-07-10", env=env, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert ("error: invalid settings (CARBONSCHED_* variables or CARBONSCHED_CONFIG): "
            + says) in " ".join(r.stderr.split())
    r = cli("serve", "--port", "1", env=env, timeout=60)
    assert r.returncode == 2 and says in " ".join(r.stderr.split())
