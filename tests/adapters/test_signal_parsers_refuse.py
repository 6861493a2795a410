"""Parsers that refuse what they cannot read (issue 32 item 9).

Each rule has a known-bad case and a just-at-the-limit case. Payloads come from the loopback
replay server (real shared-data values reshaped into the provider's schema), from small fixtures
written by hand (``tests/fixtures/signals``), or from real files in ``../shared/data`` rewritten
into ``tmp_path`` (never into the repository).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from replay_server import EIA_KEY, ReplayServer, ReplayState

from carbonsched.adapters.http import Fetcher, RetryPolicy, make_client
from carbonsched.adapters.signals import load_site_signals, read_electricitymaps, read_prices
from carbonsched.adapters.signals.dacf import direct_ci_from_mix, read_dacf_mix
from carbonsched.adapters.signals.eia930 import read_eia930
from carbonsched.adapters.signals.eia_api import get_eia_api, read_eia_api
from carbonsched.adapters.signals.entsoe_api import get_entsoe, read_entsoe_generation
from carbonsched.adapters.signals.providers import EUR_TO_USD_2023, ProviderSpec
from carbonsched.adapters.signals.quality import (
    CI_RANGE_G_PER_KWH,
    DST_SHIFT_MAX_H,
    MAX_BAD_ROW_SHARE,
    check_time_zone,
)
from carbonsched.adapters.signals.registry import clear_cache
from carbonsched.catalog import load_catalog
from carbonsched.errors import DataFormatError, ProviderError

UTC = "UTC"
HOUR = pd.Timedelta(hours=1)
EM_HEADER = ("Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
             "Carbon Intensity gCO₂eq/kWh (LCA),Renewable Percentage,Data Estimated")


@pytest.fixture(scope="module")
def replay(shared_data):
    with ReplayServer(ReplayState(shared_data)) as server:
        yield server


@pytest.fixture
def state(replay):
    st = replay.state
    yield st
    st.faults.clear()
    st.hits.clear()
    st.eia_page_rows = 1000
    for attr in ("entsoe_hourly_psr", "entsoe_drop"):
        if hasattr(st, attr):
            delattr(st, attr)


# --------------------------------------------------------------------- ENTSO-E: mixed resolution
JULY = pd.Timestamp("2021-07-01", tz=UTC), pd.Timestamp("2021-07-04", tz=UTC)


def entsoe(replay):
    spec = ProviderSpec("entsoe", "entsoe", replay.url + "/api",
                        {"timeout_s": 60.0, "max_attempts": 1})
    return get_entsoe(spec, "entsoe-test-key", "DE_LU", "carbon_intensity", *JULY,
                      EUR_TO_USD_2023)


@pytest.mark.shared_data
def test_entsoe_fuels_at_15_minutes_and_hourly_give_the_full_mix(replay, state, shared_data):
    """Known bad: nuclear, coal, gas, oil and unknown hourly, renewables every 15 minutes. Each
    type averaged on its own resolution gives exactly the hourly mix's intensity (resampled
    together, the hourly types vanish and the intensity is about 0)."""
    state.entsoe_hourly_psr = {"B14", "B05", "B04", "B06", "B20"}
    frame, meta = entsoe(replay)
    mix, _ = read_dacf_mix(shared_data / "dacf" / "DE_2019_clean.csv")
    ref = direct_ci_from_mix(mix.loc[JULY[0]:JULY[1] - HOUR])
    assert len(frame) == 72 and frame["carbon_intensity_g_per_kwh"].notna().all()
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"], ref, rtol=1e-9)
    assert ref.min() > 100  # the fossil share matters: 0 would be far off
    assert any(n.startswith("mixed resolutions") for n in meta["notes"])
    assert any(n.startswith("5 production type(s) at 60 min (") for n in meta["notes"])


@pytest.mark.shared_data
def test_entsoe_hour_without_a_published_fuel_stays_a_gap(replay, state, shared_data):
    """Known bad: hard coal (hourly) leaves out one hour: that hour has no intensity (NaN,
    counted), never the intensity of the other fuels; the hours around it are exact."""
    gap = pd.Timestamp("2021-07-02T13:00", tz=UTC)
    state.entsoe_hourly_psr = {"B05"}
    state.entsoe_drop = {"B05": [gap]}
    frame, meta = entsoe(replay)
    mix, _ = read_dacf_mix(shared_data / "dacf" / "DE_2019_clean.csv")
    ref = direct_ci_from_mix(mix.loc[JULY[0]:JULY[1] - HOUR])
    ci = frame["carbon_intensity_g_per_kwh"]
    assert math.isnan(ci.loc[gap]) and math.isnan(frame["renewable_pct"].loc[gap])
    np.testing.assert_allclose(ci.drop(gap), ref.drop(gap), rtol=1e-9)
    assert meta["n_incomplete_hours"] == 1
    assert any(n.startswith("1 hour(s) without every production type (first "
                            "2021-07-02T13:00:00+00:00: Fossil Hard coal missing)")
               for n in meta["notes"]), meta["notes"]


def test_entsoe_quarter_hours_at_the_coverage_limit():
    """Just at the limit: 2 of 4 quarter-hours of solar keep the hour (their mean); 1 of 4 makes
    the hour a gap, and with it the mix."""
    idx = pd.date_range("2023-05-01T00:00", periods=12, freq="15min", tz=UTC)
    solar = pd.Series([100.0] * 4 + [200.0, np.nan, 300.0, np.nan] + [50.0] + [np.nan] * 3,
                      index=idx)
    gas = pd.Series(np.nan, index=idx)
    gas.iloc[[0, 4, 8]] = 300.0  # hourly
    frame, meta = read_entsoe_generation(pd.DataFrame({"Solar": solar, "Fossil Gas": gas}))
    ci = frame["carbon_intensity_g_per_kwh"]
    assert ci.iloc[0] == pytest.approx(370 * 300 / 400)
    assert ci.iloc[1] == pytest.approx(370 * 300 / 550)  # solar mean of 200 and 300
    assert math.isnan(ci.iloc[2])
    assert meta["n_incomplete_hours"] == 1


def test_entsoe_resolution_that_does_not_divide_an_hour_is_refused():
    idx = pd.date_range("2023-05-01", periods=4, freq="40min", tz=UTC)
    with pytest.raises(ProviderError, match=r"'Solar': points every 0 days 00:40:00 do not "
                       "divide an hour"):
        read_entsoe_generation(pd.DataFrame({"Solar": [1.0, 2, 3, 4]}, index=idx))


# --------------------------------------------------------------------- EIA v2 pages
WEEK = pd.Timestamp("2022-06-01", tz=UTC), pd.Timestamp("2022-06-08", tz=UTC)


def eia(replay):
    return Fetcher("eia", make_client(replay.url), RetryPolicy(max_attempts=1))


@pytest.mark.shared_data
def test_eia_pages_cut_inside_an_hour_are_read_in_a_stable_order(replay, state, shared_data):
    """Known bad: 500 rows a page cut an hour's eight fuel rows in two, and the server orders
    rows it was not asked to order differently on every request. A stable (total) sort reads
    each row once: the values equal the file."""
    state.eia_page_rows = 500
    f = eia(replay)
    frame, meta = get_eia_api(f, EIA_KEY, "PJM", *WEEK)
    # the week and the week before it (FUEL_LOOKBACK): 2 x 168 h x 8 fuels = 2688 rows
    assert meta["requests"] == 6 == state.hits["eia"]
    ref, _ = read_eia930(shared_data / "eia930-sustaindc" / "PJM_NG_avgCI_2022.csv")
    ref = ref.loc[WEEK[0]:WEEK[1] - HOUR]
    for c in ("carbon_intensity_g_per_kwh", "generation_ng_mw", "generation_nuc_mw"):
        np.testing.assert_allclose(frame[c], ref[c], rtol=1e-6)


@pytest.mark.shared_data
def test_eia_total_read_exactly_at_a_page_boundary(replay, state):
    """Just at the limit: 2688 rows (the week and the week before) in four pages of 672: four
    requests, no fifth."""
    state.eia_page_rows = 672
    frame, meta = get_eia_api(eia(replay), EIA_KEY, "PJM", *WEEK)
    assert meta["requests"] == 4 and len(frame) == 168


@pytest.mark.shared_data
def test_eia_repeat_with_another_value_is_refused_not_summed(replay, state):
    state.faults["eia"] = "conflict"
    with pytest.raises(ProviderError, match=r"period 2022-0[56]-\d\dT\d\d respondent PJM fuel \w+ "
                       r"answered twice with different values, '[\d.]+' and '[\d.]+' "
                       r"\(pages 1 and 2\); refusing to sum"):
        get_eia_api(eia(replay), EIA_KEY, "PJM", *WEEK)


@pytest.mark.shared_data
def test_eia_empty_page_before_the_total_is_a_short_read(replay, state):
    state.faults["eia"] = "short"
    with pytest.raises(ProviderError, match=r"PJM: short read: page 2 \(offset 1000\) is empty "
                       r"but the answer states 2688 rows; 1000 read"):
        get_eia_api(eia(replay), EIA_KEY, "PJM", *WEEK)


def test_eia_identical_repeat_is_dropped_and_counted():
    rows = [{"period": "2022-01-01T01", "respondent": "X", "fueltype": f, "value": v,
             "value-units": "megawatthours"} for f, v in
            (("NG", "100"), ("SUN", "0"), ("WND", "100"), ("WAT", "0"), ("OIL", "0"),
             ("COL", "0"), ("NUC", "0"), ("OTH", "0"))]
    frame, meta = read_eia_api(rows + [dict(rows[0], value="100.0")], "X")
    assert frame["generation_ng_mw"].iloc[0] == 100.0  # not 200
    assert "1 identical repeated row(s) dropped" in meta["notes"]
    with pytest.raises(ProviderError, match=r"fuel NG answered twice with different values, "
                       r"'100' and '101' \(rows 1 and 9\)"):
        read_eia_api(rows + [dict(rows[0], value="101")], "X")


# --------------------------------------------------------------------- units of a CSV
def em_rows(values, start="2023-01-01 00:00"):
    idx = pd.date_range(start, periods=len(values), freq="h")
    return [f"{t:%Y-%m-%d %H:%M:%S},TZ,{v},{v},20,false" for t, v in zip(idx, values,
                                                                       strict=True)]


def test_carbon_intensity_at_the_top_of_the_range_is_kept_and_above_it_quarantined(tmp_path):
    """At the limit: 1,500 g/kWh is read; 1,500.5 on one row of 100 (under the 2 % share) is
    quarantined with its line and value."""
    values = [300.0] * 100
    values[10], values[20] = CI_RANGE_G_PER_KWH[1], 1500.5
    p = tmp_path / "TZ_2023_hourly.csv"
    p.write_text(EM_HEADER + "\n" + "\n".join(em_rows(values)) + "\n", encoding="utf-8")
    data, meta = read_electricitymaps(p)
    ci = data["carbon_intensity_g_per_kwh"]
    assert ci.iloc[10] == 1500.0 and math.isnan(ci.iloc[20])
    (q, *_) = meta["quarantined"]
    assert q["line"] == 22 and q["reason"] == (
        "implausible carbon intensity: Carbon Intensity gCO₂eq/kWh (direct) = 1500.5 g/kWh on "
        "line 22, above the physical range 0..1500")


@pytest.mark.shared_data
def test_a_file_in_lbs_per_mwh_is_refused_naming_rows_and_values(tmp_path, shared_data):
    """Known bad: the real ZA 2023 file written in lbs/MWh (x 2.2046): refused, not read as
    2.2 times the emissions."""
    src = shared_data / "sustain-cluster" / "carbon_intensity" / "ZA_2023_hourly.csv"
    rows = list(csv.reader(src.open(encoding="utf-8")))
    head, body = rows[0], rows[1:]
    ci = [head.index("Carbon Intensity gCO₂eq/kWh (direct)"),
          head.index("Carbon Intensity gCO₂eq/kWh (LCA)")]
    for r in body:
        for i in ci:
            r[i] = f"{float(r[i]) / 0.45359237:.2f}"
    p = tmp_path / "ZA_2023_hourly.csv"
    with p.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([head, *body])
    with pytest.raises(DataFormatError) as err:
        read_electricitymaps(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}, line ")
    assert "column 'Carbon Intensity gCO₂eq/kWh (direct)': " in msg
    assert "rows (" in msg and "above 1500 g/kWh, the physical range of a grid's carbon " \
                               "intensity (0..1500); first line " in msg
    assert "the file looks like lbs/MWh" in msg
    share = float(msg.split("rows (")[1].split("%")[0]) / 100
    assert share > MAX_BAD_ROW_SHARE


# --------------------------------------------------------------------- headers: one alias table
def test_the_data_portals_later_header_names_fill_the_same_columns(fixtures_dir):
    data, meta = read_electricitymaps(fixtures_dir / "signals" / "em_portal_headers.csv")
    assert data["carbon_intensity_lca_g_per_kwh"].tolist() == [170.25, 171.25, 172.25]
    assert data["low_carbon_pct"].tolist() == [55.5, 56.5, 57.5]
    assert data["renewable_pct"].tolist() == [35.25, 36.25, 37.25]
    assert data["carbon_intensity_estimated"].tolist() == [False, True, False]
    assert meta["zone_id"] == "TZ" and not any("left NaN" in n for n in meta["notes"])


def test_a_header_differing_in_case_spacing_and_subscript_is_the_same(tmp_path):
    """Just at the limit: ``carbon  intensity gCO2eq/kwh (DIRECT)`` is the direct column."""
    p = tmp_path / "TZ_2023_hourly.csv"
    p.write_text("datetime (utc),zone id,carbon  intensity gCO2eq/kwh (DIRECT),data estimated\n"
                 "2023-01-01 00:00:00,TZ,123.5,false\n", encoding="utf-8")
    data, _ = read_electricitymaps(p)
    assert data["carbon_intensity_g_per_kwh"].tolist() == [123.5]


def test_an_unknown_header_fails_loudly_naming_it_and_the_known_ones(tmp_path):
    """Known bad: a renamed column the table does not know is refused (it used to be read as a
    column of NaN, with only a note)."""
    p = tmp_path / "TZ_2023_hourly.csv"
    p.write_text(EM_HEADER.replace("(LCA)", "(Lebenszyklus)") + "\n"
                 "2023-01-01 00:00:00,TZ,100,120,20,false\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_electricitymaps(p)
    msg = str(err.value)
    assert err.value.row == 1
    assert ("unknown column(s) 'Carbon Intensity gCO₂eq/kWh (Lebenszyklus)' for a "
            "electricitymaps file; known columns: 'Datetime (UTC)', ") in msg
    assert "'Carbon intensity gCO₂eq/kWh (Life cycle)'" in msg
    assert "add the new spelling to HEADER_ALIASES" in msg
    q = tmp_path / "Z_electricity_prices_2023.csv"
    q.write_text("Datetime (UTC),Price (EUR/MWh)\n2023-01-01 00:00:00+00:00,1\n")
    with pytest.raises(DataFormatError, match=r"missing column\(s\) price_usd_per_mwh .*; "
                       r"unknown column\(s\) 'Price \(EUR/MWh\)' for a prices file"):
        read_prices(q)


# --------------------------------------------------------------------- time zone of a CSV
CATALOG = load_catalog("global")


def relabel(src: Path, dst: Path, tz: str, clean: bool = False, dst_shift_only: bool = False):
    """Write ``src`` with its UTC stamps relabelled as ``tz`` wall-clock time (naive).

    ``clean``: drop the repeated autumn hour and fill the skipped spring hour with the row
    before it, as a careful exporter would (no DST fingerprint left). ``dst_shift_only``:
    label = UTC + 1 h during daylight-saving time, UTC otherwise (a DST-shaped shift).
    """
    rows = list(csv.reader(src.open(encoding="utf-8")))
    head, body = rows[0], rows[1:]
    ts = pd.to_datetime([r[0] for r in body], utc=True)
    loc = ts.tz_convert(tz)
    if dst_shift_only:
        dst_on = np.array([t.dst() != pd.Timedelta(0) for t in loc])
        labels = ts.tz_localize(None) + pd.to_timedelta(dst_on.astype(int), unit="h")
    else:
        labels = loc.tz_localize(None)
    out, seen, prev = [], set(), None
    for r, lab in zip(body, labels, strict=True):
        if clean and prev is not None and lab - prev == 2 * HOUR:
            out.append([(prev + HOUR).strftime("%Y-%m-%d %H:%M:%S"), *out[-1][1:]])
        if clean and lab in seen:
            continue
        seen.add(lab)
        prev = lab
        out.append([lab.strftime("%Y-%m-%d %H:%M:%S"), *r[1:]])
    dst.parent.mkdir(parents=True, exist_ok=True)
    with dst.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([head, *out])
    return dst


@pytest.mark.shared_data
def test_local_wall_clock_time_under_a_utc_header_is_refused(tmp_path, shared_data):
    """Known bad: the real GB 2023 file written in London wall-clock time under its UTC
    header: the hour London skips is missing, the hour it repeats appears twice."""
    clear_cache()
    src = shared_data / "sustain-cluster" / "carbon_intensity" / "GB_2023_hourly.csv"
    p = relabel(src, tmp_path / "sustain-cluster" / "carbon_intensity" / "GB_2023_hourly.csv",
                "Europe/London")
    with pytest.raises(DataFormatError) as err:
        load_site_signals(CATALOG.site("gb-london"), tmp_path, "2023-07-01T00:00Z",
                          "2023-07-02T00:00Z")
    msg = str(err.value)
    assert msg.startswith(f"{p}, line 7227: the timestamps look like local wall-clock time "
                          "(Europe/London) under a UTC header")
    assert "hour 2023-03-26T01:00:00+00:00 missing where Europe/London skips 2023-03-26 01:00" \
        in msg
    assert "hour 2023-10-29T01:00:00+00:00 twice (line 7227 repeats it) where Europe/London " \
           "repeats 2023-10-29 01:00" in msg


@pytest.mark.shared_data
def test_one_dst_shaped_gap_alone_is_read_as_utc_with_a_note(tmp_path, shared_data):
    """Just at the limit: a UTC file missing only the hour of the spring change (one of its two
    changes) is read, and the plan's notes say what was seen."""
    clear_cache()
    src = shared_data / "sustain-cluster" / "carbon_intensity" / "GB_2023_hourly.csv"
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [ln for ln in lines if not ln.startswith("2023-03-26 01:00:00")]
    assert len(kept) == len(lines) - 1
    dst = tmp_path / "sustain-cluster" / "carbon_intensity" / "GB_2023_hourly.csv"
    dst.parent.mkdir(parents=True)
    dst.write_text("".join(kept), encoding="utf-8")
    frame, meta = load_site_signals(CATALOG.site("gb-london"), tmp_path, "2023-03-26T00:00Z",
                                    "2023-03-27T00:00Z")
    assert math.isnan(frame["carbon_intensity_g_per_kwh"].iloc[1])
    assert any("GB_2023_hourly.csv: hour 2023-03-26T01:00:00+00:00 missing where "
               "Europe/London skips 2023-03-26 01:00: one of the 2 daylight-saving changes"
               in n for n in meta["notes"]), meta["notes"]


