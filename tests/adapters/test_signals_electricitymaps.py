"""read_electricitymaps: fixtures written by hand, bad inputs, and the real SustainCluster files."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.signals import read_electricitymaps
from carbonsched.errors import DataFormatError

HEADER = (
    "Datetime (UTC),Zone Id,Carbon Intensity gCO2eq/kWh (direct),"
    "Carbon Intensity gCO2eq/kWh (LCA),Data Estimated\n"
)


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    p = tmp_path / "ZONE_2023_hourly.csv"
    p.write_text(header + body, encoding="utf-8")
    return p


def test_small_fixture_values_and_rules(fixtures_dir: Path) -> None:
    data, meta = read_electricitymaps(fixtures_dir / "signals" / "em_small.csv")
    assert data.index.name == "ts"
    assert str(data.index.tz) == "UTC"
    assert data.index.freqstr == "h"
    assert list(data.index) == list(
        pd.date_range("2023-03-26 00:00", periods=5, freq="h", tz="UTC")
    )
    ci = data["carbon_intensity_g_per_kwh"]
    assert ci.iloc[0] == 100.5
    assert ci.iloc[1] == 110.0
    # negative CI -> NaN, not kept, not 0
    assert math.isnan(ci.iloc[2])
    # missing hour 03:00 inserted as NaN, flag False
    assert math.isnan(ci.iloc[3])
    assert not data["carbon_intensity_estimated"].iloc[3]
    assert ci.iloc[4] == 130.0
    # empty LCA cell stays NaN
    assert math.isnan(data["carbon_intensity_lca_g_per_kwh"].iloc[1])
    # low-carbon 120 % is impossible -> NaN
    assert math.isnan(data["low_carbon_pct"].iloc[4])
    assert data["renewable_pct"].iloc[4] == 43.0
    assert data["carbon_intensity_estimated"].dtype == bool
    assert data["carbon_intensity_estimated"].tolist() == [False, True, False, False, False]
    assert data["estimation_method"].iloc[1] == "ESTIMATED_TIME_SLICER_AVERAGE"
    assert data["estimation_method"].iloc[0] == ""
    assert meta["zone_id"] == "TZ"
    assert meta["n_estimated"] == 1
    notes = " | ".join(meta["notes"])
    assert "1 identical duplicated row(s) dropped" in notes
    assert ("1 value(s) of carbon_intensity_g_per_kwh outside [0, inf] set to NaN "
            "(first on line 5)") in notes
    assert "1 value(s) of low_carbon_pct outside [0, 100] set to NaN (first on line 6)" in notes
    assert "1 missing hour(s) inserted as NaN, first 2023-03-26T03:00:00+00:00" in notes


def test_mdy_dates_are_month_first(fixtures_dir: Path, tmp_path: Path) -> None:
    data, _ = read_electricitymaps(fixtures_dir / "signals" / "em_mdy.csv")
    assert data.index[0] == pd.Timestamp("2023-03-26 00:00", tz="UTC")
    assert data["carbon_intensity_g_per_kwh"].tolist() == [100.0, 101.0, 102.0]
    # 04/01 is April 1st, not January 4th
    p = write(tmp_path, "04/01/2023 00:00,TZ,1,2,false\n")
    data, _ = read_electricitymaps(p)
    assert data.index[0] == pd.Timestamp("2023-04-01", tz="UTC")


def test_day_first_date_in_mdy_file_names_line(tmp_path: Path) -> None:
    p = write(tmp_path, "03/26/2023 00:00,TZ,1,2,false\n26/03/2023 01:00,TZ,1,2,false\n")
    with pytest.raises(DataFormatError) as err:
        read_electricitymaps(p)
    msg = str(err.value)
    assert f"{p}, line 3:" in msg
    assert "'26/03/2023 01:00'" in msg and "MM/DD/YYYY" in msg
    assert err.value.row == 3


def test_local_timestamps_with_dst_offsets_are_converted(fixtures_dir: Path) -> None:
    data, _ = read_electricitymaps(fixtures_dir / "signals" / "em_offsets.csv")
    # +01:00 then +02:00 after the spring change: four consecutive UTC hours
    assert list(data.index) == list(
        pd.date_range("2023-03-25 23:00", periods=4, freq="h", tz="UTC")
    )
    assert data["carbon_intensity_g_per_kwh"].tolist() == [200.0, 201.0, 202.0, 203.0]


def test_conflicting_duplicate_in_a_tiny_file_is_refused_with_both_lines(tmp_path: Path) -> None:
    # one conflicting row of three is over the 2 % bad-row share (issue 7 item 3)
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,1,2,false\n2023-01-01 01:00:00,TZ,3,4,false\n"
                        "2023-01-01 01:00:00,TZ,5,4,false\n")
    with pytest.raises(DataFormatError) as err:
        read_electricitymaps(p)
    assert "line 4" in str(err.value)
    assert "1 of 3 rows (33.3%) are bad" in str(err.value)
    assert "on lines 3 and 4" in str(err.value)


def test_unparsable_number_names_line_and_column(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,1,2,false\n2023-01-01 01:00:00,TZ,abc,4,false\n")
    with pytest.raises(DataFormatError) as err:
        read_electricitymaps(p)
    assert str(err.value) == (
        f"{p}, line 3: column 'Carbon Intensity gCO2eq/kWh (direct)': "
        "cannot read 'abc' as a number"
    )


def test_unparsable_date_names_line(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,1,2,false\n2023-13-45 01:00:00,TZ,3,4,false\n")
    with pytest.raises(DataFormatError, match=r"line 3: .*'2023-13-45 01:00:00' as a timestamp"):
        read_electricitymaps(p)


def test_unparsable_flag_names_line(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,1,2,maybe\n")
    with pytest.raises(DataFormatError, match=r"line 2: column 'Data Estimated'.*'maybe'"):
        read_electricitymaps(p)


def test_missing_column_names_it(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,false\n",
              header="Datetime (UTC),Zone Id,Data Estimated\n")
    with pytest.raises(DataFormatError) as err:
        read_electricitymaps(p)
    assert err.value.row == 1
    assert "missing column(s) carbon_intensity_g_per_kwh" in str(err.value)
    assert "'Carbon Intensity gCO₂eq/kWh (direct)'" in str(err.value)


def test_off_hour_timestamp_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:15:00,TZ,1,2,false\n")
    with pytest.raises(DataFormatError, match="line 2: timestamp 2023-01-01T00:15:00"):
        read_electricitymaps(p)


def test_missing_file_is_clear(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="does not exist; check the path"):
        read_electricitymaps(tmp_path / "nope.csv")


def test_extra_field_names_line(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,1,2,false,EXTRA\n")
    with pytest.raises(DataFormatError, match="line 2: 6 fields but the header has 5"):
        read_electricitymaps(p)


# ------------------------------------------------------------------ real data (read by path)
@pytest.mark.shared_data
def test_real_gb_2023(shared_data: Path) -> None:
    data, meta = read_electricitymaps(
        shared_data / "sustain-cluster" / "carbon_intensity" / "GB_2023_hourly.csv"
    )
    assert len(data) == 8760
    assert data.index[0] == pd.Timestamp("2023-01-01 00:00", tz="UTC")
    assert data.index[-1] == pd.Timestamp("2023-12-31 23:00", tz="UTC")
    # line 2 of the file: 62.55, 91.44, 86.0 (low carbon), 60.17 (renewable)
    row = data.iloc[0]
    assert row["carbon_intensity_g_per_kwh"] == 62.55
    assert row["carbon_intensity_lca_g_per_kwh"] == 91.44
    assert row["low_carbon_pct"] == 86.0
    assert row["renewable_pct"] == 60.17
    assert meta["n_estimated"] == 20
    assert meta["estimation_methods"] == {"ESTIMATED_TIME_SLICER_AVERAGE": 20}
    assert data.isna().sum().sum() == 0
    assert meta["notes"] == []


@pytest.mark.shared_data
def test_real_de_lu_zone_id_and_estimation(shared_data: Path) -> None:
    data, meta = read_electricitymaps(
        shared_data / "sustain-cluster" / "carbon_intensity" / "DE-LU_2023_hourly.csv"
    )
    assert meta["zone_id"] == "DE"  # the file name says DE-LU
    assert meta["estimation_methods"] == {"ESTIMATED_FORECASTS_HIERARCHY": 30}
    assert int(data["carbon_intensity_estimated"].sum()) == 30


@pytest.mark.shared_data
def test_real_in_we_entirely_estimated_and_ca_on_zero_kept(shared_data: Path) -> None:
    folder = shared_data / "sustain-cluster" / "carbon_intensity"
    data, meta = read_electricitymaps(folder / "IN-WE_2023_hourly.csv")
    assert meta["n_estimated"] == 8760
    assert meta["estimation_methods"] == {"ESTIMATED_MODE_BREAKDOWN": 8760}
    data, _ = read_electricitymaps(folder / "CA-ON_2023_hourly.csv")
    # a direct CI of exactly 0 is valid (hydro + nuclear) and is not masked
    assert data["carbon_intensity_g_per_kwh"].min() == 0.0
    assert data["carbon_intensity_g_per_kwh"].notna().all()


def test_nan_ci_stays_nan_and_mixed_offsets_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-01-01 00:00:00,TZ,NaN,2,false\n2023-01-01 01:00:00,TZ,,2,false\n")
    data, meta = read_electricitymaps(p)
    assert data["carbon_intensity_g_per_kwh"].isna().all()
    assert not any("outside" in n or "missing hour" in n for n in meta["notes"])
    p = write(tmp_path, "2023-01-01 00:00:00+00:00,TZ,1,2,false\n"
                        "2023-01-01 01:00:00,TZ,1,2,false\n")
    with pytest.raises(DataFormatError, match="line 3: .*mixes timestamps with and without"):
        read_electricitymaps(p)
