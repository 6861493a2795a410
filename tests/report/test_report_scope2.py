"""The market-based method under both rules, against a hand-worked example.

Fleet (tests/fixtures/report/two_markets.toml): ``de-site`` in market DE, ``gb-site`` in market
GB, PUE fixed at 1.25 (no weather file: the model's floor, pue_min = pue_max = 1.25).

Work on 2023-07-03 (UTC):

* J-DE at de-site: 4 GPUs x 0.5 kW = 2 kW IT, 10:00-14:00 -> IT 8 kWh, facility 10 kWh,
  2.5 kWh in each of the hours 10, 11, 12, 13;
* J-GB at gb-site: 2 GPUs x 1.0 kW = 2 kW IT, 10:00-12:00 -> IT 4 kWh, facility 5 kWh,
  2.5 kWh in each of the hours 10, 11.

Instruments (tests/fixtures/report/instruments.toml), all valid on 2023-07-03 only:

* GO-DE: certificate, market DE, 2.4 kWh, no hourly granularity;
* REGO-GB: certificate, market GB, 3 kWh, no hourly granularity;
* PPA-DE: PPA, market DE, hourly generation 11:00 1.5 kWh, 12:00 4.0 kWh, 15:00 1.0 kWh (6.5 kWh;
  it covers only part of the work: nothing at 10:00 and 13:00, and 15:00 has no work).

Residual mix: DE 700 g/kWh, GB 400 g/kWh.

2015 rule (annual matching in the instrument's market and period, instruments in file order):

* DE: 10 kWh - GO-DE 2.4 - PPA-DE 6.5 = 1.1 kWh uncovered x 700 g = 0.77 kg;
* GB: 5 kWh - REGO-GB 3 = 2 kWh x 400 g = 0.80 kg (REGO-GB cannot touch DE: other market);
* total 1.57 kg.

Hourly rule (October 2025 draft; a certificate without hourly granularity is spread evenly
over its 24 validity hours):

* DE: GO-DE gives 2.4 / 24 = 0.1 kWh per hour -> 2.4 kWh left in each work hour;
  PPA-DE: 10:00 0 -> 2.4 left; 11:00 1.5 -> 0.9 left; 12:00 4.0 -> 0 left (1.6 kWh generation
  unused); 13:00 0 -> 2.4 left; 15:00 1.0 meets no work (unused).
  Unmatched 2.4 + 0.9 + 0 + 2.4 = 5.7 kWh x 700 g = 3.99 kg;
  matched carbon-free 0.4 + 1.5 + 2.4 = 4.3 kWh -> CFE 0.43;
* GB: REGO-GB gives 3 / 24 = 0.125 kWh per hour -> 0.25 kWh in the two work hours; unmatched
  4.75 kWh x 400 g = 1.90 kg; CFE 0.05;
* total 5.89 kg; hourly CFE score of the fleet (4.3 + 0.25) / 15 = 0.303333.
"""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.errors import DataFormatError, InputError, UnknownSiteError
from carbonsched.report import build_report, render
from carbonsched.report.instruments import load_market_config

from .builders import plan_doc

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def fx(fixtures_dir):
    return fixtures_dir / "report"


@pytest.fixture(scope="module")
def hand_report(fx, shared_data):
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-DE", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5),
        ("J-GB", "tenant-b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0),
    ])
    return build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                        instruments=fx / "instruments.toml", plans=[doc])


def test_energy_is_it_times_pue(hand_report):
    t = hand_report.totals
    assert t["it_energy_kwh"] == pytest.approx(12.0)
    assert t["facility_energy_kwh"] == pytest.approx(15.0)


def test_market_based_2015_annual_matching(hand_report):
    sites = hand_report.frames["sites"].set_index("site")
    assert sites.loc["de-site", "market_based_kg"] == pytest.approx(0.77)
    assert sites.loc["gb-site", "market_based_kg"] == pytest.approx(0.80)
    assert hand_report.totals["market_based_kg"] == pytest.approx(1.57)


def test_market_based_hourly_matching(hand_report):
    sites = hand_report.frames["sites"].set_index("site")
    assert sites.loc["de-site", "market_based_hourly_kg"] == pytest.approx(3.99)
    assert sites.loc["gb-site", "market_based_hourly_kg"] == pytest.approx(1.90)
    assert hand_report.totals["market_based_hourly_kg"] == pytest.approx(5.89)
    assert sites.loc["de-site", "cfe_hourly_share"] == pytest.approx(0.43)
    assert sites.loc["gb-site", "cfe_hourly_share"] == pytest.approx(0.05)
    assert hand_report.totals["cfe_hourly_share"] == pytest.approx(4.55 / 15)


