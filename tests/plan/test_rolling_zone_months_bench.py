"""bench/rolling_zone_months.py: the zone-month sweep runs and its inputs are checked."""

from __future__ import annotations

import json

import pytest

from .benchload import load_bench


def test_month_window_first_days_whole_month_and_bad_input():
    zm = load_bench("rolling_zone_months")
    assert zm.month_window("2023-02", None) == ("2023-02-01", "2023-02-28")
    assert zm.month_window("2023-07", 7) == ("2023-07-01", "2023-07-07")
    assert zm.month_window("2023-02", 31) == ("2023-02-01", "2023-02-28")   # at the limit
    with pytest.raises(ValueError, match="outside 1..31"):
        zm.month_window("2023-07", 32)
    with pytest.raises(ValueError, match="'2023-13'.*YYYY-MM"):
        zm.month_window("2023-13", 7)


def test_site_must_be_a_global_site_with_a100s():
    rr = load_bench("rolling_replay")
    cat, site = rr.ample_site_catalog("jp-tk-tokyo", 50)
    assert [s.id for s in cat.sites] == ["jp-tk-tokyo"] and site.zone == "JP-TK"
    assert cat.sites[0].gpus["A100"].count == 50 and cat.sites[0].facility_power_cap_kw is None
    with pytest.raises(ValueError, match="'tokyo' is not a site.*jp-tk-tokyo"):
        rr.ample_site_catalog("tokyo", 50)


def test_summary_checks_the_targets_at_and_below_the_limit():
    zm = load_bench("rolling_zone_months")

    def row(s24, s6, r24, r6):
        cad = lambda s: {"milp_share_of_oracle": s, "fallback_runs": {"milp": 0},   # noqa: E731
                         "time_limited_runs": {"milp": 1}}
        return {"24h": cad(s24), "6h": cad(s6),
                "diff_6h_minus_24h": {"milp_reduction_pp": round(r6 - r24, 3)}}

    at_limit = zm.summarise([row(0.90, 1.0, 20.0, 20.0), row(1.0, 0.90, 20.0, 20.0)], [24, 6])
    assert at_limit["24h"]["every_zone_month_ge_0_90"] and at_limit["24h"]["mean_ge_0_95"]
    assert at_limit["6h_ge_24h_every_zone_month"] and at_limit["24h"]["time_limited_runs"] == 2
    bad = zm.summarise([row(0.899, 1.0, 20.0, 19.9), row(0.99, 0.9, 20.0, 20.0)], [24, 6])
    assert not bad["24h"]["every_zone_month_ge_0_90"] and not bad["24h"]["mean_ge_0_95"]
    assert bad["24h"]["min_share"] == 0.899 and bad["24h"]["zone_months_share_ge_0_90"] == 1
    assert not bad["6h_ge_24h_every_zone_month"] and bad["6h_ge_24h_zone_months"] == 1


@pytest.mark.shared_data
def test_sweep_runs_one_site_one_day_at_both_cadences(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CARBONSCHED_SHARED_DATA", str(shared_data))
    zm = load_bench("rolling_zone_months")
    out = tmp_path / "zm.json"
    doc = zm.main(["--sites", "sg-singapore", "--months", "2023-03", "--days", "1",
                   "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc))
    (r,) = doc["zone_months"]
    assert (r["site"], r["zone"], r["start"], r["end"]) == (
        "sg-singapore", "SG", "2023-03-01", "2023-03-01")
    assert r["jobs"] > 0
    for c in ("24h", "6h"):
        assert r[c]["jobs_placed"] == {"agnostic": r["jobs"], "milp": r["jobs"],
                                       "oracle": r["jobs"]}
        assert r[c]["deadline_misses"] == {"agnostic": 0, "milp": 0, "oracle": 0}
        assert r[c]["oracle_kg"] <= r[c]["milp_kg"] * 1.001
        assert r[c]["oracle_kg"] <= r[c]["agnostic_kg"] * 1.001
    assert r["diff_6h_minus_24h"]["milp_reduction_pp"] == pytest.approx(
        r["6h"]["milp_reduction_pct"] - r["24h"]["milp_reduction_pct"], abs=1e-3)
    assert doc["summary"]["zone_months"] == 1