@pytest.mark.shared_data
def test_a_dst_shaped_one_hour_shift_of_a_solar_zone_is_refused(tmp_path, shared_data):
    """Known bad: the real CISO 2023 file shifted by one hour in daylight-saving time only,
    cleaned of any gap or repeat: the sun-driven renewable share peaks ~0.76 h later in summer
    than in winter (the real file: -0.24 h)."""
    src = shared_data / "sustain-cluster" / "carbon_intensity" / "US-CAL-CISO_2023_hourly.csv"
    p = relabel(src, tmp_path / "CISO.csv", "America/Los_Angeles", clean=True,
                dst_shift_only=True)
    frame, meta = read_electricitymaps(p)
    assert meta["repeated_hours"] == [] and meta["inserted_hours"] == []  # no fingerprint
    with pytest.raises(DataFormatError, match=r"renewable_pct peaks 0\.\d\d h later in "
                       r"daylight-saving time \(\d\d:\d\d UTC over \d+ rows from .*the sun keeps "
                       r"no daylight-saving time \(at most 0\.4 h allowed\)"):
        check_time_zone(frame, meta, p, "America/Los_Angeles", -121.89)
    good, gmeta = read_electricitymaps(src)
    assert check_time_zone(good, gmeta, src, "America/Los_Angeles", -121.89) == []