def test_instrument_usage_and_caps_are_stated(hand_report):
    use = hand_report.frames["instruments"].set_index(["method", "instrument"])
    a = "market_based_kg (2015)"
    h = "market_based_hourly_kg (hourly)"
    assert use.loc[(a, "PPA-DE"), "used_mwh"] == pytest.approx(0.0065)
    assert use.loc[(a, "REGO-GB"), "unused_mwh"] == pytest.approx(0.0)
    # hourly: GO-DE used 4 h x 0.1 kWh; PPA-DE 1.5 + 2.4 used, 1.6 + 1.0 kWh unused
    assert use.loc[(h, "GO-DE"), "used_mwh"] == pytest.approx(0.0004)
    assert use.loc[(h, "PPA-DE"), "used_mwh"] == pytest.approx(0.0039)
    assert use.loc[(h, "PPA-DE"), "unused_mwh"] == pytest.approx(0.0026)
    assert "hourly profile" in use.loc[(h, "PPA-DE"), "volume_basis"]
    assert any("PPA-DE (hourly rule): 0.003 MWh" in n for n in hand_report.metadata["notes"])


def test_jobs_add_up_to_sites(hand_report):
    jobs = hand_report.frames["jobs"].set_index("job_id")
    assert jobs.loc["J-DE", "market_based_kg"] == pytest.approx(0.77)
    assert jobs.loc["J-GB", "market_based_hourly_kg"] == pytest.approx(1.90)
    assert jobs.loc["J-DE", "hours_basis"] == "planned"
    assert jobs.loc["J-DE", "it_energy_basis"] == "modelled"


def test_location_fallback_is_flagged(fx, shared_data, tmp_path):
    cfg = tmp_path / "inst.toml"
    cfg.write_text((fx / "instruments.toml").read_text().replace(
        'residual_mix_g_per_kwh = 400.0\n', ''))
    (tmp_path / "ppa_de.csv").write_text((fx / "ppa_de.csv").read_text())
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-GB", "t", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)])
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       instruments=cfg, plans=[doc])
    gb = rep.frames["sites"].set_index("site").loc["gb-site"]
    assert gb["location_factor_flag"]
    assert "location factor (no residual mix configured)" in gb["unmatched_basis_2015"]
    assert any("no residual mix configured for gb-site" in n for n in rep.metadata["notes"])
    # uncovered 2 kWh at the hours' own location factor: (5 - 3) / 5 of the location total
    assert rep.totals["market_based_kg"] == pytest.approx(0.4 * rep.totals["location_based_kg"])


def test_instrument_outside_its_period_or_market_counts_nothing(fx, shared_data, tmp_path):
    text = (fx / "instruments.toml").read_text().replace(
        'id = "REGO-GB"\nkind = "certificate"\nmarket = "GB"\nvalid_from = 2023-07-03',
        'id = "REGO-GB"\nkind = "certificate"\nmarket = "GB"\nvalid_from = 2023-06-01'
    ).replace("valid_to = 2023-07-04T00:00:00Z\nvolume_mwh = 0.003",
              "valid_to = 2023-06-30T00:00:00Z\nvolume_mwh = 0.003")
    (tmp_path / "i.toml").write_text(text)
    (tmp_path / "ppa_de.csv").write_text((fx / "ppa_de.csv").read_text())
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-GB", "t", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)])
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       instruments=tmp_path / "i.toml", plans=[doc])
    # GB: nothing covers its 5 kWh (REGO-GB expired; the DE instruments are another market)
    assert rep.totals["market_based_kg"] == pytest.approx(5 * 0.4)
    assert rep.totals["market_based_hourly_kg"] == pytest.approx(5 * 0.4)


def _write(tmp_path, body):
    p = tmp_path / "i.toml"
    p.write_text(body)
    return p


def test_bad_instruments(tmp_path):
    sites = {"de-site", "gb-site"}
    with pytest.raises(DataFormatError, match="listed twice"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "X"
kind = "certificate"
market = "DE"
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
volume_mwh = 1
[[instruments]]
id = "X"
kind = "certificate"
market = "DE"
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
volume_mwh = 1
"""), sites)
    with pytest.raises(DataFormatError, match="has no UTC offset"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "X"
kind = "certificate"
market = "DE"
valid_from = 2023-07-01T00:00:00
valid_to = 2023-08-01T00:00:00Z
volume_mwh = 1
"""), sites)
    with pytest.raises(InputError, match="supplier factors 'S1' and 'S2' both apply"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "S1"
kind = "supplier"
market = "DE"
sites = ["de-site"]
factor_g_per_kwh = 300
valid_from = 2023-01-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
[[instruments]]
id = "S2"
kind = "supplier"
market = "DE"
sites = ["de-site"]
factor_g_per_kwh = 200
valid_from = 2023-07-01T00:00:00Z
valid_to = 2024-01-01T00:00:00Z
"""), sites)
    with pytest.raises(DataFormatError, match="a PPA needs its hourly generation profile"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "P"
kind = "ppa"
market = "DE"
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
"""), sites)
    with pytest.raises(UnknownSiteError, match="site 'mars'"):
        load_market_config(_write(tmp_path, '[sites.mars]\nmarket = "X"\n'), sites)
    with pytest.raises(DataFormatError, match=r"\[sites.de-site\] residual_mix_g_per_kwh: "
                                               r"'seven hundred' is not a number"):
        load_market_config(_write(tmp_path, '[sites.de-site]\nmarket = "DE"\n'
                                  'residual_mix_g_per_kwh = "seven hundred"\n'), sites)
    with pytest.raises(DataFormatError, match=r"instrument 'P' profile mwh: 'abc' is not a number"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "P"
kind = "ppa"
market = "DE"
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
profile = [{hour = 2023-07-03T10:00:00Z, mwh = "abc"}]
"""), sites)
    with pytest.raises(DataFormatError, match=r"volume_mwh: nan is not a finite number"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "C"
kind = "certificate"
market = "DE"
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
volume_mwh = nan
"""), sites)
    with pytest.raises(DataFormatError, match="kind 'rec' is not one of"):
        load_market_config(_write(tmp_path, """
[[instruments]]
id = "R"
kind = "rec"
market = "DE"
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z
"""), sites)


