"""`carbonsched plan --slot-minutes`: the daily plan on a 15-minute grid, from its JSON."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.workload.files import demo_workload

runner = CliRunner()
Q = pd.Timedelta(minutes=15)


@pytest.fixture(autouse=True)
def _private_store(private_store):
    """Every test here on a store of its own (``tests/conftest.py``)."""


def test_plan_on_a_15_minute_grid_counts_minutes_and_capacity_per_slot(tmp_path):
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--slot-minutes", "15",
                            "--no-store", "--out", str(out)])
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())
    assert plan["slot_minutes"] == 15 and plan["horizon_hours"] == 24
    assert any(n.startswith("slots: a 15-minute grid") for n in plan["notes"])
    assert plan["solver"]["method"] == "milp"
    cat = load_catalog("china-eastdata-westcompute")
    # the power report has one row per site and quarter hour
    rows = {(r["site"], pd.Timestamp(r["hour"])): r for r in plan["site_hours"]}
    assert len(plan["site_hours"]) == 4 * 24 * len(plan["sites"])
    wl = demo_workload(cat, "2026-11-30")
    jobs = {j.id: j for j in wl.jobs}
    assert sorted([p["job_id"] for p in plan["placements"]]
                  + [u["job_id"] for u in plan["unplaced"]]) == sorted(jobs)
    gpus: dict[tuple, int] = defaultdict(int)
    it_kw: dict[tuple, float] = defaultdict(float)
    for p in plan["placements"]:
        j = jobs[p["job_id"]]
        start, end = pd.Timestamp(p["start"]), pd.Timestamp(p["end"])
        assert (start - pd.Timestamp("2026-11-30T00:00:00Z")) % Q == pd.Timedelta(0)
        assert end - start == pd.Timedelta(minutes=j.duration_minutes)
        assert j.earliest_start <= start and end <= j.deadline
        # facility energy from the minutes run in each quarter hour × that slot's PUE
        energy = 0.0
        for t in pd.date_range(start.floor("15min"), end, freq="15min", inclusive="left"):
            run_h = (min(t + Q, end) - max(t, start)) / pd.Timedelta(hours=1)
            energy += j.it_power_kw * run_h * rows[(p["site"], t)]["pue"]
            gpus[(p["site"], t, j.gpu_type)] += j.gpus
            it_kw[(p["site"], t)] += j.it_power_kw
        assert p["energy_kwh"] == pytest.approx(energy, rel=1e-5)
    for i in plan["inference"]:
        d = next(d for d in wl.inference
                 if d.area == i["area"] and d.hour == pd.Timestamp(i["hour"]))
        for k in range(4):       # hourly demand holds in each quarter hour of its hour
            gpus[(i["site"], d.hour + k * Q, d.gpu_type)] += i["gpus"]
            it_kw[(i["site"], d.hour + k * Q)] += i["gpus"] * d.power_per_gpu_kw
    for (sid, _t, g), n in gpus.items():
        assert n <= cat.site(sid).gpu_count(g)
    for (sid, t), kw in it_kw.items():
        assert kw <= cat.site(sid).it_power_cap_kw + 1e-6
        assert rows[(sid, t)]["it_power_kw"] == pytest.approx(kw, abs=1e-6)
    assert plan["totals"]["energy_kwh"] == pytest.approx(
        sum(r["facility_energy_kwh"] for r in plan["site_hours"]), rel=1e-6)


@pytest.mark.parametrize("bad", ["7", "0", "90"])
def test_an_invalid_slot_length_is_refused_before_forecasting(bad):
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2026-11-30", "--slot-minutes", bad])
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert (f"slot length {bad} min is not allowed; choose one of 60, 30, 15 minutes"
            in out)
    assert "forecasting" not in r.output


def test_sub_hour_slots_are_refused_with_dispatch():
    r = runner.invoke(app, ["plan", "--no-store", "--date", "2026-11-30", "--slot-minutes",
                            "15", "--dispatch"])
    assert r.exit_code == 2, r.output
    assert "--slot-minutes 15 is for plan-only runs" in " ".join(r.output.split())


def test_plan_help_names_the_slot_grid():
    r = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert r.exit_code == 0
    assert "--slot-minutes" in r.output and "60 (default), 30 or 15" in r.output
    assert "[min]" in r.output
