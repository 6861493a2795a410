"""``replay --jobs``: a user's workload replayed with the rolling horizon on real DE-LU data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.domain import Workload
from carbonsched.errors import InputError, WorkloadError
from carbonsched.evaluate.replay import actual_signals
from carbonsched.evaluate.replay_jobs import read_jobs, run_jobs_replay

ADVANCED: list[tuple[int, int]] = []


@pytest.fixture(scope="module")
def result(shared_data, fixtures_dir):
    ADVANCED.clear()
    return run_jobs_replay(fixtures_dir / "rolling_jobs", "global", shared_data,
                           time_limit_s=30.0, mip_gap=0.0,
                           advance=lambda done, total: ADVANCED.append((done, total)))


@pytest.mark.shared_data
def test_rolling_replay_feeds_the_progress_bar_every_run(result):
    n = len(result["runs"])
    assert ADVANCED == [(k, n) for k in range(1, n + 1)] and n >= 2


@pytest.mark.shared_data
def test_fixture_folder_reads_both_files(fixtures_dir):
    wl = read_jobs(fixtures_dir / "rolling_jobs")
    assert sorted(j.id for j in wl.jobs) == ["evening-18", "morning-train", "next-day-3",
                                            "night-1", "tight-2"]


@pytest.mark.shared_data
def test_rolling_replay_scores_every_policy(result, shared_data):
    pol = result["policies"]
    assert set(pol) == {"agnostic", "milp", "oracle", "best-fixed"}
    assert result["jobs"] == 5 and result["horizon_hours"] == 72
    # runs every 24 h from 2023-07-10 00:00 until the last latest start (07-12 15:00)
    assert [r["issued_at"] for r in result["runs"]] == [
        "2023-07-10T00:00:00+00:00", "2023-07-11T00:00:00+00:00", "2023-07-12T00:00:00+00:00"]
    for name, p in pol.items():
        assert p["jobs_placed"] == 5, name
        assert p["deadline_misses"] == 0, name
        # best-fixed ignores capacity (a bound): here its cleanest hours overbook 6 A100s
        assert p["capacity_violations"] == (1 if name == "best-fixed" else 0), name
        assert p["unplaced_it_mwh"] == 0.0
    # energy: 1×2 + 4×6 + 1×1 + 2×3 + 1×4 = 37 GPU-hours at 0.8125 kW
    assert pol["milp"]["work_it_mwh"] == pytest.approx(37 * 0.8125 / 1000, abs=1e-6)
    # the oracle sees every waiting window on actuals: it bounds milp; the capacity-free best
    # fixed start bounds it
    assert pol["best-fixed"]["emissions_kg"] <= pol["oracle"]["emissions_kg"] + 1e-9
    assert pol["oracle"]["emissions_kg"] <= pol["milp"]["emissions_kg"] + 1e-9
    assert pol["milp"]["emissions_kg"] < pol["agnostic"]["emissions_kg"]
    assert pol["agnostic"]["reduction_pct"] == 0.0 and pol["oracle"]["oracle_share"] == 1.0
    # named fallbacks (none needed on this week of complete DE-LU data)
    assert result["filled_signal_hours"] == {"de-frankfurt": 0}
    assert pol["milp"]["time_limited_runs"] == 0 and pol["milp"]["fallback_runs"] == 0


@pytest.mark.shared_data
def test_evening_job_waits_for_tomorrows_cleanest_hours(result, shared_data, fixtures_dir):
    # evening-18 arrives 2023-07-10 18:00, runs 2 h, may start until 07-11 18:00
    site = load_catalog("global").site("de-frankfurt")
    frame, _ = load_site_signals(site, shared_data, pd.Timestamp("2023-05-01T00:00Z"),
                                 pd.Timestamp("2023-07-13T00:00Z"))
    slots = pd.date_range("2023-07-10T18:00Z", "2023-07-11T19:00Z", freq="h", name="slot")
    act = actual_signals(site, frame, slots)
    rate = (act["pue"] * act["carbon_intensity_g_per_kwh"]).to_numpy()
    two_hours = rate[:-1] + rate[1:]                       # start at slots[k], k = 0..24
    best = slots[int(np.argmin(two_hours))]
    assert best.day == 11                                  # the cleanest window is tomorrow's
    # alone (no other job competing for the GPUs), the oracle and the best fixed start both
    # start it there
    wl = read_jobs(fixtures_dir / "rolling_jobs" / "evening.json")
    alone = run_jobs_replay(Workload([j for j in wl.jobs if j.id == "evening-18"], []),
                            "global", shared_data, mip_gap=0.0)
    for p in ("oracle", "best-fixed"):
        assert [pd.Timestamp(x["start"]) for x in alone["placements"][p]] == [best], p
    # milp on forecasts also carries it over into a committed start, not unplaced
    for res in (alone, result):
        milp = {p["job_id"]: p for p in res["placements"]["milp"]}
        assert pd.Timestamp("2023-07-10T18:00Z") <= pd.Timestamp(milp["evening-18"]["start"]) \
            <= pd.Timestamp("2023-07-11T18:00Z")
    run0 = alone["runs"][0]["milp"]
    assert run0.pop("seconds") > 0
    assert run0 == {"committed": 0, "deferred": 1, "ended": 0, "pending": 1,
                    "status": "optimal"}


@pytest.mark.shared_data
def test_rolling_plans_serve_inference_and_score_it(shared_data, fixtures_dir):
    # a workload with inference demand: every rolling run commits the inference hours before
    # the next run, so the rolling policies' scored plans serve it as agnostic's does (before
    # the fix their plans held the jobs only: every demand hour an SLO violation, and its
    # energy and emissions missing — a reduction that was never made)
    from dataclasses import replace

    from carbonsched.domain import InferenceDemand

    cat = load_catalog("global")
    one = replace(cat, sites=[cat.site("de-frankfurt")])
    wl = read_jobs(fixtures_dir / "rolling_jobs" / "evening.json")
    hours = pd.date_range("2023-07-10T00:00Z", periods=48, freq="h")
    demand = [InferenceDemand("frankfurt", h, "A100", 2, 20.0, 0.8125) for h in hours]
    res = run_jobs_replay(Workload([j for j in wl.jobs if j.id == "evening-18"], demand),
                          one, shared_data, policies=("agnostic", "milp", "oracle"),
                          mip_gap=0.0)
    inference_it_mwh = 48 * 2 * 0.8125 / 1000
    job_it_mwh = 2 * 0.8125 / 1000                           # evening-18: 1 A100, 2 h
    for name, p in res["policies"].items():
        # work done covers what the emissions cover: the job and the inference served
        assert p["work_it_mwh"] == pytest.approx(job_it_mwh + inference_it_mwh, abs=1e-9), name
    for name, p in res["policies"].items():
        assert p["slo_violations"] == 0, name
        # facility energy = IT × PUE (PUE in [1, 1.6] at this site): inference included
        assert p["energy_mwh"] > inference_it_mwh + job_it_mwh - 1e-9, name
        assert p["energy_mwh"] < 1.6 * (inference_it_mwh + job_it_mwh), name
    # the forecast error the milp acted on is reported per site
    err = res["forecast_error"]
    assert set(err) == {"committed", "horizon"}
    e = err["committed"]["de-frankfurt"]
    assert e["hours"] == 48 and e["ci_mape_pct"] > 0 and sum(e["models"].values()) == 48
    assert err["horizon"]["de-frankfurt"]["hours"] == 2 * 72


@pytest.mark.shared_data
def test_cli_replay_jobs(shared_data, fixtures_dir, tmp_path):
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["replay", "--jobs", str(fixtures_dir / "rolling_jobs" /
                                                         "evening.json"),
                                 "--out", str(out), "--data-dir", str(shared_data),
                                 "--policies", "agnostic,oracle", "--horizon-hours", "48",
                                 "--run-every-hours", "12"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["horizon_hours"] == 48 and doc["run_every_hours"] == 12
    assert set(doc["policies"]) == {"agnostic", "oracle"}
    assert "Rolling replay of 2 jobs" in r.stdout
    assert "actual signal hours interpolated for scoring: none" in r.stderr
    assert "forecast fallbacks in 0 run-site(s)" in r.stderr


@pytest.mark.shared_data
def test_cli_replay_jobs_at_the_services_six_hour_cadence(shared_data, fixtures_dir, tmp_path):
    """``--every 6h``: runs issued 6 h apart from 00:00 UTC; every policy's time-limited and
    fallback runs are counted and named by issue time (JSON and stderr)."""
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["replay", "--jobs", str(fixtures_dir / "rolling_jobs" /
                                                         "evening.json"),
                                 "--out", str(out), "--data-dir", str(shared_data),
                                 "--policies", "agnostic,milp", "--horizon-hours", "24",
                                 "--every", "6h", "--time-limit", "10"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["run_every_hours"] == 6 and "a run every 6 h" in " ".join(r.stdout.split())
    assert "longest" in r.stdout
    times = [pd.Timestamp(x["issued_at"]) for x in doc["runs"]]
    assert len(times) == doc["runs_count"] > 4
    assert {b - a for a, b in zip(times, times[1:], strict=False)} == {pd.Timedelta(hours=6)}
    assert times[0].hour == 0
    for name, p in doc["policies"].items():
        if name == "milp":   # the longest run, named in the table, is the longest of the runs
            assert p["longest_run_s"] == pytest.approx(
                max(x["milp"]["seconds"] for x in doc["runs"]), abs=1e-3)
            assert 0 < p["longest_run_s"] <= p["seconds"]
        assert len(p["time_limited_run_times"]) == p["time_limited_runs"]
        assert len(p["fallback_run_times"]) == p["fallback_runs"]
        for t in p["time_limited_run_times"] + p["fallback_run_times"]:
            assert t[:19] in r.stderr


def test_replay_cadence_options():
    from carbonsched.cli.app import replay_cadence

    assert replay_cadence(None, None) == 24
    assert replay_cadence("6h", None) == replay_cadence(None, 6) == replay_cadence("6h", 6) == 6
    assert replay_cadence("1h", None) == 1 and replay_cadence("1d", None) == 24
    assert replay_cadence("12 hours", None) == 12 and replay_cadence("24h", None) == 24


@pytest.mark.parametrize(("args", "message"), [
    (["--every", "5h"], "--every = 5 h is not a rolling cadence.*one of 1, 2, 3, 4, 6, 8, 12, "
                        "24; e.g. 4"),
    (["--every", "48h"], "--every = 48 h is not a rolling cadence"),
    (["--every", "six hours"], "--every 'six hours' is not a run cadence; give whole hours"),
    (["--run-every-hours", "7"], "--run-every-hours = 7 h is not a rolling cadence"),
    (["--every", "6h", "--run-every-hours", "12"], "--every 6h and --run-every-hours 12 "
                                                   "disagree"),
    (["--policies", "agnostic,greedy"], "unknown policies.*greedy"),
    (["--horizon-hours", "500"], "outside 1..168 h"),
    (["--horizon-hours", "12"], "shorter than the run interval"),
])
def test_cli_replay_jobs_refuses(shared_data, fixtures_dir, tmp_path, args, message):
    r = CliRunner().invoke(app, ["replay", "--jobs", str(fixtures_dir / "rolling_jobs"),
                                 "--out", str(tmp_path / "r.json"),
                                 "--data-dir", str(shared_data), *args])
    assert r.exit_code == 2
    assert pytest.importorskip("re").search(message, " ".join(r.stderr.split()))


def test_bad_jobs_paths(tmp_path):
    with pytest.raises(WorkloadError, match="no such jobs file or folder"):
        read_jobs(tmp_path / "missing")
    with pytest.raises(WorkloadError, match="no .json or .csv jobs file"):
        read_jobs(tmp_path)
    (tmp_path / "a.json").write_text('{"jobs": [{"id": "x"}]}')
    with pytest.raises(WorkloadError, match="a.json, jobs\\[0\\].*gpu_type"):
        read_jobs(tmp_path)


def test_duplicate_id_across_files(tmp_path, fixtures_dir):
    src = fixtures_dir / "rolling_jobs" / "evening.json"
    (tmp_path / "a.json").write_text(src.read_text())
    (tmp_path / "b.json").write_text(src.read_text())
    with pytest.raises(WorkloadError, match="b.json: job id 'evening-18' is also in"):
        read_jobs(tmp_path)


def test_empty_workload_refused(tmp_path):
    (tmp_path / "a.json").write_text('{"jobs": []}')
    with pytest.raises(InputError, match="no jobs"):
        run_jobs_replay(tmp_path, "global")


def test_unknown_site_refused(tmp_path, fixtures_dir):
    doc = json.loads((fixtures_dir / "rolling_jobs" / "evening.json").read_text())
    doc["jobs"][0]["allowed_sites"] = ["mars-1"]
    (tmp_path / "a.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="mars-1"):
        run_jobs_replay(tmp_path, "global")



@pytest.mark.shared_data
def test_filled_signal_hours_are_named(shared_data, fixtures_dir, tmp_path):
    # a copy of the DE-LU files with three hours of carbon intensity removed on 07-11
    src = shared_data / "sustain-cluster"
    (tmp_path / "sustain-cluster" / "carbon_intensity").mkdir(parents=True)
    (tmp_path / "sustain-cluster" / "weather").mkdir(parents=True)
    lines = (src / "carbon_intensity" / "DE-LU_2023_hourly.csv").read_text().splitlines()
    gone = ("2023-07-11 03:00:00", "2023-07-11 04:00:00", "2023-07-11 05:00:00")
    kept = [ln for ln in lines if not ln.startswith(gone)]
    assert len(kept) == len(lines) - 3
    (tmp_path / "sustain-cluster" / "carbon_intensity" / "DE-LU_2023_hourly.csv").write_text(
        "\n".join(kept) + "\n")
    (tmp_path / "sustain-cluster" / "weather" / "DE-LU_2023.json").write_bytes(
        (src / "weather" / "DE-LU_2023.json").read_bytes())
    res = run_jobs_replay(fixtures_dir / "rolling_jobs" / "evening.json", "global", tmp_path,
                          policies=("agnostic", "oracle"))
    assert res["filled_signal_hours"] == {"de-frankfurt": 3}
    assert any("3 hour(s) of actual carbon intensity missing in the scoring period, "
               "interpolated for scoring" in n for n in res["notes"])
    r = CliRunner().invoke(app, ["replay", "--jobs", str(fixtures_dir / "rolling_jobs" /
                                                         "evening.json"),
                                 "--out", str(tmp_path / "r.json"), "--data-dir", str(tmp_path),
                                 "--policies", "agnostic,oracle"])
    assert r.exit_code == 0, r.output
    assert "actual signal hours interpolated for scoring: de-frankfurt 3" in r.stderr


@pytest.mark.shared_data
def test_each_refit_period_is_fitted_once(shared_data, monkeypatch):
    # runs from Saturday 2023-07-08 to Sunday 07-16: two refit periods (Mondays 07-03 and
    # 07-10). Emptying the model dict every 7 days from the first run (07-15) refitted the
    # 07-10 period a second time.
    from carbonsched.domain import Job
    from carbonsched.forecasts.registry import DEFAULT_SCHEDULE, SelectedForecaster

    fits: list[tuple[str, pd.Timestamp]] = []
    original = SelectedForecaster._fit

    def spy(self, y, X):
        period = DEFAULT_SCHEDULE.period_start(y.index[-1] + pd.Timedelta(hours=1))
        fits.append((self.signal, period))
        return original(self, y, X)

    monkeypatch.setattr(SelectedForecaster, "_fit", spy)
    t0 = pd.Timestamp("2023-07-08", tz="UTC")
    job = Job(id="long-wait", tenant="frankfurt", gpu_type="A100", gpus=1, duration_hours=2,
              power_per_gpu_kw=0.8125, earliest_start=t0,
              deadline=t0 + pd.Timedelta(days=8, hours=20),
              allowed_sites=["de-frankfurt"])
    res = run_jobs_replay(Workload([job], []), "global", shared_data, policies=("milp",),
                          time_limit_s=10.0)
    assert len(res["runs"]) == 9
    assert res["policies"]["milp"]["jobs_placed"] == 1
    periods = [pd.Timestamp("2023-07-03", tz="UTC"), pd.Timestamp("2023-07-10", tz="UTC")]
    for signal in ("carbon_intensity_g_per_kwh", "green_surplus_index", "pue"):
        assert [p for s, p in fits if s == signal] == periods, signal


@pytest.mark.parametrize("args", [["--every", "6h"], ["--run-every-hours", "24"]])
def test_a_cadence_without_jobs_is_refused_not_ignored(tmp_path, args):
    r = CliRunner().invoke(app, ["replay", "--start", "2023-07-15", "--end", "2023-07-15",
                                 "--out", str(tmp_path / "r.json"), *args])
    assert r.exit_code == 2, r.output
    assert "set the rolling cadence of a replay with --jobs" in " ".join(r.output.split())
    assert not (tmp_path / "r.json").exists()


@pytest.mark.shared_data
def test_a_site_the_exogenous_mode_offers_nothing_is_named(shared_data):
    # London: GB has no day-ahead auction price file, so --exogenous day-ahead-price gives its
    # forecasts nothing; the notes say so instead of replaying it as if priced
    from carbonsched.domain import Job

    t0 = pd.Timestamp("2023-07-10", tz="UTC")
    job = Job(id="j", tenant="london", gpu_type="A100", gpus=1, duration_hours=2,
              power_per_gpu_kw=0.8125, earliest_start=t0, deadline=t0 + pd.Timedelta(hours=20),
              allowed_sites=["gb-london"])
    res = run_jobs_replay(Workload([job], []), "global", shared_data, policies=("milp",),
                          time_limit_s=10.0, exogenous="day-ahead-price")
    assert res["exogenous"] == {"mode": "day-ahead-price", "sources": {}}
    assert [n for n in res["notes"] if "offers this site nothing" in n] == [
        "site gb-london: --exogenous day-ahead-price offers this site nothing (no weather file, "
        "or no day-ahead auction for its zone: DE-LU, JP-TK only); forecasts from history"]
    assert res["policies"]["milp"]["jobs_placed"] == 1


def test_exogenous_without_jobs_is_refused_not_ignored(tmp_path):
    r = CliRunner().invoke(app, ["replay", "--start", "2023-07-15", "--end", "2023-07-15",
                                 "--exogenous", "day-ahead-price",
                                 "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 2, r.output
    assert "--exogenous sets what the forecasts of a replay with --jobs read" in \
        " ".join(r.output.split())
    assert not (tmp_path / "r.json").exists()


@pytest.mark.shared_data
def test_replay_cli_passes_exogenous_to_the_rolling_replay(shared_data, fixtures_dir,
                                                            tmp_path):
    out_file = tmp_path / "r.json"
    args = ["replay", "--jobs", str(fixtures_dir / "rolling_jobs"), "--data-dir",
            str(shared_data), "--policies", "agnostic,milp", "--out", str(out_file)]
    r = CliRunner().invoke(app, [*args, "--exogenous", "weather"])
    assert r.exit_code == 2, r.output
    assert "--exogenous must be one of none, reanalysis" in " ".join(r.output.split())
    assert not out_file.exists()
    r = CliRunner().invoke(app, [*args, "--exogenous", "day-ahead-price"])
    assert r.exit_code == 0, r.output
    res = json.loads(out_file.read_text())
    assert res["exogenous"]["mode"] == "day-ahead-price"
    assert list(res["exogenous"]["sources"]) == ["de-frankfurt"]


def test_plan_dispatch_refuses_fairness_it_would_not_use(tmp_path):
    r = CliRunner().invoke(app, ["plan", "--dispatch", "--fairness", "1",
                                 "--out", str(tmp_path / "p.json")])
    assert r.exit_code == 2, r.output
    assert "--grid-events, --power-caps and --fairness plan without --dispatch" in \
        " ".join(r.output.split())


@pytest.mark.shared_data
def test_rolling_replay_reads_day_ahead_prices_where_asked(shared_data, fixtures_dir):
    # --exogenous day-ahead-price: milp's forecasts read DE-LU's day-ahead auction prices; the
    # result and the notes name the source; the plans stay complete and on time
    res = run_jobs_replay(fixtures_dir / "rolling_jobs", "global", shared_data,
                          policies=("agnostic", "milp"), time_limit_s=30.0, mip_gap=0.0,
                          exogenous="day-ahead-price")
    assert res["exogenous"]["mode"] == "day-ahead-price"
    assert list(res["exogenous"]["sources"]) == ["de-frankfurt"]
    assert "EPEX SPOT" in res["exogenous"]["sources"]["de-frankfurt"]
    assert any(n.startswith("site de-frankfurt: exogenous forecasts from DE-LU price file")
               for n in res["notes"])
    assert res["policies"]["milp"]["jobs_placed"] == 5
    assert res["policies"]["milp"]["deadline_misses"] == 0
    with pytest.raises(InputError, match="--exogenous must be one of none, reanalysis"):
        run_jobs_replay(fixtures_dir / "rolling_jobs", "global", shared_data,
                        exogenous="weather")