def test_supplier_factor_applies_after_volume_instruments(fx, shared_data, tmp_path):
    # supplier listed FIRST still only takes what GO-DE and PPA-DE leave: 1.1 kWh x 300 g
    text = (fx / "instruments.toml").read_text()
    head, rest = text.split("[[instruments]]", 1)
    body = head + """[[instruments]]
id = "SUP-DE"
kind = "supplier"
market = "DE"
sites = ["de-site"]
factor_g_per_kwh = 300.0
valid_from = 2023-07-01T00:00:00Z
valid_to = 2023-08-01T00:00:00Z

[[instruments]]""" + rest
    (tmp_path / "i.toml").write_text(body)
    (tmp_path / "ppa_de.csv").write_text((fx / "ppa_de.csv").read_text())
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-DE", "a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5)])
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       instruments=tmp_path / "i.toml", plans=[doc])
    assert rep.totals["market_based_kg"] == pytest.approx(1.1 * 0.3)
    assert rep.totals["market_based_hourly_kg"] == pytest.approx(5.7 * 0.3)


def test_actual_hours_and_measured_energy(fx, shared_data, tmp_path):
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-DE", "a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5),
        ("J-GB", "b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)])
    # J-DE really ran 10:30-14:30 (4 h, five hours touched); J-GB as planned
    actual = pd.DataFrame({"job_id": ["J-DE"], "plan_id": [doc["plan_id"]], "site": ["de-site"],
                           "actual_start": [pd.Timestamp("2023-07-03T10:30Z")],
                           "actual_end": [pd.Timestamp("2023-07-03T14:30Z")],
                           "backend": ["slurm:de"]})
    tel = tmp_path / "tel.csv"
    tel.write_text("hour_utc,site,job_id,it_energy_kwh,source\n"
                   "2023-07-03T10:00:00Z,gb-site,J-GB,1.5,dcgm\n"
                   "2023-07-03T11:00:00Z,gb-site,J-GB,0,dcgm\n"
                   "2023-07-03T20:00:00Z,gb-site,J-GB,1.0,dcgm\n")
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       telemetry=tel, actual=actual, plans=[doc])
    jobs = rep.frames["jobs"].set_index("job_id")
    assert jobs.loc["J-DE", "hours_basis"] == "actual"
    assert jobs.loc["J-DE", "start"] == "2023-07-03T10:30:00Z"
    assert jobs.loc["J-DE", "it_energy_kwh"] == pytest.approx(8.0)
    assert jobs.loc["J-GB", "hours_basis"] == "planned"
    # 10:00 measured 1.5 kWh; 11:00 counter 0 = unknown -> modelled 2 kWh
    assert jobs.loc["J-GB", "it_energy_kwh"] == pytest.approx(3.5)
    assert jobs.loc["J-GB", "it_energy_basis"] == "mixed"
    notes = " | ".join(rep.metadata["notes"])
    assert "1 job-hour(s) had zero power counters" in notes
    assert "1 telemetry row(s) match no job, site and hour" in notes
    assert rep.metadata["provenance"]["hours"]["actual_share"] > 0


def test_bad_telemetry(fx, shared_data, tmp_path):
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-GB", "b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)])
    tel = tmp_path / "tel.csv"
    for body, msg in [
        ("hour_utc,site,job_id,it_energy_kwh,source\n2023-07-03T10:00:00,gb-site,J,1,x\n",
         "has no UTC offset"),
        ("hour_utc,site,job_id,it_energy_kwh,source\n2023-07-03T10:00:00Z,gb-site,J,-1,x\n",
         "line 2: negative it_energy_kwh"),
        ("hour_utc,site,job_id,it_energy_kwh\n", "missing column"),
        ("hour_utc,site,job_id,it_energy_kwh,source\n2023-07-03T10:00:00Z,moon,J,1,x\n",
         "site\\(s\\) moon"),
    ]:
        tel.write_text(body)
        with pytest.raises(InputError, match=msg):
            build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03",
                         "2023-07-03", telemetry=tel, plans=[doc])


def test_period_without_plans(fx, shared_data):
    with pytest.raises(InputError, match="no plans between 2023-08-01 and 2023-08-02"):
        build_report(None, fx / "two_markets.toml", shared_data, "2023-08-01", "2023-08-02",
                     plans=[])