@pytest.mark.parametrize("shift_h, refused", [(DST_SHIFT_MAX_H - 0.01, False),
                                              (DST_SHIFT_MAX_H + 0.01, True)])
def test_dst_shaped_shift_at_the_limit(tmp_path, shift_h, refused):
    """A written sun-driven share peaking exactly at solar noon in winter and ``shift_h`` later
    in summer: just inside the limit it is read, just outside refused."""
    lon = -118.25
    idx = pd.date_range("2023-01-01", "2024-01-01", freq="h", tz=UTC, inclusive="left")
    noon = 12.0 - lon / 15.0
    dst_on = np.array([t.dst() != pd.Timedelta(0) for t in idx.tz_convert("America/Los_Angeles")])
    peak = noon + np.where(dst_on, shift_h, 0.0)
    share = 40.0 + 20.0 * np.cos(2 * np.pi * (idx.hour - peak) / 24.0)
    frame = pd.DataFrame({"renewable_pct": share}, index=idx)
    stamps = {"repeated_hours": [], "repeated_lines": [], "inserted_hours": []}
    if refused:
        with pytest.raises(DataFormatError, match=rf"peaks {shift_h:.2f} h later"):
            check_time_zone(frame, stamps, tmp_path / "x.csv", "America/Los_Angeles", lon)
    else:
        assert check_time_zone(frame, stamps, tmp_path / "x.csv", "America/Los_Angeles",
                               lon) == []


