"""read_eia930: CI from the mix, rules for negative, missing and incomplete generation."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.signals import read_eia930
from carbonsched.adapters.signals.eia930 import DIRECT_FACTORS_G_PER_KWH
from carbonsched.errors import DataFormatError

# row 00:00 of eia930_small.csv: WND 100 SUN 0 WAT 200 OIL 10 NG 500 COL 150 NUC 300 OTH 40
TOTAL = 1300.0
DIRECT = (10 * 406 + 500 * 370 + 150 * 760 + 40 * 575) / TOTAL  # 250.815...
LCA = (100 * 11 + 200 * 24 + 10 * 650 + 500 * 490 + 150 * 820 + 300 * 12 + 40 * 230) / TOTAL


def test_small_fixture(fixtures_dir: Path) -> None:
    data, meta = read_eia930(fixtures_dir / "signals" / "eia930_small.csv")
    assert list(data.index) == list(pd.date_range("2022-06-01", periods=7, freq="h", tz="UTC"))
    r0 = data.iloc[0]
    assert r0["carbon_intensity_g_per_kwh"] == pytest.approx(250.8153846, abs=1e-6)
    assert r0["carbon_intensity_g_per_kwh"] == pytest.approx(DIRECT)
    assert r0["carbon_intensity_lca_g_per_kwh"] == pytest.approx(LCA)
    assert r0["renewable_pct"] == pytest.approx(300 / 13)
    assert r0["low_carbon_pct"] == pytest.approx(600 / 13)
    assert r0["generation_total_mw"] == TOTAL
    assert not r0["carbon_intensity_estimated"]
    # 01:00: SUN -20 is invalid, not zero: the hour's mix is NaN; the raw column keeps -20
    r1 = data.iloc[1]
    assert math.isnan(r1["carbon_intensity_g_per_kwh"])
    assert math.isnan(r1["renewable_pct"]) and math.isnan(r1["generation_total_mw"])
    assert r1["generation_sun_mw"] == -20.0
    assert meta["n_invalid_negative"] == 1
    # 02:00 empty row, 03:00 hydro missing, 04:00 absent hour: all NaN, never 0
    for i in (2, 3, 4):
        assert math.isnan(data["carbon_intensity_g_per_kwh"].iloc[i])
        assert math.isnan(data["renewable_pct"].iloc[i])
    # 05:00: total 2 MW vs a median of 1150 MW -> incomplete report
    assert math.isnan(data["carbon_intensity_g_per_kwh"].iloc[5])
    assert meta["n_incomplete"] == 1
    # 06:00: hydro only
    r6 = data.iloc[6]
    assert r6["carbon_intensity_g_per_kwh"] == 0.0
    assert r6["carbon_intensity_lca_g_per_kwh"] == 24.0
    assert r6["renewable_pct"] == 100.0 and r6["low_carbon_pct"] == 100.0
    notes = " | ".join(meta["notes"])
    assert ("1 hour(s) with negative generation ({'SUN': 1}): mix invalid, CI and shares NaN "
            "(first 2022-06-01T01:00:00+00:00: SUN -20 MW)") in notes
    assert "1 hour(s) with some fuels missing: CI and shares NaN" in notes
    assert "below 5% of the median (1000 MW)" in notes  # the invalid hour is not counted
    assert "1 missing hour(s) inserted as NaN, first 2022-06-01T04:00:00+00:00" in notes


def test_custom_factors_and_missing_factor(fixtures_dir: Path) -> None:
    coal_only = {k: 0.0 for k in DIRECT_FACTORS_G_PER_KWH} | {"COL": 1000.0}
    data, meta = read_eia930(fixtures_dir / "signals" / "eia930_small.csv", factors=coal_only)
    assert data["carbon_intensity_g_per_kwh"].iloc[0] == pytest.approx(150_000 / TOTAL)
    assert meta["factors"]["COL"] == 1000.0
    with pytest.raises(KeyError, match=r"factors lack fuel code\(s\) \['OTH'\]"):
        read_eia930(fixtures_dir / "signals" / "eia930_small.csv",
                    factors={k: v for k, v in DIRECT_FACTORS_G_PER_KWH.items() if k != "OTH"})


def test_naive_timestamp_refused(tmp_path: Path) -> None:
    p = tmp_path / "X_NG_avgCI_2022.csv"
    p.write_text("timestamp,WND,SUN,WAT,OIL,NG,COL,NUC,OTH\n2022-01-01 00:00:00,1,1,1,1,1,1,1,1\n")
    with pytest.raises(DataFormatError) as err:
        read_eia930(p)
    assert err.value.row == 2
    assert "is naive (no time zone)" in str(err.value)


def test_mdy_with_utc_header_accepted(tmp_path: Path) -> None:
    p = tmp_path / "X.csv"
    p.write_text("UTC time,WND,SUN,WAT,OIL,NG,COL,NUC,OTH\n"
                 "01/02/2022 03:00:00,0,0,0,0,100,0,0,0\n")
    data, _ = read_eia930(p)
    assert data.index[0] == pd.Timestamp("2022-01-02 03:00", tz="UTC")
    assert data["carbon_intensity_g_per_kwh"].iloc[0] == 370.0


def test_missing_fuel_column(tmp_path: Path) -> None:
    p = tmp_path / "X.csv"
    p.write_text("timestamp,WND,SUN,WAT,OIL,NG,COL,NUC\n2022-01-01 00:00:00+00:00,1,1,1,1,1,1,1\n")
    with pytest.raises(DataFormatError, match=r"line 1: missing column\(s\) generation_oth_mw"):
        read_eia930(p)


def test_bad_number(tmp_path: Path) -> None:
    p = tmp_path / "X.csv"
    p.write_text("timestamp,WND,SUN,WAT,OIL,NG,COL,NUC,OTH\n"
                 "2022-01-01 00:00:00+00:00,1,1,1,1,1,1,1,1\n"
                 "2022-01-01 01:00:00+00:00,1,1,1,1,1.2.3,1,1,1\n")
    with pytest.raises(DataFormatError, match=r"line 3: column 'NG': cannot read '1.2.3'"):
        read_eia930(p)


# ------------------------------------------------------------------ real data
@pytest.mark.shared_data
def test_real_ciso_first_row_by_hand(shared_data: Path) -> None:
    data, meta = read_eia930(shared_data / "eia930-sustaindc" / "CISO_NG_avgCI_2022.csv")
    assert len(data) == 8760
    # line 2: WND 3130 SUN 1367 WAT 2304 OIL 44 NG 6764 COL 19 NUC 2265 OTH 189
    total = 3130 + 1367 + 2304 + 44 + 6764 + 19 + 2265 + 189
    assert total == 16082
    direct = (44 * 406 + 6764 * 370 + 19 * 760 + 189 * 575) / total
    r = data.iloc[0]
    assert r["carbon_intensity_g_per_kwh"] == pytest.approx(direct)
    assert r["carbon_intensity_g_per_kwh"] == pytest.approx(164.3862, abs=1e-4)
    # the file's own avg_CI on that line (life-cycle factors)
    assert r["carbon_intensity_lca_g_per_kwh"] == pytest.approx(222.29592090536002, abs=1e-9)
    assert r["renewable_pct"] == pytest.approx(100 * 6801 / total)
    assert r["low_carbon_pct"] == pytest.approx(100 * 9066 / total)
    # our life-cycle recomputation reproduces avg_CI on every hour
    assert meta["file_avg_ci_max_abs_diff_g_per_kwh"] < 1e-9
    # three empty hours stay NaN
    assert int(data["carbon_intensity_g_per_kwh"].isna().sum()) == 3
    assert math.isnan(data.loc["2022-01-05 10:00+00:00", "carbon_intensity_g_per_kwh"])


@pytest.mark.shared_data
def test_real_pjm_incomplete_hours_and_waat_unnamed_index(shared_data: Path) -> None:
    data, meta = read_eia930(shared_data / "eia930-sustaindc" / "PJM_NG_avgCI_2022.csv")
    assert meta["n_incomplete"] == 5
    assert math.isnan(data.loc["2022-10-01 05:00+00:00", "carbon_intensity_g_per_kwh"])
    assert int(data["carbon_intensity_g_per_kwh"].isna().sum()) == 23 + 5
    # the WAAT file has an empty first header field
    data, _ = read_eia930(shared_data / "eia930-sustaindc" / "WAAT_NG_avgCI_2022.csv")
    assert len(data) == 8760
    assert data["carbon_intensity_lca_g_per_kwh"].iloc[0] == pytest.approx(57.885814636943586)