def test_gap_hours_are_a_gap_not_zero(fx, shared_data, tmp_path):
    """Hours without an actual intensity: excluded with their share, never counted as 0."""
    import shutil

    data = tmp_path / "data"
    ci = data / "sustain-cluster" / "carbon_intensity"
    ci.mkdir(parents=True)
    src = shared_data / "sustain-cluster" / "carbon_intensity"
    shutil.copy(src / "DE-LU_2023_hourly.csv", ci / "DE-LU_2023_hourly.csv")
    lines = (src / "GB_2023_hourly.csv").read_text().splitlines(keepends=True)
    # drop GB's rows for 2023-07-03 10:00 (the first of J-GB's two hours)
    kept = [ln for ln in lines if not ln.startswith("2023-07-03 10:00")]
    assert len(kept) == len(lines) - 1
    (ci / "GB_2023_hourly.csv").write_text("".join(kept))
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-GB", "b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)],
        baseline=[("J-GB", "b", "gb-site", "2023-07-03T09:00:00Z", "2023-07-03T11:00:00Z",
                   2, 1.0)])
    rep = build_report(None, fx / "two_markets.toml", data, "2023-07-03", "2023-07-03",
                       plans=[doc])
    t = rep.totals
    assert t["location_gap_share"] == pytest.approx(0.5)
    # the counterfactual (09:00-11:00) has the gap hour too: said, with its share (before:
    # its gap was dropped without a word, and avoided_kg compared unlike coverage)
    assert t["counterfactual_gap_share"] == pytest.approx(0.5)
    said = "the counterfactual has 50.00 % of its facility energy (2.5 kWh) in hours without"
    assert any(n.startswith(said) for n in rep.metadata["notes"])
    assert t["location_gap_energy_kwh"] == pytest.approx(2.5)
    hour11 = [ln for ln in lines if ln.startswith("2023-07-03 11:00")][0].split(",")
    assert t["location_based_kg"] == pytest.approx(2.5 * float(hour11[4]) / 1000)
    assert any("fell in hours without an actual grid intensity" in n
               for n in rep.metadata["notes"])
    js = render(rep, "json").decode()
    assert '"sci_g_per_unit": null' in js


def test_unknown_format(hand_report):
    with pytest.raises(InputError, match="unknown report format 'pdf'"):
        render(hand_report, "pdf")


# ---- review fixes: like-for-like avoided emissions, boundaries, statuses, bad input


def _two_day_docs():
    # day 1 has a baseline (the same job at its earliest start), day 2 has none
    d1 = plan_doc("2023-07-03", "two-markets",
                  [("J1", "a", "de-site", "2023-07-03T12:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5)],
                  baseline=[("J1", "a", "de-site", "2023-07-03T00:00:00Z",
                             "2023-07-03T02:00:00Z", 4, 0.5)])
    d2 = plan_doc("2023-07-04", "two-markets",
                  [("J2", "a", "de-site", "2023-07-04T12:00:00Z", "2023-07-04T14:00:00Z", 4, 0.5)])
    return d1, d2


def test_avoided_emissions_compare_the_same_plans(fx, shared_data):
    d1, d2 = _two_day_docs()
    both = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-04",
                        plans=[d1, d2])
    only1 = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03",
                         "2023-07-03", plans=[d1])
    # day 2 (no baseline) changes the inventory but not the avoided emissions
    assert both.totals["location_based_kg"] > only1.totals["location_based_kg"]
    assert both.totals["avoided_kg"] == pytest.approx(only1.totals["avoided_kg"], rel=1e-9)
    assert only1.totals["avoided_kg"] == pytest.approx(
        only1.totals["counterfactual_location_based_kg"] - only1.totals["location_based_kg"])
    assert "1 plan(s) without baseline placements" in " | ".join(both.metadata["notes"])


def test_work_the_plan_left_unplaced_is_not_avoided(fx, shared_data):
    d1, _ = _two_day_docs()
    with_extra = plan_doc("2023-07-03", "two-markets", [
        ("J1", "a", "de-site", "2023-07-03T12:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5)],
        baseline=[("J1", "a", "de-site", "2023-07-03T00:00:00Z", "2023-07-03T02:00:00Z", 4, 0.5),
                  ("JX", "a", "gb-site", "2023-07-03T00:00:00Z", "2023-07-03T05:00:00Z", 8, 1.0)])
    a = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                     plans=[d1])
    b = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                     plans=[with_extra])
    assert b.totals["avoided_kg"] == pytest.approx(a.totals["avoided_kg"], rel=1e-9)
    assert ("1 job(s) the carbon-agnostic baseline ran but the plan left unplaced"
            in " | ".join(b.metadata["notes"]))


