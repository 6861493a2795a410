"""read_open_meteo: fixed-offset labels, wall-clock labels, units, bad inputs, real files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.signals import read_open_meteo
from carbonsched.errors import DataFormatError


def utc(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


def write_json(tmp_path: Path, doc: dict, indent: int | None = 4) -> Path:
    p = tmp_path / "w.json"
    p.write_text(json.dumps(doc, indent=indent), encoding="utf-8")
    return p


def doc(times: list[str], **extra: object) -> dict:
    return {
        "timezone": "Europe/Berlin",
        **extra,
        "hourly_units": {"temperature_2m": "°C"},
        "hourly": {"time": times, "temperature_2m": [1.0] * len(times)},
    }


def test_fixed_offset_labels(fixtures_dir: Path) -> None:
    data, meta = read_open_meteo(fixtures_dir / "signals" / "openmeteo_fixed_offset.json")
    # labels 01:00..04:00 at the fixed +01:00, including 02:00 which does not exist on the
    # Berlin wall clock that day: four consecutive UTC hours from 00:00
    assert list(data.index) == list(pd.date_range("2023-03-26", periods=4, freq="h", tz="UTC"))
    assert data.index.name == "ts"
    assert data["temperature_c"].iloc[1] == 4.5
    assert math.isnan(data["temperature_c"].iloc[2])  # null stays missing
    assert data["wind_speed_m_per_s"].tolist() == pytest.approx([10.0, 5.0, 0.0, 2.0])
    assert data["relative_humidity_pct"].tolist() == [80, 81, 82, 83]
    assert data["cloud_cover_pct"].tolist() == [10, 20, 30, 40]
    assert meta["utc_offset_seconds"] == 3600
    assert "fixed offset utc_offset_seconds=3600" in meta["time_rule"]


def test_wall_clock_labels_repeated_hour_in_file_order(fixtures_dir: Path) -> None:
    data, meta = read_open_meteo(fixtures_dir / "signals" / "openmeteo_wallclock.json")
    # 01:00 CEST, 02:00 CEST, 02:00 CET, 03:00 CET
    assert list(data.index) == list(
        pd.date_range("2023-10-28 23:00", periods=4, freq="h", tz="UTC")
    )
    # °F converted: 50, 41, 32, 212 -> 10, 5, 0, 100 °C; m/s unchanged
    assert data["temperature_c"].tolist() == pytest.approx([10.0, 5.0, 0.0, 100.0])
    assert data["wind_speed_m_per_s"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert "wall-clock time of 'Europe/Berlin'" in meta["time_rule"]


def test_wall_clock_nonexistent_hour_raises_with_line(tmp_path: Path) -> None:
    p = write_json(tmp_path, doc(["2023-03-26T01:00", "2023-03-26T02:00", "2023-03-26T03:00"]))
    with pytest.raises(DataFormatError) as err:
        read_open_meteo(p)
    text = p.read_text().splitlines()
    assert text[err.value.row - 1].strip().startswith('"2023-03-26T02:00"')
    assert "does not exist in 'Europe/Berlin'" in str(err.value)
    assert "utc_offset_seconds" in str(err.value)


def test_wall_clock_repeated_hour_seen_once_raises(tmp_path: Path) -> None:
    p = write_json(tmp_path, doc(["2023-10-29T01:00", "2023-10-29T02:00", "2023-10-29T03:00"]))
    with pytest.raises(DataFormatError, match="repeated \\(DST\\) hour .* appears once"):
        read_open_meteo(p)


def test_naive_without_any_zone_refused(tmp_path: Path) -> None:
    d = doc(["2023-01-01T00:00"])
    del d["timezone"]
    p = write_json(tmp_path, d)
    with pytest.raises(DataFormatError, match="refuses naive time"):
        read_open_meteo(p)


def test_bad_time_label_names_line(tmp_path: Path) -> None:
    p = write_json(tmp_path, doc(["2023-01-01T00:00", "yesterday"], utc_offset_seconds=0))
    with pytest.raises(DataFormatError) as err:
        read_open_meteo(p)
    assert "hourly.time[1] = 'yesterday' is not an ISO 8601 time" in str(err.value)
    assert p.read_text().splitlines()[err.value.row - 1].strip() == '"yesterday"'


def test_invalid_json_names_line(tmp_path: Path) -> None:
    p = tmp_path / "w.json"
    p.write_text('{\n  "hourly": {\n    "time": [,]\n  }\n}\n')
    with pytest.raises(DataFormatError, match=r"line 3: invalid JSON"):
        read_open_meteo(p)


def test_unknown_unit_and_length_mismatch(tmp_path: Path) -> None:
    d = doc(["2023-01-01T00:00"], utc_offset_seconds=0)
    d["hourly_units"]["temperature_2m"] = "K"
    with pytest.raises(DataFormatError, match=r"hourly_units.temperature_2m = 'K' is not one of"):
        read_open_meteo(write_json(tmp_path, d))
    d = doc(["2023-01-01T00:00", "2023-01-01T01:00"], utc_offset_seconds=0)
    d["hourly"]["temperature_2m"] = [1.0]
    with pytest.raises(DataFormatError, match="hourly.temperature_2m has 1 values but"):
        read_open_meteo(write_json(tmp_path, d))


def test_non_numeric_value(tmp_path: Path) -> None:
    d = doc(["2023-01-01T00:00"], utc_offset_seconds=0)
    d["hourly"]["temperature_2m"] = ["warm"]
    with pytest.raises(DataFormatError, match=r"hourly.temperature_2m\[0\] = 'warm' is not a"):
        read_open_meteo(write_json(tmp_path, d))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="does not exist"):
        read_open_meteo(tmp_path / "none.json")


# ------------------------------------------------------------------ real data
@pytest.mark.shared_data
def test_real_files_around_dst(shared_data: Path) -> None:
    w = shared_data / "sustain-cluster" / "weather"
    gb, meta = read_open_meteo(w / "GB_2023.json")
    assert len(gb) == 8760 and meta["utc_offset_seconds"] == 0
    # label "2023-03-26T01:00" (does not exist in Europe/London) -> 01:00 UTC, 7.9 °C
    assert gb.loc[utc("2023-03-26 01:00"), "temperature_c"] == 7.9
    assert gb["wind_speed_m_per_s"].iloc[0] == pytest.approx(
        json.loads((w / "GB_2023.json").read_text())["hourly"]["windspeed_10m"][0] / 3.6
    )
    de, meta = read_open_meteo(w / "DE-LU_2023.json")
    assert meta["utc_offset_seconds"] == 3600
    assert de.index[0] == utc("2022-12-31 23:00")
    # label "2023-03-26T02:00" (skipped on the Berlin clock) -> 01:00 UTC, 6.7 °C
    assert de.loc[utc("2023-03-26 01:00"), "temperature_c"] == 6.7
    ny, meta = read_open_meteo(w / "US-NY-NYIS_2023.json")
    assert meta["utc_offset_seconds"] == -14400  # EDT applied all year
    assert ny.index[0] == utc("2023-01-01 04:00")
    assert ny.index[-1] == utc("2024-01-01 03:00")
    # label "2023-11-05T01:00" (repeated on the New York clock) appears once -> 05:00 UTC
    assert ny.loc[utc("2023-11-05 05:00"), "temperature_c"] == 8.0
    for data in (gb, de, ny):
        assert data.index.is_unique and data.index.freqstr == "h"
        assert data.notna().all().all()


@pytest.mark.shared_data
def test_real_half_hour_zone(shared_data: Path) -> None:
    data, meta = read_open_meteo(shared_data / "sustain-cluster" / "weather" / "IN-WE_2023.json")
    # labels at +05:30: 00:00 IST = 18:30 UTC; the UTC hour 19:00 averages 18:30 and 19:30
    assert math.isnan(data.loc[utc("2022-12-31 18:00"), "temperature_c"])
    assert data.loc[utc("2022-12-31 19:00"), "temperature_c"] == pytest.approx((18.8 + 19.3) / 2)
    assert any("half-hour time zone" in n for n in meta["notes"])
