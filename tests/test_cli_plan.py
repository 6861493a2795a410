"""The daily plan end to end through the CLI, checked from the plan JSON alone."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.config import get_settings
from carbonsched.store import Store
from carbonsched.workload.files import read_workload

runner = CliRunner()


@pytest.fixture(autouse=True)
def _private_store(private_store):
    """Every test here on a store of its own (``tests/conftest.py``)."""


def _verify(plan: dict, jobs_path, catalog_name: str) -> None:
    """Recompute every rule from the plan, the jobs file and the catalog (trusting nothing)."""
    cat = load_catalog(catalog_name)
    wl = read_workload(jobs_path)
    jobs = {j.id: j for j in wl.jobs}
    placed = [p["job_id"] for p in plan["placements"]]
    unplaced = [u["job_id"] for u in plan["unplaced"]]
    assert sorted(placed + unplaced) == sorted(jobs), "every job placed or given a reason, once"
    assert all(u["reason"] for u in plan["unplaced"])
    gpus = defaultdict(int)
    it_kw = defaultdict(float)
    for p in plan["placements"]:
        j = jobs[p["job_id"]]
        start, end = pd.Timestamp(p["start"]), pd.Timestamp(p["end"])
        assert start >= j.earliest_start and end <= j.deadline
        assert (end - start) == pd.Timedelta(hours=j.duration_hours)
        assert p["gpus"] == j.gpus and p["gpu_type"] == j.gpu_type
        assert pd.Timestamp(p["deadline"]) == j.deadline  # for the backend's own deadline
        assert not j.allowed_sites or p["site"] in j.allowed_sites
        for h in pd.date_range(start, end, freq="h", inclusive="left"):
            gpus[(p["site"], h, j.gpu_type)] += j.gpus
            it_kw[(p["site"], h)] += j.it_power_kw
    demand = {(d.area, d.hour): d for d in wl.inference}
    served = defaultdict(int)
    for i in plan["inference"]:
        d = demand[(i["area"], pd.Timestamp(i["hour"]))]
        site = cat.site(i["site"])
        assert site.latency_ms[i["area"]] <= d.slo_ms, "inference outside its SLO"
        gpus[(i["site"], d.hour, d.gpu_type)] += i["gpus"]
        it_kw[(i["site"], d.hour)] += i["gpus"] * d.power_per_gpu_kw
        served[(d.area, d.hour)] += i["gpus"]
    for key, d in demand.items():
        assert served[key] == d.gpus, f"inference {key} not fully served"
    for (sid, _, t), n in gpus.items():
        assert n <= cat.site(sid).gpu_count(t)
    pue_hi = {(r["site"], pd.Timestamp(r["hour"])): r["pue_hi_95"] for r in plan["site_hours"]}
    for (sid, hour), kw in it_kw.items():
        assert kw <= cat.site(sid).it_power_cap_kw + 1e-6
        facility_cap = cat.site(sid).facility_power_cap_kw
        if facility_cap is not None:  # the grid connection, at the PUE's upper 95 % bound
            assert kw * pue_hi[(sid, hour)] <= facility_cap + 1e-6
    for r in plan["site_hours"]:  # the plan's own power report agrees with the recount
        assert r["it_power_kw"] == pytest.approx(it_kw.get((r["site"], pd.Timestamp(r["hour"])),
                                                           0.0), abs=1e-6)
    assert plan["totals"]["emissions_kg"] < plan["totals"]["baseline_emissions_kg"]


@pytest.mark.shared_data
@pytest.mark.slow
def test_global_plan_from_traces_is_valid_and_beats_baseline(tmp_path, shared_data):
    jobs = tmp_path / "jobs.json"
    r = runner.invoke(app, ["workload", "from-traces", "--data-dir", str(shared_data),
                            "--date", "2023-07-15", "--out", str(jobs)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--catalog", "global", "--data-dir", str(shared_data),
                            "--date", "2023-07-15", "--jobs", str(jobs), "--out", str(out)])
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())
    # JP-TK's Electricity Maps history is entirely the provider's estimate: the plan says so
    assert plan["signal_quality"] == "estimated"
    assert plan["site_signal_quality"]["jp-tk-tokyo"] == "estimated"
    assert plan["site_signal_quality"]["ca-on-toronto"] == "measured"
    assert plan["solver"]["status"] in ("optimal", "feasible")
    assert plan["solver"]["name"] == "highs"
    _verify(plan, jobs, "global")
    assert len(plan["site_hours"]) == 24 * len(plan["sites"])
    # each site's chosen models, with their validation error, are named in the plan
    assert set(plan["forecast_models"]) == set(plan["sites"])
    for sid, by_signal in plan["forecast_models"].items():
        ci = by_signal["carbon_intensity_g_per_kwh"]
        assert ci["model"] and ci["metric"] == "mape", (sid, ci)
        assert ci["validation_error"] <= ci["naive_validation_error"], (sid, ci)
        assert set(by_signal) == {"carbon_intensity_g_per_kwh", "green_surplus_index", "pue"}
    # the carbon-agnostic baseline could not place 3 one-GPU A100 jobs; the plan lists them
    # (they used to be dropped silently) and places every job
    wl = {j.id: j for j in read_workload(jobs).jobs}
    assert len(plan["baseline_unplaced"]) == 3
    assert {(wl[u["job_id"]].gpu_type, wl[u["job_id"]].gpus) for u in plan["baseline_unplaced"]} \
        == {("A100", 1)}
    assert {u["reason"] for u in plan["baseline_unplaced"]} == {"InsufficientCapacity"}
    assert plan["baseline"]["placed"] == len(wl) - 3 and plan["unplaced"] == []
    # recorded in the store, with the forecasts it used
    store = Store(get_settings().resolved_database_url())
    assert store.get_plan(plan["plan_id"])["totals"] == plan["totals"]
    fc = store.forecasts(plan["plan_id"])
    assert set(fc["signal"]) == {"carbon_intensity_g_per_kwh", "green_surplus_index", "pue"}
    assert len(fc) == 3 * 24 * len(plan["sites"])


def test_default_catalog_plan_is_modelled_and_valid(tmp_path):
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--out", str(out)])
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())
    assert plan["catalog"] == "china-eastdata-westcompute"
    assert plan["signal_quality"] == "modelled"
    assert "modelled" in r.output and "Per site" in r.output
    for key in ("plan_id", "date", "solver", "placements", "inference", "unplaced", "totals"):
        assert key in plan
    assert set(plan["solver"]) >= {"name", "status", "mip_gap", "seconds"}
    # the demo workload is rebuilt deterministically: check it like a jobs file
    from carbonsched.workload.files import demo_workload, write_workload

    jobs = tmp_path / "demo.json"
    write_workload(demo_workload(load_catalog("china-eastdata-westcompute"), "2026-11-30"), jobs)
    _verify(plan, jobs, "china-eastdata-westcompute")


def test_dead_store_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", "postgresql+psycopg2://u@127.0.0.1:1/x")
    get_settings.cache_clear()
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--out", str(out)])
    assert r.exit_code == 3
    assert "127.0.0.1:1/x is unreachable" in r.output
    assert json.loads(out.read_text())["catalog"] == "china-eastdata-westcompute"
    assert "Per site" in r.output


def test_cbc_solver_option(tmp_path):
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--solver", "cbc", "--no-store",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["solver"]["name"] == "cbc"


@pytest.mark.parametrize(("args", "message"), [
    (["--catalog", "atlantis"], "atlantis"),
    (["--date", "2023-13-45"], "not YYYY-MM-DD"),
    (["--jobs", "/nonexistent/jobs.json"], "/nonexistent/jobs.json"),
    (["--solver", "gurobi"], "unknown solver"),
])
def test_plan_bad_input_is_one_clear_error(args, message):
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2026-11-30", *args])
    assert r.exit_code != 0
    assert message in r.output


def test_malformed_jobs_file_names_file_and_entry(tmp_path):
    bad = tmp_path / "jobs.json"
    bad.write_text(json.dumps({"jobs": [{"id": "j1", "tenant": "t", "gpu_type": "A100",
                                         "gpus": 1, "duration_hours": 2,
                                         "power_per_gpu_kw": 0.5,
                                         "earliest_start": "2026-11-30T00:00:00",
                                         "deadline": "2026-11-30T06:00:00Z"}],
                               "inference": []}))
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2026-11-30", "--jobs", str(bad)])
    assert r.exit_code == 2
    assert "jobs.json" in r.output and "naive" in r.output


def test_plan_for_date_without_data_says_so(tmp_path, shared_data):
    r = runner.invoke(app, ["plan", "--no-store", "--catalog", "global", "--data-dir",
                            str(shared_data), "--date", "2030-01-01"])
    assert r.exit_code == 2
    assert "no site has signals" in r.output
    # ... and says why, with the first site named (it used to say nothing more)
    out = " ".join(r.output.split())
    assert ("no site has signals for 2030-01-01; nothing can be planned: site ca-on-toronto "
            "left out:") in out
    assert "choose a date the data covers" in out


def test_plan_help_shows_units():
    # Rich markup used to swallow "[s]" and "[h]": the help showed no unit at all
    r = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert r.exit_code == 0
    said = " ".join(r.output.replace("│", " ").split())
    assert "Solver time limit (default: CARBONSCHED_TIME_LIMIT_S, 60). [s]" in said
    assert "Planning horizon (default: CARBONSCHED_HORIZON_HOURS, 24). [h]" in said


@pytest.mark.parametrize("bad_date", ["2023-07-15[x]", "[/b]", "07/08/2023"])
def test_plan_error_prints_the_input_verbatim(bad_date):
    # user text in an error was read as Rich markup: "[x]" vanished, "[/b]" crashed the CLI,
    # and "07/08/2023" was planned as 8 July without a word
    r = runner.invoke(app, ["plan", "--no-store", "--date", bad_date])
    assert r.exit_code == 2, r.output
    assert f"error: date '{bad_date}' is not YYYY-MM-DD" in r.output


@pytest.mark.parametrize(("args", "message"), [
    (["--hours", "100000"], "horizon of 100000 h is outside 1..168 h"),
    (["--hours", "0"], "horizon of 0 h is outside 1..168 h"),
    (["--time-limit", "-1"], "solver time limit must be > 0 s, got -1.0"),
])
def test_plan_bad_horizon_or_time_limit_refused_before_forecasting(args, message):
    # --hours 100000 used to run for minutes before anything was said
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2026-11-30", *args])
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert "forecasting" not in r.output


def test_stdout_carries_only_the_plan(tmp_path):
    """The native solver's banner goes to stderr, so stdout can be piped."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, CARBONSCHED_DATABASE_URL=f"sqlite:///{tmp_path}/s.db")
    r = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "plan", "--date", "2026-11-30",
                        "--no-store"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Plan ")
    assert "HiGHS" not in r.stdout


