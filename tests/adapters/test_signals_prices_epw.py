"""read_prices and read_epw: fixtures, bad inputs, real files."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.signals import read_epw, read_prices
from carbonsched.errors import DataFormatError


def utc(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


# ------------------------------------------------------------------ prices
def test_prices_small(fixtures_dir: Path) -> None:
    data, meta = read_prices(fixtures_dir / "signals" / "prices_small.csv")
    assert list(data.columns) == ["price_usd_per_mwh"]
    assert list(data.index) == list(pd.date_range("2023-01-01", periods=5, freq="h", tz="UTC"))
    p = data["price_usd_per_mwh"]
    assert p.iloc[0] == -3.5  # negative prices are real and kept
    assert math.isnan(p.iloc[1])  # empty cell
    assert p.iloc[2] == 40.25
    assert math.isnan(p.iloc[3])  # absent hour
    assert p.iloc[4] == 55.0
    assert meta["n_negative"] == 1
    assert any("1 missing hour(s) inserted as NaN" in n for n in meta["notes"])


def test_prices_half_hour(fixtures_dir: Path) -> None:
    data, meta = read_prices(fixtures_dir / "signals" / "prices_halfhour.csv")
    # stamps 00:30, 01:30, 02:30 -> hours 00:00 (NaN: 23:30 unknown), 01:00 = (40+60)/2,
    # 02:00 = (60+70)/2
    assert list(data.index) == list(pd.date_range("2023-01-01", periods=3, freq="h", tz="UTC"))
    assert math.isnan(data["price_usd_per_mwh"].iloc[0])
    assert data["price_usd_per_mwh"].iloc[1:].tolist() == [50.0, 65.0]
    assert any("half-hour time zone" in n for n in meta["notes"])


def test_prices_irregular_minutes_refused(tmp_path: Path) -> None:
    p = tmp_path / "Z_electricity_prices_2023.csv"
    p.write_text("Datetime (UTC),Datetime (Local),Price (USD/MWh)\n"
                 "2023-01-01 00:00:00+00:00,x,1\n2023-01-01 01:30:00+00:00,x,2\n")
    with pytest.raises(DataFormatError, match="line 3: timestamp 2023-01-01T01:30:00"):
        read_prices(p)


def test_prices_missing_column(tmp_path: Path) -> None:
    p = tmp_path / "Z.csv"
    p.write_text("Datetime (UTC),Price (EUR/MWh)\n2023-01-01 00:00:00+00:00,1\n")
    with pytest.raises(DataFormatError, match=r"line 1: missing column\(s\) price_usd_per_mwh"):
        read_prices(p)


@pytest.mark.shared_data
def test_prices_real(shared_data: Path) -> None:
    folder = shared_data / "sustain-cluster" / "electricity_prices_usd_utc"
    data, meta = read_prices(folder / "DE-LU_electricity_prices_2023.csv")
    assert len(data) == 8760
    assert data["price_usd_per_mwh"].iloc[0] == pytest.approx(-3.3622368)
    assert meta["n_negative"] == 292
    data, meta = read_prices(folder / "IN-WE_electricity_prices_2023.csv")
    assert len(data) == 8760
    assert data.index[0] == utc("2023-01-01 00:00")
    assert data.loc[utc("2023-01-01 01:00"), "price_usd_per_mwh"] == pytest.approx(
        (45.962554 + 59.748755) / 2
    )
    assert int(data["price_usd_per_mwh"].isna().sum()) == 1  # only 00:00 (23:30 unknown)


# ------------------------------------------------------------------ EPW
def test_epw_small_hour_ending_to_utc(fixtures_dir: Path) -> None:
    data, meta = read_epw(fixtures_dir / "signals" / "small.epw", year=2023)
    assert len(data) == 8760
    assert data.index[0] == utc("2023-01-01 00:00") and data.index.name == "ts"
    assert meta["tz_offset_hours"] == -7.0
    # Jan 1 hour 1 = [00:00, 01:00) MST = 07:00 UTC
    assert data.loc[utc("2023-01-01 07:00")].tolist() == [10.0, -5.0, 30.0, 97000.0]
    assert data.loc[utc("2023-01-01 08:00"), "temperature_c"] == 9.5
    # hour 3 carries the missing codes 99.9 / 999 / 999999 -> NaN, dew point kept
    row = data.loc[utc("2023-01-01 09:00")]
    assert math.isnan(row["temperature_c"]) and row["dew_point_c"] == -6.0
    assert math.isnan(row["relative_humidity_pct"]) and math.isnan(row["pressure_pa"])
    # UTC 06:00 Jan 1 = Dec 31 hour 24 MST of the (cyclic) typical year; 05:00 = hour 23
    assert data.loc[utc("2023-01-01 06:00"), "temperature_c"] == 7.0
    assert data.loc[utc("2023-01-01 05:00"), "temperature_c"] == 8.0
    # Feb 28 hour 1 -> 07:00 UTC
    assert data.loc[utc("2023-02-28 07:00"), "temperature_c"] == 12.0
    assert any("hour(s) not in the file: NaN" in n for n in meta["notes"])


def test_epw_leap_year_feb29_copies_feb28(fixtures_dir: Path) -> None:
    data, meta = read_epw(fixtures_dir / "signals" / "small.epw", year=2024)
    assert len(data) == 8784
    assert data.loc[utc("2024-02-29 07:00"), "temperature_c"] == 12.0
    assert "2024 is a leap year: Feb 29 takes the typical year's Feb 28 values" in meta["notes"]


def test_epw_bad_inputs(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = (fixtures_dir / "signals" / "small.epw").read_text().splitlines()
    p = tmp_path / "bad.epw"
    bad = lines.copy()
    bad[9] = bad[9].replace(",9.50,", ",warm,")
    p.write_text("\n".join(bad) + "\n")
    with pytest.raises(DataFormatError, match=r"line 10: temperature_c: cannot read 'warm'"):
        read_epw(p, year=2023)
    bad = lines.copy()
    bad[8] = bad[8].replace("2021,1,1,1,", "2021,1,1,25,")
    p.write_text("\n".join(bad) + "\n")
    with pytest.raises(DataFormatError, match=r"line 9: no such month/day/hour 1/1 hour 25"):
        read_epw(p, year=2023)
    p.write_text("not,an,epw\n")
    with pytest.raises(DataFormatError, match=r"line 1: first line must start with 'LOCATION'"):
        read_epw(p, year=2023)
    with pytest.raises(DataFormatError, match="does not exist"):
        read_epw(tmp_path / "none.epw", year=2023)


@pytest.mark.shared_data
def test_epw_real_phoenix(shared_data: Path) -> None:
    data, meta = read_epw(
        shared_data / "eia930-sustaindc" / "USA_AZ_Phoenix-Sky.Harbor.epw", year=2023
    )
    assert len(data) == 8760 and data.notna().all().all()
    assert meta["tz_offset_hours"] == -7.0 and meta["data_source"] == "SRC-TMYx"
    # line 9: 2021,1,1,1 -> dry bulb 8.30, dew -6.10, RH 33, pressure 97058 at 07:00 UTC
    assert data.loc[utc("2023-01-01 07:00")].tolist() == [8.3, -6.1, 33.0, 97058.0]
    # 00:00 UTC = Dec 31 hour 18 MST (line 8762): 11.10, -3.40, 36, 97001
    assert data.loc[utc("2023-01-01 00:00")].tolist() == [11.1, -3.4, 36.0, 97001.0]
