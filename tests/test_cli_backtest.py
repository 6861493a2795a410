"""`carbonsched backtest` wiring: bad input; one region, one cheap model, on the real files."""

import json

import pytest
from typer.testing import CliRunner

from carbonsched.cli.app import app

runner = CliRunner()


def test_unknown_dataset(tmp_path):
    r = runner.invoke(app, ["backtest", "--dataset", "m4", "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 2
    assert "unknown dataset 'm4'" in r.output


def test_unknown_region_is_named(tmp_path, shared_data):
    r = runner.invoke(app, ["backtest", "--data-dir", str(shared_data / "dacf"), "--regions",
                            "MARS", "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 2
    assert "MARS" in r.output


def test_refit_days_below_zero_is_refused(tmp_path, shared_data):
    r = runner.invoke(app, ["backtest", "--data-dir", str(shared_data / "dacf"), "--regions",
                            "PJM", "--refit-days", "-3", "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 2
    assert ("--refit-days must be 0 (fit once before validation and once before the test) or "
            "a number of days >= 1, got -3") \
        in " ".join(r.output.split())
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--dataset", "sites", "--from", "2023-07-01", "--to", "2023-07-02", "--refit-days", "7"],
     "--refit-days sets the DACF backtest's refits"),
    (["--dataset", "dacf", "--exogenous", "day-ahead-price"],
     "--exogenous sets what the site backtest's forecasts read"),
])
def test_an_option_of_the_other_dataset_is_refused_not_ignored(tmp_path, args, says):
    r = runner.invoke(app, ["backtest", *args, "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 2, r.output
    assert says in " ".join(r.output.split())
    assert not (tmp_path / "x.json").exists()


@pytest.mark.shared_data
@pytest.mark.slow
def test_one_region_one_model_writes_json_and_csv(tmp_path, shared_data):
    out, csv = tmp_path / "bt.json", tmp_path / "fc.csv"
    r = runner.invoke(app, ["backtest", "--dataset", "dacf", "--data-dir",
                            str(shared_data / "dacf"), "--regions", "PJM", "--models",
                            "ols_level", "--refit-days", "0", "--out", str(out),
                            "--forecasts-out", str(csv)])
    assert r.exit_code == 0, r.output
    meta = json.loads(out.read_text())["meta"]
    assert meta["refit_days"] is None and "no refit during the test" in meta["refit_policy"]
    res = json.loads(out.read_text())["results"]
    by_model = {row["model"]: row for row in res if row["region"] == "PJM"}
    # the published DACF forecast, recomputed from its file, reproduces Table 4 (3.30 %)
    assert by_model["dacf_published"]["mape_mean"] == pytest.approx(3.30, abs=0.01)
    assert sum(row["selected"] for row in res) == 1
    assert by_model["ols_level"]["selected"]
    assert by_model["ols_level"]["mape_mean"] < by_model["seasonal_naive"]["mape_mean"]
    header = csv.read_text().splitlines()[0]
    assert header == "region,model,issued_at,ts,actual,mean,lo_80,hi_80,lo_95,hi_95"