def test_work_crossing_the_period_start_is_counted_inside_it(fx, shared_data):
    # a 48 h plan of 2023-07-02 runs a job 22:00 .. 02:00: July 3 reports its 2 hours there
    doc = plan_doc("2023-07-02", "two-markets", [
        ("JC", "a", "de-site", "2023-07-02T22:00:00Z", "2023-07-03T02:00:00Z", 4, 0.5)])
    d1, _ = _two_day_docs()
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       plans=[doc, d1])
    jobs = rep.frames["jobs"].set_index("job_id")
    assert jobs.loc["JC", "it_energy_kwh"] == pytest.approx(2 * 4 * 0.5)
    assert jobs.loc["J1", "it_energy_kwh"] == pytest.approx(2 * 4 * 0.5)


def test_a_failed_replan_does_not_erase_the_day(fx, shared_data, tmp_path):
    from carbonsched.store import Store

    store = Store(f"sqlite:///{tmp_path}/s.db")
    d1, _ = _two_day_docs()
    store.save_plan(d1)
    bad = plan_doc("2023-07-03", "two-markets", [], baseline=[
        ("J1", "a", "de-site", "2023-07-03T00:00:00Z", "2023-07-03T02:00:00Z", 4, 0.5)])
    bad["solver"]["status"] = "infeasible"
    store.save_plan(bad)
    rep = build_report(store, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03")
    assert rep.frames["jobs"]["job_id"].tolist() == ["J1"]
    notes = " | ".join(rep.metadata["notes"])
    assert f"plan {bad['plan_id'][:12]} of 2023-07-03 (infeasible)" in notes


def test_actual_runs_still_running_and_without_start(fx, shared_data):
    d1, _ = _two_day_docs()
    running = pd.DataFrame({"job_id": ["J1"], "plan_id": [d1["plan_id"]], "site": ["de-site"],
                            "actual_start": [pd.Timestamp("2023-07-03T12:30Z")],
                            "actual_end": [None], "backend": ["slurm:de"]})
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       actual=running, plans=[d1])
    job = rep.frames["jobs"].set_index("job_id").loc["J1"]
    assert job["hours_basis"] == "actual" and job["start"] == "2023-07-03T12:30:00Z"
    # counted to the period's end, and said (before: silently)
    assert job["end"] == "2023-07-04T00:00:00Z"
    assert ("1 run(s) still going, no end on record (J1): counted to 2023-07-04 00:00 UTC, the "
            "period's end") in " | ".join(rep.metadata["notes"])
    # a report made while it runs counts it to the report's time, not to the period's end
    now = pd.Timestamp("2023-07-03T14:00Z").to_pydatetime()
    mid = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       actual=running, plans=[d1], now=now)
    j = mid.frames["jobs"].set_index("job_id").loc["J1"]
    assert j["end"] == "2023-07-03T14:00:00Z"
    assert mid.totals["it_energy_kwh"] == pytest.approx(4 * 0.5 * 1.5)     # 12:30-14:00
    assert ("counted to 2023-07-03 14:00 UTC, the report's time"
            in " | ".join(mid.metadata["notes"]))
    no_start = running.assign(actual_start=[None])
    with pytest.raises(DataFormatError, match=r"job 'J1': no actual_start"):
        build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                     actual=no_start, plans=[d1])


def test_plan_naming_a_site_the_catalog_lacks(fx, shared_data):
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J1", "a", "mars-site", "2023-07-03T12:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5)])
    with pytest.raises(UnknownSiteError, match=r"places work at site 'mars-site', which "
                                               r"catalog 'two-markets' does not define"):
        build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                     plans=[doc])


def _store_with_outbox_row(tmp_path, docs, plan_id, state, planned, actual=(None, None),
                           times_source=None):
    """A SQLite store holding ``docs`` and one outbox row for J1 (de-site) of ``plan_id``."""
    import json as _json
    from datetime import UTC, datetime

    from sqlalchemy.orm import Session

    from carbonsched.store import Store
    from carbonsched.store.models import DispatchRow

    store = Store(f"sqlite:///{tmp_path}/s.db")
    for d in docs:
        store.save_plan(d)
    now = datetime(2023, 7, 3, 11, tzinfo=UTC)
    with Session(store.engine) as s:
        s.add(DispatchRow(key="J1#0", job_id="J1", piece=0, plan_id=plan_id,
                          site="de-site", backend="slurm:de", state=state,
                          reason="x", detail="", backend_id="de:42",
                          request_json=_json.dumps({}),
                          planned_start=pd.Timestamp(planned[0]).to_pydatetime(),
                          planned_end=pd.Timestamp(planned[1]).to_pydatetime(), attempts=1,
                          created_at=now, updated_at=now, submitted_at=now,
                          actual_start=actual[0] and pd.Timestamp(actual[0]).to_pydatetime(),
                          actual_end=actual[1] and pd.Timestamp(actual[1]).to_pydatetime(),
                          times_source=times_source))
        s.commit()
    return store


