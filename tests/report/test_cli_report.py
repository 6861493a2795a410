"""``carbonsched report`` end to end: plans in a real store, the report file, exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.store import Store

from .builders import plan_doc

runner = CliRunner()
pytestmark = pytest.mark.shared_data


def test_cli_report_json_from_the_store(store_url, fixtures_dir, shared_data, tmp_path):
    fx = fixtures_dir / "report"
    Store(store_url).save_plan(plan_doc("2023-07-03", "two-markets", [
        ("J-DE", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5),
        ("J-GB", "tenant-b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0),
    ]))
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["report", "--from", "2023-07-03", "--to", "2023-07-03",
                              "--catalog", str(fx / "two_markets.toml"), "--data-dir",
                              str(shared_data), "--instruments", str(fx / "instruments.toml"),
                              "--format", "json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["totals"]["market_based_kg"] == pytest.approx(1.57)
    assert doc["totals"]["market_based_hourly_kg"] == pytest.approx(5.89)
    assert {j["job_id"] for j in doc["jobs"]} == {"J-DE", "J-GB"}
    assert "market-based 1.6 kg (2015) / 5.9 kg (hourly)" in res.output
    # the plan has no counterfactual: said, not silently zero
    assert doc["totals"]["avoided_kg"] is None
    assert any("without baseline placements" in n for n in doc["metadata"]["notes"])


@pytest.mark.parametrize(("args", "message"), [
    (["--from", "2023-08-01", "--to", "2023-08-02"], "no plans between 2023-08-01 and 2023-08-02"),
    (["--from", "2023-08-01", "--to", "2023-08-02", "--format", "pdf"],
     "--format 'pdf' is not one of csv, json, html, xlsx"),
    (["--from", "2023-08-03", "--to", "2023-08-01"], "before --from"),
    (["--from", "2023-8-1", "--to", "2023-08-01"], "2023-8-1"),
])
def test_cli_report_bad_input(store_url, tmp_path, args, message):
    res = runner.invoke(app, ["report", *args, "--catalog", "global", "--out",
                              str(tmp_path / "r.json")])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())
