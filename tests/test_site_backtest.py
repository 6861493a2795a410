"""Site backtest: the daily forecasting path scored on real files, with no look-ahead."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.errors import InputError, UnknownSiteError
from carbonsched.evaluate.site_backtest import (
    FORECAST_COLUMNS,
    REANALYSIS_CAVEAT,
    run_site_backtest,
)

CI = "carbon_intensity_g_per_kwh"


def _raw_ci(path: Path) -> pd.Series:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    idx = pd.to_datetime([r["Datetime (UTC)"] for r in rows], utc=True)
    return pd.Series([float(r["Carbon Intensity gCO₂eq/kWh (direct)"]) for r in rows], index=idx)


def _poisoned_data_dir(src: Path, dst: Path, zone: str, from_ts: pd.Timestamp) -> Path:
    """A data dir of symlinks to ``src`` in which ``zone``'s 2023 CI from ``from_ts`` is x10."""
    sc = dst / "sustain-cluster"
    sc.mkdir(parents=True)
    for entry in (src / "sustain-cluster").iterdir():
        if entry.name != "carbon_intensity":
            (sc / entry.name).symlink_to(entry)
    ci_dir = sc / "carbon_intensity"
    ci_dir.mkdir()
    for f in (src / "sustain-cluster" / "carbon_intensity").iterdir():
        if f.name != f"{zone}_2023_hourly.csv":
            (ci_dir / f.name).symlink_to(f)
    with open(src / "sustain-cluster" / "carbon_intensity" / f"{zone}_2023_hourly.csv",
              newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    col = header.index("Carbon Intensity gCO₂eq/kWh (direct)")
    for r in rows:
        if pd.Timestamp(r[0], tz="UTC") >= from_ts:
            r[col] = str(10 * float(r[col]))
    with open(ci_dir / f"{zone}_2023_hourly.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return dst


@pytest.fixture(scope="module")
def toronto(shared_data):
    return run_site_backtest("global", shared_data, "2023-07-14", "2023-07-15",
                             sites=["ca-on-toronto"])


@pytest.mark.shared_data
def test_scores_recomputed_from_the_raw_file(toronto, shared_data):
    res, fc = toronto
    assert (res["from"], res["to"], res["days"]) == ("2023-07-14", "2023-07-15", 2)
    assert set(fc.columns) >= set(FORECAST_COLUMNS) | {"actual"}
    chosen = fc[(fc["signal"] == CI) & fc["chosen"]]
    # both days lie in the refit period from Monday 07-10: one model, chosen on validation
    from carbonsched.forecasts.registry import registry

    assert len(chosen) == 48 and chosen["model"].nunique() == 1
    model = chosen["model"].iloc[0]
    names = {c.name for c in registry(CI)}
    assert model in names or set(model[4:-1].split("+")) <= names
    assert res["sites"]["ca-on-toronto"][CI]["models"] == {model: 48}
    assert (pd.to_datetime(chosen["issued_at"], utc=True).dt.hour == 0).all()
    # the actuals are the provider's file values, hour by hour (CA-ON has no gap in July 2023)
    raw = _raw_ci(shared_data / "sustain-cluster" / "carbon_intensity" / "CA-ON_2023_hourly.csv")
    ts = pd.to_datetime(chosen["ts"], utc=True)
    np.testing.assert_allclose(chosen["actual"].to_numpy(), raw.reindex(ts).to_numpy())
    mape = 100 * np.mean(np.abs(chosen["mean"].to_numpy() - raw.reindex(ts).to_numpy())
                         / raw.reindex(ts).to_numpy())
    naive = raw.reindex(ts - pd.Timedelta(days=1)).to_numpy()
    naive_mape = 100 * np.mean(np.abs(naive - raw.reindex(ts).to_numpy())
                               / raw.reindex(ts).to_numpy())
    r = res["sites"]["ca-on-toronto"][CI]
    assert r["hours"] == 48
    assert r["mape_pct"] == pytest.approx(mape, rel=1e-9)
    assert r["naive_mape_pct"] == pytest.approx(naive_mape, rel=1e-9)
    assert r["skill"] == pytest.approx(1 - mape / naive_mape, rel=1e-9)
    inside = ((chosen["actual"] >= chosen["lo_80"]) & (chosen["actual"] <= chosen["hi_80"]))
    assert r["coverage_80"] == pytest.approx(inside.mean())
    # intervals are monotone and contain the point forecast, for every signal
    for f in (fc[fc["chosen"]],):
        assert (f["lo_95"] <= f["lo_80"] + 1e-9).all() and (f["lo_80"] <= f["mean"] + 1e-9).all()
        assert (f["mean"] <= f["hi_80"] + 1e-9).all() and (f["hi_80"] <= f["hi_95"] + 1e-9).all()
    assert set(res["sites"]["ca-on-toronto"]) == {CI, "green_surplus_index", "pue"}


@pytest.mark.shared_data
def test_no_data_at_or_after_the_issue_time_is_used(shared_data, tmp_path):
    # CA-ON's carbon intensity from 2023-07-15 00:00 UTC on multiplied by 10: the forecast
    # issued then is unchanged (only the actuals it is scored on change); one hour earlier
    # (2023-07-14 23:00) poisoned instead changes it.
    # the same refit schedule for every run (models are fitted at the first day of a chunk)
    day = pd.Timestamp("2023-07-15T00:00Z")
    _, clean = run_site_backtest("global", shared_data, "2023-07-15", "2023-07-15",
                                 sites=["ca-on-toronto"])
    poisoned = _poisoned_data_dir(shared_data, tmp_path / "future", "CA-ON", day)
    _, fc = run_site_backtest("global", poisoned, "2023-07-15", "2023-07-15",
                              sites=["ca-on-toronto"])

    def issued(f: pd.DataFrame) -> pd.DataFrame:
        f = f[(f["signal"] == CI) & f["chosen"]]
        return f[pd.to_datetime(f["issued_at"], utc=True) == day].reset_index(drop=True)

    a, b = issued(clean), issued(fc)
    np.testing.assert_allclose(b["mean"], a["mean"], rtol=1e-12)
    np.testing.assert_allclose(b["hi_95"], a["hi_95"], rtol=1e-12)
    np.testing.assert_allclose(b["actual"], 10 * a["actual"], rtol=1e-9)
    past = _poisoned_data_dir(shared_data, tmp_path / "past", "CA-ON",
                              day - pd.Timedelta(hours=1))
    _, fc2 = run_site_backtest("global", past, "2023-07-15", "2023-07-15",
                               sites=["ca-on-toronto"])
    assert not np.allclose(issued(fc2)["mean"], a["mean"])


@pytest.mark.shared_data
@pytest.mark.parametrize(("kw", "error", "message"), [
    ({"start": "2023-07-02", "end": "2023-07-01"}, InputError,
     r"--to 2023-07-01 is before --from 2023-07-02"),
    ({"sites": ["xx-nowhere"]}, UnknownSiteError, r"xx-nowhere"),
    ({"catalog": "china-eastdata-westcompute", "sites": None}, InputError,
     r"catalog china-eastdata-westcompute has modelled signals"),
    ({"executor": "spark"}, InputError, r"unknown executor 'spark'"),
    ({"horizon_hours": 0}, InputError, r"--horizon must be 1..168 hours"),
    ({"horizon_hours": 169}, InputError, r"--horizon must be 1..168 hours"),
    ({"exogenous": "gfs"}, InputError,
     r"--exogenous must be one of none, reanalysis, day-ahead-price, "
     r"reanalysis\+day-ahead-price, got 'gfs'"),
])
def test_bad_input_is_refused(shared_data, kw, error, message):
    args = {"catalog": "global", "data_dir": shared_data, "start": "2023-07-01",
            "end": "2023-07-01", "sites": ["ca-on-toronto"], **kw}
    with pytest.raises(error, match=message):
        run_site_backtest(**args)


@pytest.mark.shared_data
def test_cli_writes_results_and_forecasts(shared_data, tmp_path):
    out, csv_out = tmp_path / "r.json", tmp_path / "f.csv"
    r = CliRunner().invoke(app, ["backtest", "--dataset", "sites", "--catalog", "global",
                                 "--data-dir", str(shared_data), "--from", "2023-07-15",
                                 "--to", "2023-07-15", "--sites", "gb-london",
                                 "--out", str(out), "--forecasts-out", str(csv_out)])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert list(res["sites"]) == ["gb-london"]
    assert "gb-london" in r.output and "mean skill vs seasonal naive" in r.output
    f = pd.read_csv(csv_out)
    assert list(f.columns) == list(FORECAST_COLUMNS)
    assert len(f[f["chosen"]]) == 3 * 24 and len(f[~f["chosen"]]) == 3 * 24
    assert f["ts"].str.endswith("Z").all()
    r = CliRunner().invoke(app, ["backtest", "--dataset", "sites", "--out", str(out)])
    assert r.exit_code == 2 and "--dataset sites needs --from and --to" in r.output


@pytest.mark.shared_data
def test_scores_by_lead_bucket_to_96_hours(shared_data):
    # two issues 96 h ahead in Frankfurt: every bucket recomputed from the hourly forecasts,
    # the naive repeating the last observed day at every lead; 168 h is the longest accepted
    from carbonsched.forecasts.decision import start_regret

    res, fc = run_site_backtest("global", shared_data, "2023-07-13", "2023-07-14",
                                sites=["de-frankfurt"], horizon_hours=96)
    assert res["horizon_hours"] == 96
    by = res["sites"]["de-frankfurt"][CI]["by_lead"]
    assert list(by) == ["0-24h", "24-48h", "48-72h", "72-96h"]
    f = fc[fc["signal"] == CI].copy()
    f["lead"] = ((pd.to_datetime(f["ts"], utc=True) - pd.to_datetime(f["issued_at"], utc=True))
                 // pd.Timedelta(hours=1))
    ch, nv = f[f["chosen"]], f[~f["chosen"]]
    assert len(ch) == 2 * 96 and len(nv) == 2 * 96
    # the naive of lead k is the actual of the same hour on the day before the issue
    for _, g in nv.groupby("issued_at"):
        m = g.sort_values("lead")["mean"].to_numpy()
        np.testing.assert_allclose(m[24:], np.tile(m[:24], 3))
    for a in (0, 24, 48, 72):
        c = ch[(ch["lead"] >= a) & (ch["lead"] < a + 24)]
        n = nv[(nv["lead"] >= a) & (nv["lead"] < a + 24)]
        mape = 100 * np.mean(np.abs(c["mean"] - c["actual"]) / c["actual"])
        naive = 100 * np.mean(np.abs(n["mean"] - n["actual"]) / n["actual"])
        b = by[f"{a}-{a + 24}h"]
        assert b["hours"] == 48
        assert b["mape_pct"] == pytest.approx(mape, rel=1e-9)
        assert b["skill"] == pytest.approx(1 - mape / naive, rel=1e-9)
        inside = (c["actual"] >= c["lo_95"] - 1e-9) & (c["actual"] <= c["hi_95"] + 1e-9)
        assert b["coverage_95"] == pytest.approx(inside.mean())
        piv = c.pivot(index="issued_at", columns="lead", values="mean")
        fm = ch.pivot(index="issued_at", columns="lead", values="mean").to_numpy()
        act = ch.pivot(index="issued_at", columns="lead", values="actual").to_numpy()
        excess, ideal = start_regret(fm, act, arrivals=range(a, min(a + 24, 94)))
        assert len(piv) == 2
        assert b["start_regret_pct"] == pytest.approx(100 * excess / ideal, rel=1e-9)
    assert res["mean_skill_by_lead"][CI]["72-96h"] == pytest.approx(by["72-96h"]["skill"])


@pytest.fixture(scope="module")
def london(shared_data):
    return run_site_backtest("global", shared_data, "2023-07-14", "2023-07-15",
                             sites=["gb-london"])


@pytest.mark.shared_data
def test_green_surplus_brier_skill_recomputed_from_the_hourly_forecasts(london):
    # issue 35 item 5: "surplus hour" (index > 0) scored by the Brier score; the forecast's
    # calibrated probability (p_surplus, fitted on the choice's validation window), naive says
    # yes/no from the day before
    from carbonsched.evaluate.site_backtest import surplus_probability

    res, fc = london
    f = fc[fc["signal"] == "green_surplus_index"]
    ch = f[f["chosen"]].sort_values(["issued_at", "ts"])
    nv = f[~f["chosen"]].sort_values(["issued_at", "ts"])
    event = (ch["actual"].to_numpy() > 1e-9).astype(float)
    p = surplus_probability(ch)
    assert ((p >= 0) & (p <= 1)).all()
    assert ch["p_surplus"].notna().all() and nv["p_surplus"].isna().all()
    np.testing.assert_array_equal(p, ch["p_surplus"].to_numpy(float))
    bs = np.mean((p - event) ** 2)
    bn = np.mean(((nv["mean"].to_numpy() > 1e-9).astype(float) - event) ** 2)
    b = res["sites"]["gb-london"]["green_surplus_index"]["surplus_brier"]
    assert b["hours"] == 48 and b["surplus_hours"] == int(event.sum()) > 0
    assert b["brier"] == pytest.approx(bs) and b["naive_brier"] == pytest.approx(bn)
    assert b["brier_skill"] == pytest.approx(1 - bs / bn)
    assert res["surplus_brier_skill"] == {"gb-london": pytest.approx(1 - bs / bn)}


def test_surplus_probability_reads_the_mass_at_zero():
    f = pd.DataFrame({"lo_95": [0.0, 0.0, 0.0, 0.1, np.nan, np.nan],
                      "lo_80": [0.0, 0.0, 0.05, 0.2, np.nan, np.nan],
                      "mean": [0.0, 0.1, 0.1, 0.3, 0.0, 0.2],
                      "hi_80": [0.0, 0.2, 0.2, 0.4, np.nan, np.nan],
                      "hi_95": [0.0, 0.3, 0.3, 0.5, np.nan, np.nan]})
    from carbonsched.evaluate.site_backtest import surplus_probability

    np.testing.assert_allclose(surplus_probability(f), [0.025, 0.9, 0.975, 1.0, 0.0, 1.0])


@pytest.mark.shared_data
def test_naive_kept_for_surplus_or_pue_is_said_in_the_notes(london):
    # issue 35 item 5: where no model beats naive on the hours off the bounds, the plan says
    # so (a "forecast fallback" note naming the best model and both errors) and uses naive
    res, fc = london
    gs = res["sites"]["gb-london"]["green_surplus_index"]
    notes = [n for n in res["notes"] if "green surplus: no model beat seasonal naive" in n]
    if gs["models"] == {"seasonal-naive-24h": 48}:
        assert len(notes) == 2  # one per issue
        assert "used seasonal naive" in notes[0] and "; the closest other model, " in notes[0]
        assert "surplus index strictly between 0 and 1" in notes[0]
    else:
        assert notes == []
    assert gs["models"] == {"seasonal-naive-24h": 48}  # London, July 2023: naive kept


@pytest.mark.shared_data
def test_reanalysis_exogenous_is_stated_with_its_caveat(shared_data):
    # --exogenous reanalysis: the site's weather file as if forecast 24 h ahead; the caveat is
    # in the results and in the notes of every issue, and the PUE candidate on it is offered
    res, fc = run_site_backtest("global", shared_data, "2023-07-14", "2023-07-14",
                                sites=["de-frankfurt"], exogenous="reanalysis")
    assert res["exogenous"] == {"mode": "reanalysis", "caveat": REANALYSIS_CAVEAT,
                                "day_ahead_price_zones": []}
    notes = [n for n in res["notes"] if REANALYSIS_CAVEAT in n]
    assert notes == ["2023-07-14: de-frankfurt: exogenous forecasts from site weather file: "
                     + REANALYSIS_CAVEAT]
    pue = fc[(fc["signal"] == "pue") & fc["chosen"]]
    assert set(pue["model"]) == {"published-pue"}  # July 2023: the weather-driven PUE chosen


@pytest.mark.parametrize(("naive_err", "said"), [
    (0.0, False),       # the signal never left its bounds on the validation hours: nothing to say
    (1e-9, True),       # just above: naive was wrong somewhere and no model beat it
    (float("nan"), False),
])
def test_naive_kept_note_only_when_there_was_something_to_forecast(naive_err, said):
    from types import SimpleNamespace

    from carbonsched.forecasts.registry import NAIVE as NAIVE_MODEL
    from carbonsched.pipeline.daily import naive_kept_note

    model = SimpleNamespace(
        signal="green_surplus_index", chosen_=NAIVE_MODEL,
        describe=lambda: {"candidates": {NAIVE_MODEL: naive_err, "climatology-28d": 0.5},
                          "metric": "mae", "naive_validation_error": naive_err})
    note = naive_kept_note(model)
    assert (note is not None) == said
    if said:
        # before, "(best: climatology-28d, MAE 0.5 against naive's 1e-09)": a "best" with the
        # higher error read as a contradiction
        assert note == ("no model beat seasonal naive by 5 % on the validation hours with the "
                        f"surplus index strictly between 0 and 1 (naive's MAE {naive_err:.2g}; "
                        "the closest other model, climatology-28d, 0.5); used seasonal naive")


def test_surplus_probability_prefers_the_calibrated_column():
    from carbonsched.evaluate.site_backtest import surplus_probability

    f = pd.DataFrame({"lo_95": [0.0, 0.0], "lo_80": [0.0, 0.0], "mean": [0.1, 0.1],
                      "hi_80": [0.2, 0.2], "hi_95": [0.3, 0.3], "p_surplus": [0.12, np.nan]})
    # the row with a calibrated probability uses it; the other is read from its quantiles
    np.testing.assert_allclose(surplus_probability(f), [0.12, 1 - 0.10])


@pytest.mark.shared_data
def test_day_ahead_prices_are_offered_only_where_a_day_ahead_auction_sets_them(shared_data):
    # Frankfurt (DE-LU, EPEX day-ahead) gets its zone's prices as a feature; Toronto (Ontario's
    # real-time HOEP) and London (no price file) get none, and the results say which zones had it
    from carbonsched.evaluate.site_backtest import site_exogenous

    res, fc = run_site_backtest("global", shared_data, "2023-07-10", "2023-07-10",
                                sites=["de-frankfurt", "ca-on-toronto"],
                                exogenous="reanalysis+day-ahead-price")
    assert res["exogenous"]["day_ahead_price_zones"] == ["DE-LU"]
    cat = load_catalog("global")
    for sid, priced in (("de-frankfurt", True), ("ca-on-toronto", False), ("gb-london", False)):
        site = cat.site(sid)
        frame, _ = load_site_signals(site, shared_data, pd.Timestamp("2023-07-01", tz="UTC"),
                                     pd.Timestamp("2023-07-03", tz="UTC"))
        only_price = site_exogenous(frame, "day-ahead-price", site.zone)
        both = site_exogenous(frame, "reanalysis+day-ahead-price", site.zone)
        assert (only_price is not None) is priced
        feats = set(both["feature"])
        assert ("day_ahead_price_usd_per_mwh" in feats) is priced
        assert {"temperature_c", "relative_humidity_pct"} <= feats
        assert ("EPEX SPOT" in both.attrs["source"]) is priced
        assert both.attrs["caveat"] == REANALYSIS_CAVEAT
