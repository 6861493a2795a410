"""Issue 7 items 2, 3 and 13 (reader side): hour conventions, invalid values, quarantine."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.signals import read_eia930, read_electricitymaps
from carbonsched.adapters.signals.quality import MAX_BAD_ROW_SHARE
from carbonsched.errors import DataFormatError

EM_HEADER = ("Datetime (UTC),Zone Id,Carbon Intensity gCO2eq/kWh (direct),"
             "Carbon Intensity gCO2eq/kWh (LCA),Data Estimated\n")
FUELS = "WND,SUN,WAT,OIL,NG,COL,NUC,OTH"


def _em_rows(n: int, start: str = "2023-10-01 00:00", ci=None, offset: str = "") -> list[str]:
    idx = pd.date_range(start, periods=n, freq="h")
    ci = ci if ci is not None else [200.0 + (i % 24) for i in range(n)]
    return [f"{t:%Y-%m-%d %H:%M:%S}{offset},TZ,{c},{c + 50},false\n"
            for t, c in zip(idx, ci, strict=True)]


def _write(tmp_path: Path, rows: list[str], header: str = EM_HEADER,
           name: str = "TZ_2023_hourly.csv") -> Path:
    p = tmp_path / name
    p.write_text(header + "".join(rows), encoding="utf-8")
    return p


# ------------------------------------------------------------------ item 2: time conventions
def test_eia930_hour_ending_file_is_moved_to_hour_start(tmp_path):
    p = tmp_path / "XX_hourly.csv"
    p.write_text(f"UTC Time at End of Hour,{FUELS}\n"
                 "2022-06-01 12:00:00,0,0,0,0,1000,0,0,0\n"
                 "2022-06-01 13:00:00,0,400,0,0,1000,0,0,0\n"
                 "2022-06-01 14:00:00,0,1500,0,0,1000,0,0,0\n", encoding="utf-8")
    data, meta = read_eia930(p)
    assert meta["time_convention"] == "hour-end"
    assert data.index.tz is not None and str(data.index.tz) == "UTC"
    assert data.loc[pd.Timestamp("2022-06-01 12:00", tz="UTC"), "generation_sun_mw"] == 400.0
    assert data.loc[pd.Timestamp("2022-06-01 11:00", tz="UTC"), "generation_sun_mw"] == 0.0
    assert data.index[-1] == pd.Timestamp("2022-06-01 13:00", tz="UTC")
    # hour 12:00Z: 400 MW solar + 1000 MW gas -> direct CI 370 * 1000 / 1400
    assert data.loc[pd.Timestamp("2022-06-01 12:00", tz="UTC"),
                    "carbon_intensity_g_per_kwh"] == pytest.approx(370_000 / 1400)


def test_eia930_hour_ending_us_am_pm_stamps(tmp_path):
    p = tmp_path / "YY_hourly.csv"
    p.write_text(f"UTC Time at End of Hour,{FUELS}\n"
                 "01/01/2022 1:00:00 AM,10,0,0,0,100,0,0,0\n"
                 "01/01/2022 2:00:00 AM,20,0,0,0,100,0,0,0\n", encoding="utf-8")
    data, meta = read_eia930(p)
    assert list(data.index) == [pd.Timestamp("2022-01-01 00:00", tz="UTC"),
                                pd.Timestamp("2022-01-01 01:00", tz="UTC")]
    assert data["generation_wnd_mw"].tolist() == [10.0, 20.0]


def test_plain_timestamp_eia930_file_says_its_convention_is_unknown(fixtures_dir):
    _, meta = read_eia930(fixtures_dir / "signals" / "eia930_small.csv")
    assert meta["time_convention"] == "unknown"


def test_electricitymaps_says_hour_start(tmp_path):
    _, meta = read_electricitymaps(_write(tmp_path, _em_rows(3)))
    assert meta["time_convention"] == "hour-start"


# ------------------------------------------------------------- item 3: invalid, not zero
def test_negative_hydro_makes_the_hour_invalid_not_zero(tmp_path):
    p = tmp_path / "ZZ_hourly.csv"
    p.write_text(f"timestamp,{FUELS}\n"
                 "2022-03-01 00:00:00+00:00,100,0,2000,0,1000,0,0,0\n"
                 "2022-03-01 01:00:00+00:00,100,0,-900,0,1000,0,0,0\n"
                 "2022-03-01 02:00:00+00:00,100,0,2000,0,1000,0,0,0\n", encoding="utf-8")
    data, meta = read_eia930(p)
    ci = data["carbon_intensity_g_per_kwh"]
    assert ci.iloc[0] == pytest.approx(370_000 / 3100)
    assert math.isnan(ci.iloc[1])  # clipped to 0 it would read 370 000 / 1100 = 336
    assert math.isnan(data["renewable_pct"].iloc[1])
    assert data["generation_wat_mw"].iloc[1] == -900.0
    assert meta["n_invalid_negative"] == 1
    assert any("WAT -900 MW" in n and "mix invalid" in n for n in meta["notes"])


def test_negative_carbon_intensity_is_nan_and_counted(tmp_path):
    rows = _em_rows(48)
    rows[10] = rows[10].replace(",210.0,", ",-5.0,")
    data, meta = read_electricitymaps(_write(tmp_path, rows))
    assert math.isnan(data["carbon_intensity_g_per_kwh"].iloc[10])
    assert any("1 value(s) of carbon_intensity_g_per_kwh outside [0, inf] set to NaN" in n
               for n in meta["notes"])


# ------------------------------------------------------------ item 3: quarantine of rows
def test_conflicting_duplicate_later_revision_wins_and_is_counted(tmp_path):
    rows = _em_rows(100)
    rows.append("2023-10-01 05:00:00,TZ,999.0,1049.0,false\n")  # re-published hour 05:00
    data, meta = read_electricitymaps(_write(tmp_path, rows))
    assert data.loc[pd.Timestamp("2023-10-01 05:00", tz="UTC"),
                    "carbon_intensity_g_per_kwh"] == 999.0
    assert meta["n_quarantined"] == 1
    q = meta["quarantined"][0]
    assert q["line"] == 7 and q["ts"] == "2023-10-01T05:00:00+00:00"
    assert q["reason"].startswith("conflicting duplicate: 2023-10-01T05:00:00+00:00 on lines 7 "
                                  "and 102 with different values; the later revision (line 102)")
    assert any(n.startswith("1 row(s) quarantined (1 conflicting duplicate), first line 7")
               for n in meta["notes"]), meta["notes"]


def test_repeated_local_hour_at_dst_fall_back_is_quarantined(tmp_path):
    # New York, 2023-11-05: 01:00 EDT (05Z) then 01:00 EST (06Z); the exporter wrote -04:00 twice
    idx = pd.date_range("2023-11-03 00:00", periods=96, freq="h", tz="America/New_York")
    rows = [[t.isoformat(), 300.0 + i] for i, t in enumerate(idx)]
    # the second 01:00 local (06Z) carries the summer offset -> same instant as the first
    second = next(i for i in range(1, len(idx)) if idx[i].hour == 1 and idx[i - 1].hour == 1)
    rows[second][0] = rows[second][0].replace("-05:00", "-04:00")
    text = "".join(f"{s},TZ,{c},{c + 50},false\n" for s, c in rows)
    p = tmp_path / "TZ_2023_hourly.csv"
    p.write_text(EM_HEADER + text, encoding="utf-8")
    data, meta = read_electricitymaps(p)
    t05, t06 = pd.Timestamp("2023-11-05 05:00", tz="UTC"), pd.Timestamp("2023-11-05 06:00",
                                                                        tz="UTC")
    assert data.loc[t05, "carbon_intensity_g_per_kwh"] == 300.0 + second - 1  # first kept
    assert math.isnan(data.loc[t06, "carbon_intensity_g_per_kwh"])  # its true hour: missing
    assert meta["n_quarantined"] == 1
    assert meta["quarantined"][0]["reason"].startswith("repeated local hour at a DST fall-back")
    assert meta["quarantined"][0]["line"] == second + 2


def test_file_over_the_bad_row_share_is_still_refused(tmp_path):
    assert MAX_BAD_ROW_SHARE == 0.02
    rows = _em_rows(100)
    ok = rows + [rows[i].replace(",2", ",9", 1) for i in (3, 30)]  # 2 of 102 rows: kept
    data, meta = read_electricitymaps(_write(tmp_path, ok))
    assert meta["n_quarantined"] == 2
    bad = rows + [rows[i].replace(",2", ",9", 1) for i in (3, 30, 50)]  # 3 of 103: 2.9 %
    with pytest.raises(DataFormatError, match=r"3 of 103 rows \(2.9%\) are bad, more than the "
                       r"2% carbonsched quarantines \(first: conflicting duplicate"):
        read_electricitymaps(_write(tmp_path, bad))


# --------------------------------------------- item 13: damaged last line and newest hour
def test_last_value_cut_mid_number_is_quarantined_not_read_as_6(tmp_path):
    rows = _em_rows(72)
    full = rows[-1]
    rows[-1] = full[:full.index(",TZ,") + len(",TZ,") + 1]  # "2023-10-03 23:00:00,TZ,2"
    p = tmp_path / "TZ_2023_hourly.csv"
    p.write_text(EM_HEADER + "".join(rows), encoding="utf-8")
    assert not p.read_text().endswith("\n")
    data, meta = read_electricitymaps(p)
    assert data.index[-1] == pd.Timestamp("2023-10-03 22:00", tz="UTC")
    assert meta["n_quarantined"] == 1
    q = meta["quarantined"][0]
    assert q["line"] == 73 and q["ts"] == "2023-10-03T23:00:00+00:00"
    assert q["reason"].startswith("truncated last line: 3 of 5 fields and no line end")


def test_complete_last_line_without_line_end_is_kept(tmp_path):
    rows = _em_rows(5)
    rows[-1] = rows[-1].rstrip("\n")
    data, meta = read_electricitymaps(_write(tmp_path, rows))
    assert len(data) == 5 and meta["n_quarantined"] == 0


def test_empty_newest_hour_is_recorded_not_filled(tmp_path):
    rows = _em_rows(72)
    rows[-1] = "2023-10-03 23:00:00,TZ,,,false\n"
    data, meta = read_electricitymaps(_write(tmp_path, rows))
    assert math.isnan(data["carbon_intensity_g_per_kwh"].iloc[-1])
    assert meta["quarantined"] == [{"line": 73, "ts": "2023-10-03T23:00:00+00:00",
                                    "reason": "empty newest hour: the last row has no carbon "
                                              "intensity"}]


def test_real_files_have_nothing_quarantined(shared_data):
    for name in ("DE-LU_2023_hourly.csv", "JP-TK_2022_hourly.csv", "GB_2022_hourly.csv"):
        _, meta = read_electricitymaps(shared_data / "sustain-cluster" / "carbon_intensity" / name)
        assert meta["n_quarantined"] == 0, name
    _, meta = read_eia930(shared_data / "eia930-sustaindc" / "WAAT_NG_avgCI_2022.csv")
    assert meta["n_quarantined"] == 0  # no line end after its last line, but every field there


def test_every_file_reader_states_its_hour_convention(shared_data):
    from carbonsched.adapters.signals import read_epw, read_open_meteo, read_prices

    _, m = read_epw(shared_data / "eia930-sustaindc" / "USA_AZ_Phoenix-Sky.Harbor.epw", year=2022)
    assert m["time_convention"] == "hour-end"  # EPW hour h is [h-1, h) local standard time
    _, m = read_open_meteo(shared_data / "sustain-cluster" / "weather" / "GB_2023.json")
    assert m["time_convention"] == "hour-start"
    _, m = read_prices(shared_data / "sustain-cluster" / "electricity_prices_usd_utc"
                       / "DE-LU_electricity_prices_2023.csv")
    assert m["time_convention"] == "hour-start"