def test_jobs_built_for_another_catalog_are_refused(tmp_path, shared_data):
    jobs = tmp_path / "jobs.json"
    r = runner.invoke(app, ["workload", "from-traces", "--data-dir", str(shared_data),
                            "--date", "2023-07-15", "--out", str(jobs)])  # catalog global
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2023-07-15", "--jobs", str(jobs)])
    assert r.exit_code == 2
    assert "catalog 'china-eastdata-westcompute' does not define" in r.output
    assert "--catalog" in r.output


def test_infeasible_plan_is_written_and_exits_4(tmp_path):
    bad = tmp_path / "jobs.json"
    bad.write_text(json.dumps({"jobs": [], "inference": [
        {"area": "beijing", "hour": "2026-11-30T12:00:00Z", "gpu_type": "T4", "gpus": 10000,
         "slo_ms": 20, "power_per_gpu_kw": 0.1}]}))
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2026-11-30", "--jobs", str(bad),
                            "--out", str(out)])
    assert r.exit_code == 4, r.output
    plan = json.loads(out.read_text())
    assert plan["solver"]["status"] == "infeasible"
    assert plan["solver"]["infeasible_family"] in ("gpu_capacity", "inference_slo")
    assert f"({plan['solver']['infeasible_family']})" in r.output


@pytest.mark.shared_data
@pytest.mark.slow
def test_global_plan_keeps_a_grid_connection_cap(tmp_path, shared_data):
    # the global catalog with a grid connection at Toronto of 1.2 x its IT cap (11.8 kW): on a
    # July day the PUE's upper bound passes 1.2 in some hours, and there the connection binds
    from importlib import resources

    text = (resources.files("carbonsched.regions") / "global.toml").read_text()
    text = text.replace('id = "ca-on-toronto"',
                        'id = "ca-on-toronto"\nfacility_power_cap_kw = 14.16', 1)
    cat_file = tmp_path / "global-capped.toml"
    cat_file.write_text(text)
    jobs = tmp_path / "jobs.json"
    r = runner.invoke(app, ["workload", "from-traces", "--data-dir", str(shared_data),
                            "--date", "2023-07-15", "--out", str(jobs)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--catalog", str(cat_file), "--data-dir", str(shared_data),
                            "--date", "2023-07-15", "--jobs", str(jobs), "--out", str(out)])
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())
    _verify(plan, jobs, str(cat_file))
    toronto = [x for x in plan["site_hours"] if x["site"] == "ca-on-toronto"]
    assert all(x["facility_power_cap_kw"] == 14.16 for x in toronto)
    binding = [x for x in toronto if 14.16 / x["pue_hi_95"] < 11.8]
    assert binding, "the cap never binds: raise the PUE bound or lower the cap in this test"
    assert min(x["facility_headroom_kw"] for x in toronto) >= -1e-6