def test_actual_hours_come_from_the_dispatch_outbox(fx, shared_data, tmp_path):
    # dispatch recorded J1 (planned 12:00-14:00) as run 12:30-14:30 by its backend (sacct)
    d1, _ = _two_day_docs()
    store = _store_with_outbox_row(tmp_path, [d1], d1["plan_id"], "Succeeded",
                                   ("2023-07-03T12:00Z", "2023-07-03T14:00Z"),
                                   ("2023-07-03T12:30Z", "2023-07-03T14:30Z"), "sacct")
    rep = build_report(store, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03")
    job = rep.frames["jobs"].set_index("job_id").loc["J1"]
    assert job["hours_basis"] == "actual"
    assert (job["start"], job["end"]) == ("2023-07-03T12:30:00Z", "2023-07-03T14:30:00Z")
    assert job["it_energy_kwh"] == pytest.approx(2 * 4 * 0.5)


@pytest.mark.parametrize(("state", "end", "assumed"), [
    ("Cancelled", "2023-07-03T14:00:00Z", True),   # over, no end on record: its planned end
    ("Failed", "2023-07-03T14:00:00Z", True),      # lost: the same
    ("Running", "2023-07-04T00:00:00Z", False),    # still running: up to the report's end
])
def test_a_run_over_without_an_end_counts_to_its_planned_end_and_is_named(
        fx, shared_data, tmp_path, state, end, assumed):
    # J1 (planned 12:00-14:00, 4 GPUs x 0.5 kW) started 12:30; no end on record. Before, a
    # cancelled or lost run was counted to the end of the report's period like a running one
    d1, _ = _two_day_docs()
    store = _store_with_outbox_row(tmp_path, [d1], d1["plan_id"], state,
                                   ("2023-07-03T12:00Z", "2023-07-03T14:00Z"),
                                   ("2023-07-03T12:30Z", None), "squeue")
    rep = build_report(store, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03")
    job = rep.frames["jobs"].set_index("job_id").loc["J1"]
    assert (job["start"], job["end"]) == ("2023-07-03T12:30:00Z", end)
    hours = (pd.Timestamp(end) - pd.Timestamp("2023-07-03T12:30Z")) / pd.Timedelta(hours=1)
    assert job["it_energy_kwh"] == pytest.approx(4 * 0.5 * hours)
    said = [n for n in rep.metadata["notes"] if "without an end on record" in n]
    assert said == (["1 run(s) ended (cancelled, failed or lost) without an end on record: "
                     "counted to their planned end"] if assumed else [])


def test_a_preemptible_jobs_pieces_keep_their_own_actual_hours_and_count_the_overhead(
        fx, shared_data):
    # J1 runs in two pieces (09:00-11:00, resumed 14:00-15:30 with 30 min restoring the
    # checkpoint); the backend ran piece 1 an hour late. J2 is whole.
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J1", "a", "de-site", "2023-07-03T09:00:00Z", "2023-07-03T11:00:00Z", 4, 0.5),
        ("J1", "a", "de-site", "2023-07-03T14:00:00Z", "2023-07-03T15:30:00Z", 4, 0.5),
        ("J2", "b", "de-site", "2023-07-03T12:00:00Z", "2023-07-03T13:00:00Z", 2, 0.5)])
    doc["workload"]["jobs"] = doc["workload"]["jobs"][1:]  # one record per job
    doc["placements"][0].update(piece=0, pieces=2)
    doc["placements"][1].update(piece=1, pieces=2, overhead_minutes=30)
    runs = pd.DataFrame({
        "job_id": ["J1", "J1"], "piece": [0, 1], "plan_id": [doc["plan_id"]] * 2,
        "site": ["de-site"] * 2,
        "actual_start": pd.to_datetime(["2023-07-03T09:00Z", "2023-07-03T15:00Z"], utc=True),
        "actual_end": pd.to_datetime(["2023-07-03T11:00Z", "2023-07-03T16:30Z"], utc=True),
        "backend": ["slurm:de"] * 2})
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       actual=runs, plans=[doc])
    j1 = rep.frames["jobs"].set_index("job_id").loc["J1"]
    # 2 h + 1.5 h at 4 GPUs: piece 0 keeps its hours, piece 1 its own (not piece 0's)
    assert j1["pieces"] == 2 and j1["gpu_h"] == pytest.approx(4 * 3.5)
    assert (j1["start"], j1["end"]) == ("2023-07-03T09:00:00Z", "2023-07-03T16:30:00Z")
    assert j1["it_energy_kwh"] == pytest.approx(4 * 0.5 * 3.5)
    # the overhead: 30 min x 4 GPUs x 0.5 kW = 1 kWh, named in the notes
    assert rep.totals["checkpoint_overhead_it_kwh"] == pytest.approx(1.0)
    assert ("1 resumed piece(s) of preemptible jobs spent 1.0 kWh of IT energy restoring "
            "checkpoints") in " | ".join(rep.metadata["notes"])
    assert rep.frames["jobs"].set_index("job_id").loc["J2", "pieces"] == 1
    # a piece that is not a whole number is refused, naming the job
    with pytest.raises(DataFormatError, match=r"job 'J1': piece 0.5 is not a whole number"):
        build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                     actual=runs.assign(piece=[0, 0.5]), plans=[doc])


