"""Replay: plan on forecasts, score on the actual grid (two real days of the global catalog)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import InputError
from carbonsched.evaluate.replay import (
    DEFAULT_REPLAY_DAYS,
    ORACLE_LABEL,
    actual_signals,
    daily_plot_frames,
    plot_daily,
    replay_figure,
    replay_period,
    run_replay,
    substitution_notes,
)
from carbonsched.timeaxis import hourly_slots

ADVANCED: list[tuple[int, int]] = []


@pytest.fixture(scope="module")
def two_days(shared_data):
    # a third of each day's trace jobs: small enough to solve to a 0.1 % gap in seconds
    ADVANCED.clear()
    return run_replay("global", shared_data, "2023-07-02", "2023-07-03", seed=0,
                      time_limit_s=60.0, chunk_days=1, workload_scale=0.3,
                      advance=lambda done, total: ADVANCED.append((done, total)))


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_policies_are_valid_and_ordered(two_days):
    pol = two_days["policies"]
    assert set(pol) == {"agnostic", "greedy", "milp", "oracle"}
    assert two_days["days"] == 2 and [d["date"] for d in two_days["daily"]] == [
        "2023-07-02", "2023-07-03"]
    for p in pol.values():
        assert p["capacity_violations"] == 0
        assert p["slo_violations"] == 0
        assert p["power_cap_violations"] == 0
        assert p["gang_violations"] == 0
        assert p["deadline_misses"] == 0
        assert p["fallback_days"] == 0
    # perfect foresight is the bound (to within the oracle's proven MIP gap, 0.1 %);
    # the planner beats the carbon-unaware baseline
    tol = 1e-3 * pol["oracle"]["emissions_kg"]
    assert pol["oracle"]["emissions_kg"] <= pol["milp"]["emissions_kg"] + tol
    assert pol["oracle"]["emissions_kg"] <= pol["greedy"]["emissions_kg"] + tol
    assert pol["milp"]["emissions_kg"] < pol["agnostic"]["emissions_kg"]
    assert pol["agnostic"]["reduction_pct"] == 0.0 and pol["oracle"]["oracle_share"] == 1.0
    a, m = pol["agnostic"]["emissions_kg"], pol["milp"]["emissions_kg"]
    assert pol["milp"]["reduction_pct"] == pytest.approx(100 * (a - m) / a, abs=1e-2)
    daily_total = sum(d["milp"] for d in two_days["daily"])
    assert daily_total == pytest.approx(m, abs=0.01)
    # on equal terms: work done, unplaced work priced at the dirtiest hour, margins per MWh
    for name, p in pol.items():
        assert p["work_it_mwh"] > 0
        assert p["kg_per_mwh_work"] == pytest.approx(p["emissions_kg"] / p["work_it_mwh"],
                                                     rel=1e-3)
        assert p["emissions_with_unplaced_kg"] == pytest.approx(
            p["emissions_kg"] + p["unplaced_priced_kg"], abs=2e-3)
        assert (p["unplaced_it_mwh"] == 0) == (p["unplaced_priced_kg"] == 0), name
        assert sum(d[f"{name}_work_mwh"] for d in two_days["daily"]) == pytest.approx(
            p["work_it_mwh"], abs=1e-3)
    # every policy faces the same work: placed + unplaced is the same total
    totals = {n: p["work_it_mwh"] + p["unplaced_it_mwh"] for n, p in pol.items()}
    assert max(totals.values()) - min(totals.values()) < 1e-3
    margin = two_days["margins"]["milp_vs_agnostic_kg_per_mwh"]
    assert margin["days"] == 2 and margin["ci95_lo"] <= margin["mean"] <= margin["ci95_hi"]
    per_day = [d["agnostic"] / d["agnostic_work_mwh"] - d["milp"] / d["milp_work_mwh"]
               for d in two_days["daily"]]
    assert margin["mean"] == pytest.approx(sum(per_day) / 2, abs=2e-3)
    assert margin["mean"] > 0
    # the forecast error the plans acted on, per site (issue 12 item 5)
    fe = two_days["forecast_error"]
    assert len(fe) == 8
    for sid, e in fe.items():
        assert e["hours"] == 48 and sum(e["models"].values()) == 48, sid
        assert 0 < e["ci_mape_pct"] < 100 and e["ci_mae_g_per_kwh"] > 0, sid


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_plot(two_days, tmp_path):
    png = tmp_path / "daily.png"
    plot_daily(two_days, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_plot_draws_unplaced_work_and_the_oracle_as_a_bound(two_days):
    em, un = daily_plot_frames(two_days)
    assert list(em.columns) == ["agnostic", "greedy", "milp", "oracle"]
    for d in two_days["daily"]:
        day = pd.Timestamp(d["date"])
        for p in em.columns:
            # emissions with the unplaced work priced at the day's dirtiest site-hour [t]
            assert em.loc[day, p] == pytest.approx(
                (d[p] + d[f"{p}_unplaced_priced_kg"]) / 1000.0, abs=1e-9)
            assert un.loc[day, p] == pytest.approx(d[f"{p}_unplaced_gpu_hours"], abs=1e-9)
    # the table's totals are the days' sums
    for p in em.columns:
        assert un[p].sum() == pytest.approx(two_days["policies"][p]["unplaced_gpu_hours"],
                                            abs=0.1)
        assert sum(d[f"{p}_unplaced_jobs"] for d in two_days["daily"]) == (
            two_days["policies"][p]["unplaced_jobs"])
    fig = replay_figure(two_days)
    ax, ax_u = fig.axes[:2]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    oracle = lines[ORACLE_LABEL]
    assert oracle.get_linestyle() == "--"
    np.testing.assert_allclose(oracle.get_ydata(), em["oracle"].to_numpy(), atol=1e-9)
    assert {"agnostic", "greedy", "milp"} <= set(lines)
    heights = sorted(round(b.get_height(), 6) for b in ax_u.patches)
    assert heights == sorted(round(v, 6) for v in un.to_numpy().ravel())
    assert "unplaced" in ax_u.get_ylabel()
    # dates on the axis, not raw ISO timestamps
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax_u.get_xticklabels() if t.get_text()]
    assert ticks and not any("T" in t or "00:00" in t for t in ticks), ticks


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_table_has_unplaced_work_and_names_the_oracle_a_bound(two_days):
    from rich.console import Console

    from carbonsched.cli.replay import trace_replay_table

    con = Console(record=True, width=400)
    con.print(trace_replay_table(two_days))
    text = con.export_text()
    for head in ("unplaced jobs", "unplaced GPU-h", "kg CO2e incl. unplaced",
                 "reduction % incl. unplaced"):
        assert head in text
    assert ORACLE_LABEL in text
    for name, p in two_days["policies"].items():
        row = next(ln for ln in text.splitlines()
                   if (ORACLE_LABEL if name == "oracle" else f" {name} ") in ln)
        assert f"{p['unplaced_gpu_hours']:,.1f}" in row
        assert f"{p['emissions_with_unplaced_kg']:,.0f}" in row


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_feeds_the_progress_bar_every_chunk(two_days):
    assert ADVANCED == [(0, 2), (1, 2), (2, 2)]


def test_replay_period_defaults_to_a_week_never_a_year():
    d0, d1 = replay_period("2023-01-01", None)
    assert (d0, d1) == (pd.Timestamp("2023-01-01", tz="UTC"), pd.Timestamp("2023-01-07", tz="UTC"))
    assert DEFAULT_REPLAY_DAYS == 7
    # at the limit: one day; known-bad: the end before the start
    assert replay_period("2023-07-01", "2023-07-01")[1] == pd.Timestamp("2023-07-01", tz="UTC")
    with pytest.raises(InputError, match="--end 2023-06-30 is before --start 2023-07-01"):
        replay_period("2023-07-01", "2023-06-30")


def test_cli_replay_without_end_says_it_replays_a_week(tmp_path):
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    r = CliRunner().invoke(app, ["replay", "--out", str(tmp_path / "r.json"), "--catalog",
                                 "china-eastdata-westcompute", "--start", "2023-03-01"])
    assert "replaying 7 days from 2023-03-01" in r.output
    assert r.exit_code == 2 and "modelled signals" in r.output  # refused: no measured data


def test_progress_bar_draws_on_a_terminal_and_stays_quiet_off_one():
    import io

    from rich.console import Console

    from carbonsched.cli.replay import replay_progress

    tty = Console(file=io.StringIO(), force_terminal=True, width=120)
    with replay_progress(tty) as advance:
        advance(0, 7)
        advance(3, 7)
    assert "3/7" in tty.file.getvalue() and "days" in tty.file.getvalue()
    pipe = Console(file=io.StringIO(), force_terminal=False, width=120)
    with replay_progress(pipe) as advance:
        advance(3, 7)
    assert pipe.file.getvalue() == ""


@pytest.mark.parametrize(("kw", "message"), [
    ({"policies": ("agnostic", "clairvoyant")}, "unknown policies.*clairvoyant"),
    ({"start": "2023-07-03", "end": "2023-07-01"}, "before --start"),
    ({"catalog": "china-eastdata-westcompute"}, "modelled signals"),
])
def test_replay_bad_input(kw, message, shared_data):
    args = {"catalog": "global", "data_dir": shared_data, "start": "2023-07-01",
            "end": "2023-07-01"} | kw
    with pytest.raises(InputError, match=message):
        run_replay(**args)


def test_actual_signals_fills_gaps_by_interpolation_and_counts_them():
    site = load_catalog("global").site("ca-on-toronto")
    slots = hourly_slots(pd.Timestamp("2023-07-15", tz="UTC"), 24)
    ci = pd.Series(np.arange(24, dtype=float) * 10.0, index=slots)
    ci.iloc[[5, 6, 23]] = np.nan
    frame = pd.DataFrame({"carbon_intensity_g_per_kwh": ci, "renewable_pct": 40.0,
                          "price_usd_per_mwh": 30.0, "temperature_c": 10.0,
                          "relative_humidity_pct": 50.0}, index=slots)
    out = actual_signals(site, frame, slots)
    assert out.attrs["filled_hours"] == 3
    # linear inside the day, nearest at its end
    assert out["carbon_intensity_g_per_kwh"].iloc[[5, 6, 23]].tolist() == [50.0, 60.0, 220.0]
    # complete weather and surplus data: nothing substituted (the limit)
    assert (out.attrs["pue_floor_hours"], out.attrs["surplus_unknown_hours"]) == (0, 0)
    # one hour of weather missing: the day at the PUE floor, counted for the notes (before:
    # substituted without a count); and a surplus hour without data counted as unknown
    gappy = frame.copy()
    gappy.loc[slots[3], "temperature_c"] = np.nan
    gappy["green_surplus_index"] = 0.5
    gappy.loc[slots[[1, 2]], "green_surplus_index"] = np.nan
    g = actual_signals(site, gappy, slots)
    assert g.attrs["pue_floor_hours"] == 24 and (g["pue"] == site.pue.pue_min).all()
    assert site.green_surplus_max_kw > 0 and g.attrs["surplus_unknown_hours"] == 2
    assert substitution_notes(g, "d: site x", "the day") == [
        "d: site x: actual weather incomplete, every hour of the day scored at the PUE model's "
        "floor (pue_min)", "d: site x: 2 hour(s) of actual green surplus unknown, scored as none"]
    assert substitution_notes(out, "d: site x", "the day") == []
    frame["carbon_intensity_g_per_kwh"] = np.nan
    with pytest.raises(InputError, match="ca-on-toronto: no actual carbon intensity on "
                                         "2023-07-15T00:00:00"):
        actual_signals(site, frame, slots)


def test_unplaced_work_is_priced_at_the_dirtiest_site_hour():
    from plan.builders import JobWrapper, SiteWrapper, problem

    from carbonsched.evaluate.replay import dirtiest_kg_per_kwh, work_split_kwh
    from carbonsched.plan import agnostic_plan

    # site a: 2 GPUs. j1 (2 GPUs x 1 kW x 2 h = 4 kWh) fits, j2 (2 GPUs x 1 h, same window
    # [0, 2)) does not: 2 kWh unplaced. Dirtiest site-hour: PUE 1.5 x 400 g = 0.6 kg/kWh.
    sites = [SiteWrapper("a").gpus("H100", 2).obj()]
    jobs = [JobWrapper("j1").gpus(2).hours(2).window(0, 2).obj(),
            JobWrapper("j2").gpus(2).hours(1).window(0, 2).obj()]
    prob = problem(sites, jobs, 3, ci={"a": [100.0, 400.0, 50.0]}, pue={"a": 1.5})
    plan = agnostic_plan(prob)
    assert [p.job_id for p in plan.placements] == ["j1"]
    assert work_split_kwh(prob, plan) == (4.0, 2.0)
    assert dirtiest_kg_per_kwh(prob.signals) == pytest.approx(0.6)


def test_forecast_error_tally_by_hand():
    from carbonsched.evaluate.replay import (
        forecast_error_summary,
        merge_forecast_error,
        tally_forecast_error,
    )

    idx = pd.date_range("2023-07-01T00:00Z", periods=4, freq="h")
    fc = pd.Series([110.0, 90.0, 5.0, 50.0], index=idx)
    # hour 2 has a zero actual (in the MAE, not the MAPE); hour 3 none at all (skipped)
    act = pd.Series([100.0, 100.0, 0.0], index=idx[:3])
    a: dict = {}
    tally_forecast_error(a, "x", fc, act, "ols_hourly")
    b: dict = {}
    tally_forecast_error(b, "x", fc.iloc[:1], act, "seasonal-naive-24h")
    merge_forecast_error(a, b)
    s = forecast_error_summary(a)["x"]
    # APE 10 %, 10 %, 10 %  over 3 hours; |err| 10, 10, 5, 10 over 4 hours
    assert s["ci_mape_pct"] == pytest.approx(10.0)
    assert s["ci_mae_g_per_kwh"] == pytest.approx(35 / 4)
    assert s["hours"] == 4
    assert s["models"] == {"ols_hourly": 3, "seasonal-naive-24h": 1}
    assert forecast_error_summary({"y": {"hours": 0, "abs_err_sum": 0.0, "ape_hours": 0,
                                         "ape_sum": 0.0, "models": {}}})["y"]["ci_mape_pct"] \
        is None