@pytest.mark.shared_data
def test_a_constant_local_offset_of_a_solar_zone_is_refused(tmp_path, shared_data):
    """Known bad: the real JP-TK 2022 file in Tokyo time (UTC+9, no DST, so no fingerprint):
    its renewable share peaks 9 h from solar noon."""
    src = shared_data / "sustain-cluster" / "carbon_intensity" / "JP-TK_2022_hourly.csv"
    p = relabel(src, tmp_path / "JP.csv", "Asia/Tokyo")
    frame, meta = read_electricitymaps(p)
    with pytest.raises(DataFormatError, match=r"renewable_pct peaks at 11:\d\d UTC on average in "
                       r"the file \(8760 hourly rows from 2022-01-01T09:00:00\+00:00 .*\+8\.\d h "
                       r"from the site's solar noon \(02:4\d UTC at longitude 139.807°\).*look "
                       r"shifted \(local time under a UTC header\?\)"):
        check_time_zone(frame, meta, p, "Asia/Tokyo", 139.807)


def test_a_feed_in_lbs_per_mwh_is_refused_and_its_scale_reads_it():
    """The generic feed: a carbon intensity in lbs/MWh (known bad) is refused; the same feed
    with its declared ``scale`` (lbs/MWh -> g/kWh) is read; 1,500 g/kWh is at the limit."""
    from carbonsched.adapters.signals.http_feed import FeedSpec, read_http_feed

    body = "time,ci\n" + "".join(f"2023-01-01T{h:02d}:00Z,{1650 + h}\n" for h in range(24))
    spec = FeedSpec("feed", "/", columns={"carbon_intensity_g_per_kwh": "ci"})
    with pytest.raises(ProviderError, match=r"feed: carbon_intensity_g_per_kwh: 24 of 24 hours "
                       r"outside the physical range 0..1500 g/kWh \(first "
                       r"2023-01-01T00:00:00\+00:00: 1650"):
        read_http_feed(body, spec)
    scaled = FeedSpec("feed", "/", columns={"carbon_intensity_g_per_kwh": "ci"},
                      scale={"carbon_intensity_g_per_kwh": 0.45359237})
    frame, _ = read_http_feed(body, scaled)
    assert frame["carbon_intensity_g_per_kwh"].iloc[0] == pytest.approx(1650 * 0.45359237)
    edge = "time,ci\n" + "".join(f"2023-01-01T{h:02d}:00Z,{1500 if h == 0 else 300}\n"
                                 for h in range(24))
    frame, meta = read_http_feed(edge, spec)
    assert frame["carbon_intensity_g_per_kwh"].iloc[0] == 1500.0 and meta["notes"] == []