def test_xlsx_times_are_excel_datetimes_under_utc_headers(hand_report):
    """Times in the XLSX are date-time cells (openpyxl reads datetimes), headed ``*_utc``."""
    import io
    from datetime import datetime

    import openpyxl

    wb = openpyxl.load_workbook(io.BytesIO(render(hand_report, "xlsx")))
    jobs = wb["jobs"]
    head = [c.value for c in jobs[1]]
    assert "start_utc" in head and "end_utc" in head and "start" not in head
    rows = {r[head.index("job_id")]: r for r in jobs.iter_rows(min_row=2, values_only=True)}
    assert rows["J-DE"][head.index("start_utc")] == datetime(2023, 7, 3, 10)
    assert rows["J-DE"][head.index("end_utc")] == datetime(2023, 7, 3, 14)
    assert jobs.cell(2, head.index("start_utc") + 1).number_format == "YYYY-MM-DD HH:MM:SS"
    hours = wb["site_hours"]
    hhead = [c.value for c in hours[1]]
    first = next(hours.iter_rows(min_row=2, values_only=True))
    assert hhead[1] == "hour_utc" and first[1] == datetime(2023, 7, 3, 0)
    summary = {(r[0], r[1]): r[2] for r in wb["summary"].iter_rows(min_row=2, values_only=True)}
    generated = summary[("provenance", "generated_at_utc")]
    assert isinstance(generated, datetime) and generated.tzinfo is None
    assert generated.strftime("%Y-%m-%dT%H:%M:%SZ") == (
        hand_report.metadata["provenance"]["generated_at"][:19] + "Z")


@pytest.mark.parametrize("values, converted", [
    (["2023-07-03T10:00:00Z", None, "2023-07-03T11:30:00+00:00"], True),   # UTC, a gap kept
    (["2023-07-03T10:00:00+02:00"], False),       # a local time is not written as UTC
    (["2023-07-03T10:00:00Z", "soon"], False),    # one value that is no time: text stays text
    (["2023-07-03"], False),                      # a day is not an instant
    ([None, None], False),
])
def test_excel_times_converts_only_utc_instants(values, converted):
    from carbonsched.report.render import excel_times

    out = excel_times(pd.DataFrame({"start": values}))
    assert list(out.columns) == (["start_utc"] if converted else ["start"])
    if converted:
        assert out["start_utc"].iloc[0] == pd.Timestamp("2023-07-03 10:00")
        assert pd.isna(out["start_utc"].iloc[1]) and out["start_utc"].dt.tz is None


def test_measured_energy_is_matched_by_site_and_shared_by_the_rows_of_one_hour(fx, shared_data,
                                                                               tmp_path):
    # J ran 10:00-10:30 at de-site and 10:30-11:00 at gb-site (two pieces), K one hour at
    # de-site in two pieces of 15 min: one telemetry row per job, site and hour. Each piece's
    # row gets its own site's measurement (before: both J rows got the first matching
    # telemetry row's), K's two rows share theirs (before: each got all of it)
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J", "a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T10:30:00Z", 1, 1.0),
        ("J", "a", "gb-site", "2023-07-03T10:30:00Z", "2023-07-03T11:00:00Z", 1, 1.0),
        ("K", "a", "de-site", "2023-07-03T12:00:00Z", "2023-07-03T12:15:00Z", 1, 1.0),
        ("K", "a", "de-site", "2023-07-03T12:45:00Z", "2023-07-03T13:00:00Z", 1, 1.0)])
    for i, p in enumerate(doc["placements"]):
        p["piece"] = i % 2
    doc["workload"]["jobs"] = [doc["workload"]["jobs"][0], doc["workload"]["jobs"][2]]
    tel = tmp_path / "tel.csv"
    tel.write_text("hour_utc,site,job_id,it_energy_kwh,source\n"
                   "2023-07-03T10:00:00Z,de-site,J,0.3,dcgm\n"
                   "2023-07-03T10:00:00Z,gb-site,J,0.7,dcgm\n"
                   "2023-07-03T12:00:00Z,de-site,K,0.8,dcgm\n"
                   "2023-07-03T12:00:00Z,gb-site,K,5.0,dcgm\n")
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       telemetry=tel, plans=[doc])
    jobs = rep.frames["jobs"].set_index("job_id")
    assert jobs.loc["J", "it_energy_kwh"] == pytest.approx(1.0)
    assert jobs.loc["K", "it_energy_kwh"] == pytest.approx(0.8)
    assert (jobs.loc["J", "site"], jobs.loc["K", "site"]) == ("de-site, gb-site", "de-site")
    assert rep.totals["it_energy_kwh"] == pytest.approx(1.8)
    sites = rep.frames["sites"].set_index("site")
    assert sites.loc["gb-site", "it_energy_kwh"] == pytest.approx(0.7)
    # K never ran at gb-site: that row matches nothing
    assert "1 telemetry row(s) match no job, site and hour" in " | ".join(rep.metadata["notes"])


