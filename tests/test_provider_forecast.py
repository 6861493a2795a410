"""``backtest --dataset sites --against FILE``: a published forecast scored next to the product's
(issue 35 item 6)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.errors import DataFormatError
from carbonsched.evaluate.provider_forecast import read_provider_forecast, score_against
from carbonsched.evaluate.site_backtest import run_site_backtest

CI = "carbon_intensity_g_per_kwh"
HEADER = "site,issued_at,ts,carbon_intensity_g_per_kwh\n"


@pytest.fixture(scope="module")
def global_catalog():
    return load_catalog("global")


def _write(tmp_path, text):
    p = tmp_path / "provider.csv"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("text", "line", "needle"), [
    ("site,issued_at,ts\n", 1, "missing column(s) carbon_intensity_g_per_kwh"),
    ("issued_at,ts,carbon_intensity_g_per_kwh\n", 1, "missing column(s) site (or zone)"),
    (HEADER + "gb-london,2023-07-14T00:00:00Z,2023-07-14T01:00:00Z,200\n"
     "gb-london,2023-07-14T00:00:00Z,2023-07-14T02:00:00Z,abc\n", 3,
     "column 'carbon_intensity_g_per_kwh': 'abc' is not a number"),
    (HEADER + "gb-london,2023-07-14T00:00:00Z,2023-07-14T01:00:00Z,-0.5\n", 2, ">= 0"),
    (HEADER + "gb-london,2023-07-14 00:00,2023-07-14T01:00:00Z,200\n", 2,
     "column 'issued_at': '2023-07-14 00:00' has no UTC offset"),
    (HEADER + "gb-london,2023-07-14T00:00:00Z,yesterday,200\n", 2,
     "column 'ts': 'yesterday' is not an ISO 8601 time"),
    (HEADER + "gb-london,2023-07-14T00:00:00Z,2023-07-14T01:30:00Z,200\n", 2, "not on the hour"),
    (HEADER + "gb-london,2023-07-14T05:00:00Z,2023-07-14T04:00:00Z,200\n", 2,
     "before the row's issued_at"),
    (HEADER + "gb-paris,2023-07-14T00:00:00Z,2023-07-14T01:00:00Z,200\n", 2,
     "column 'site': 'gb-paris' is not a site of catalog global"),
    ("zone,issued_at,ts,carbon_intensity_g_per_kwh\nXX,2023-07-14T00:00:00Z,"
     "2023-07-14T01:00:00Z,200\n", 2, "column 'zone': 'XX' is not the zone"),
    (HEADER + "gb-london,2023-07-14T00:00:00Z,2023-07-14T01:00:00Z,200\n"
     "gb-london,2023-07-14T00:00:00+00:00,2023-07-14T01:00:00Z,210\n", 3, "repeats line 2"),
    (HEADER, 2, "no forecast rows"),
])
def test_bad_file_names_line_and_column(tmp_path, global_catalog, text, line, needle):
    with pytest.raises(DataFormatError) as ei:
        read_provider_forecast(_write(tmp_path, text), global_catalog)
    assert ei.value.row == line
    assert needle in str(ei.value) and f"line {line}" in str(ei.value)


def test_missing_file_is_named(tmp_path, global_catalog):
    with pytest.raises(DataFormatError, match="cannot open the --against file"):
        read_provider_forecast(tmp_path / "nope.csv", global_catalog)


def test_just_at_the_limits_is_read(tmp_path, global_catalog):
    # a value of 0 and a forecast for the hour of its own issue are accepted; a zone row
    # lands on every site of that zone; times in another offset become UTC
    text = ("zone,issued_at,ts,carbon_intensity_g_per_kwh\n"
            "GB,2023-07-14T00:00:00Z,2023-07-14T00:00:00Z,0\n"
            "GB,2023-07-14T02:00:00+02:00,2023-07-14T03:00:00+02:00,12.5\n")
    f = read_provider_forecast(_write(tmp_path, text), global_catalog)
    assert list(f["site"]) == ["gb-london", "gb-london"]
    assert list(f["provider_mean"]) == [0.0, 12.5]
    assert f["ts"].iloc[1] == pd.Timestamp("2023-07-14T01:00:00Z")
    assert f["issued_at"].iloc[1] == pd.Timestamp("2023-07-14T00:00:00Z")


def _frame(site, issued, actual, product, naive):
    ts = pd.date_range(issued, periods=len(actual), freq="h")
    rows = []
    for chosen, mean in ((True, product), (False, naive)):
        rows.append(pd.DataFrame({"site": site, "signal": CI, "model": "m", "chosen": chosen,
                                  "issued_at": issued, "ts": ts, "mean": mean,
                                  "actual": actual}))
    return pd.concat(rows, ignore_index=True)


def test_the_latest_forecast_published_by_the_issue_time_is_scored():
    t0 = pd.Timestamp("2023-07-14T00:00:00Z")
    actual = np.array([100.0, 200.0, 400.0])
    fc = _frame("s", t0, actual, actual * 1.2, actual * 1.5)
    ts = pd.date_range(t0, periods=3, freq="h")
    prov = pd.DataFrame({
        "site": "s",
        # an old issue (30 % off), a newer one still before t0 (10 % off, used), and one
        # published after t0 (exact: it was not known, never used); hour 2 only after t0
        "issued_at": [t0 - pd.Timedelta(hours=36)] * 2 + [t0 - pd.Timedelta(hours=12)] * 2
        + [t0 + pd.Timedelta(hours=1)] * 3,
        "ts": [ts[0], ts[1], ts[0], ts[1], ts[0], ts[1], ts[2]],
        "provider_mean": [130.0, 260.0, 110.0, 220.0, 100.0, 200.0, 400.0],
        "line": range(2, 9)})
    r = score_against(fc, prov)
    s = r["sites"]["s"]
    assert s["hours"] == 2 and s["unmatched_hours"] == 1
    assert s["provider_mape_pct"] == pytest.approx(10.0)
    assert s["mape_pct"] == pytest.approx(20.0) and s["naive_mape_pct"] == pytest.approx(50.0)
    assert s["provider_skill"] == pytest.approx(0.8) and s["skill"] == pytest.approx(0.6)
    assert s["provider_mae"] == pytest.approx(15.0)
    assert r["rows_used"] == 2 and r["rows_unused"] == 5


@pytest.mark.shared_data
def test_cli_scores_a_published_file_next_to_the_product(shared_data, tmp_path):
    res, fc = run_site_backtest("global", shared_data, "2023-07-14", "2023-07-15",
                                sites=["gb-london"])
    prod = fc[(fc["signal"] == CI) & fc["chosen"]]
    # the "provider" published 5 % high, the day before at 12:00 UTC
    lines = ["zone,issued_at,ts,carbon_intensity_g_per_kwh"]
    for _, r in prod.iterrows():
        issued = pd.Timestamp(r["issued_at"]) - pd.Timedelta(hours=12)
        lines.append(f"GB,{issued.isoformat()},{pd.Timestamp(r['ts']).isoformat()},"
                     f"{1.05 * r['actual']:.6f}")
    f = _write(tmp_path, "\n".join(lines) + "\n")
    out = tmp_path / "res.json"
    run = CliRunner().invoke(app, ["backtest", "--dataset", "sites", "--from", "2023-07-14",
                                   "--to", "2023-07-15", "--sites", "gb-london", "--against",
                                   str(f), "--out", str(out)])
    assert run.exit_code == 0, run.output
    a = json.loads(out.read_text())["against"]["sites"]["gb-london"]
    assert a["hours"] == 48 and a["unmatched_hours"] == 0
    assert a["provider_mape_pct"] == pytest.approx(5.0, abs=1e-4)
    mine = res["sites"]["gb-london"][CI]
    assert a["mape_pct"] == pytest.approx(mine["mape_pct"])
    assert a["naive_mape_pct"] == pytest.approx(mine["naive_mape_pct"])
    assert "provider MAPE" in run.output
    # a bad file stops before any forecast is made, naming the line
    bad = _write(tmp_path, lines[0] + "\nGB,2023-07-13T12:00:00Z,2023-07-14T00:00:00Z,x\n")
    run = CliRunner().invoke(app, ["backtest", "--dataset", "sites", "--from", "2023-07-14",
                                   "--to", "2023-07-15", "--sites", "gb-london", "--against",
                                   str(bad), "--out", str(out)])
    assert run.exit_code == 2 and "line 2" in run.output and "'x' is not a number" in run.output
