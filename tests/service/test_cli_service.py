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