def test_telemetry_of_one_job_site_and_hour_given_twice_is_refused(fx, shared_data, tmp_path):
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J", "a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T11:00:00Z", 1, 1.0)])
    tel = tmp_path / "tel.csv"
    head = "hour_utc,site,job_id,it_energy_kwh,source\n2023-07-03T10:00:00Z,de-site,J,0.3,x\n"
    tel.write_text(head + "2023-07-03T10:00:00Z,de-site,J,0.4,x\n")
    with pytest.raises(InputError, match="line 3: job 'J' at de-site hour .* given twice"):
        build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                     telemetry=tel, plans=[doc])
    # just at the limit: the same job and hour at another site is two rows, both read
    tel.write_text(head + "2023-07-03T10:00:00Z,gb-site,J,0.4,x\n")
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       telemetry=tel, plans=[doc])
    assert rep.totals["it_energy_kwh"] == pytest.approx(0.3)


@pytest.mark.parametrize(("ran_from", "hours"), [
    (None, ("2023-07-04T03:00:00Z", "2023-07-04T05:00:00Z")),   # not dispatched: the newest
    ("first", ("2023-07-03T22:00:00Z", "2023-07-04T00:00:00Z")),  # dispatched from day 1's
])
def test_a_job_placed_by_two_of_the_periods_plans_is_counted_once(fx, shared_data, ran_from,
                                                                   hours):
    # J1's window spans two days: day 1's plan places it 22:00-24:00, day 2's (which re-plans
    # it, e.g. an API job still Planned) 03:00-05:00. It runs once; K only on day 2 (at the
    # limit: one plan, kept). Before, both J1 placements were counted (4 GPU-h, not 2 x 4 x 2)
    d1 = plan_doc("2023-07-03", "two-markets", [
        ("J1", "a", "de-site", "2023-07-03T22:00:00Z", "2023-07-04T00:00:00Z", 4, 0.5)],
        baseline=[("J1", "a", "de-site", "2023-07-03T20:00:00Z", "2023-07-03T22:00:00Z", 4,
                   0.5)])
    d2 = plan_doc("2023-07-04", "two-markets", [
        ("J1", "a", "de-site", "2023-07-04T03:00:00Z", "2023-07-04T05:00:00Z", 4, 0.5),
        ("K", "a", "de-site", "2023-07-04T06:00:00Z", "2023-07-04T07:00:00Z", 2, 0.5)],
        baseline=[("J1", "a", "de-site", "2023-07-04T00:00:00Z", "2023-07-04T02:00:00Z", 4,
                   0.5),
                  ("K", "a", "de-site", "2023-07-04T00:00:00Z", "2023-07-04T01:00:00Z", 2,
                   0.5)])
    actual = None
    if ran_from:
        actual = pd.DataFrame({"job_id": ["J1"], "plan_id": [d1["plan_id"]],
                               "site": ["de-site"],
                               "actual_start": [pd.Timestamp("2023-07-03T22:00Z")],
                               "actual_end": [pd.Timestamp("2023-07-04T00:00Z")],
                               "backend": ["slurm:de"]})
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-04",
                       plans=[d1, d2], actual=actual)
    jobs = rep.frames["jobs"].set_index("job_id")
    assert list(jobs.index).count("J1") == 1
    assert (jobs.loc["J1", "start"], jobs.loc["J1", "end"]) == hours
    assert jobs.loc["J1", "plan_id"] == (d1 if ran_from else d2)["plan_id"]
    # J1 4 GPUs x 2 h + K 2 GPUs x 1 h, at 0.5 kW per GPU
    assert rep.totals["it_energy_kwh"] == pytest.approx(0.5 * (4 * 2 + 2 * 1))
    assert ("1 job(s) placed by more than one of the period's plans counted once, from the "
            "plan dispatch ran them from, else the newest whose placement was still in force "
            "at its start: J1") in rep.metadata["notes"]


def test_a_job_dispatched_but_not_started_is_counted_from_the_plan_it_was_dispatched_from(
        fx, shared_data, tmp_path):
    # J1 in two days' plans; the outbox holds J1#0 from day 1's plan, submitted and not
    # started: counted from day 1's plan (its planned hours), not from the newest
    d1 = plan_doc("2023-07-03", "two-markets", [
        ("J1", "a", "de-site", "2023-07-03T22:00:00Z", "2023-07-04T00:00:00Z", 4, 0.5)])
    d2 = plan_doc("2023-07-04", "two-markets", [
        ("J1", "a", "de-site", "2023-07-04T03:00:00Z", "2023-07-04T05:00:00Z", 4, 0.5)])
    store = _store_with_outbox_row(tmp_path, [d1, d2], d1["plan_id"], "Dispatched",
                                   ("2023-07-03T22:00Z", "2023-07-04T00:00Z"))
    rep = build_report(store, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-04")
    jobs = rep.frames["jobs"].set_index("job_id")
    assert list(jobs.index) == ["J1"] and jobs.loc["J1", "plan_id"] == d1["plan_id"]
    assert (jobs.loc["J1", "start"], jobs.loc["J1", "hours_basis"]) == (
        "2023-07-03T22:00:00Z", "planned")
