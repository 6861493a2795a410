"""Issue 7 item 13: damaged history never changes a plan silently (notes and site quality)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.pipeline.daily import gather_forecasts
from tests.trust.datadir import mirror

ISSUE = pd.Timestamp("2023-07-15", tz="UTC")
DE_FILE = "sustain-cluster/carbon_intensity/DE-LU_2023_hourly.csv"


def _catalog_of(site_id: str):
    cat = load_catalog("global")
    return type(cat)(**{**cat.__dict__, "sites": [cat.site(site_id)]})


def _edit_rows(fn):
    """Edit: apply ``fn(stamp, fields) -> fields | None`` to each data row up to the issue."""

    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        out = [lines[0]]
        for line in lines[1:]:
            fields = line.rstrip("\n").split(",")
            if fields[0] >= "2023-07-15":
                break
            new = fn(fields[0], fields)
            if new is not None:
                out.append(",".join(new) + "\n")
        return "".join(out)

    return edit


def _cut_last_value(text: str) -> str:
    body = _edit_rows(lambda ts, f: f)(text).rstrip("\n")
    head, last = body.rsplit("\n", 1)
    f = last.split(",")
    assert f[4] == "63.25" or True
    return head + "\n" + ",".join(f[:4] + [f[4][:1]])  # e.g. 63.25 -> "6", no line end


def _empty_newest(ts, f):
    return f[:4] + ["", ""] + f[6:] if ts.startswith("2023-07-14 23") else f


def _day_negative(ts, f):
    if ts.startswith("2023-07-10"):
        return f[:4] + [f"-{f[4]}", f"-{f[5]}"] + f[6:]
    return f


def _all_zero(ts, f):
    return f[:4] + ["0", "0"] + f[6:]


def _gap_3_days(ts, f):
    return None if "2023-07-01" <= ts[:10] <= "2023-07-03" else f


def _forecast(tmp_path, shared_data, edit):
    data = mirror(shared_data, tmp_path / "data", {DE_FILE: edit})
    return gather_forecasts(_catalog_of("de-frankfurt"), data, ISSUE, 24)


def test_value_cut_mid_number_is_quarantined_and_degrades(tmp_path, shared_data):
    forecasts, notes, _ = _forecast(tmp_path, shared_data, _cut_last_value)
    fc = forecasts["de-frankfurt"]
    assert fc.signal_quality == "degraded"
    assert fc.signal_age_hours["carbon_intensity_g_per_kwh"] == 2.0
    assert any("truncated last line: 5 of 11 fields and no line end (last field '" in n
               for n in notes), notes
    assert any("1 row(s) of the history quarantined by the reader (first "
               "2023-07-14T23:00:00+00:00: truncated last line" in n for n in notes), notes


def test_empty_newest_hour_is_noted_and_degrades(tmp_path, shared_data):
    forecasts, notes, _ = _forecast(tmp_path, shared_data, _edit_rows(_empty_newest))
    fc = forecasts["de-frankfurt"]
    assert fc.signal_quality == "degraded"
    assert any("the 1 newest hour(s) before the issue time have no value (newest observation "
               "2023-07-14T22:00:00+00:00)" in n for n in notes), notes
    assert any("empty newest hour" in n for n in notes), notes


def test_day_of_negatives_is_invalid_counted_and_degrades(tmp_path, shared_data):
    forecasts, notes, _ = _forecast(tmp_path, shared_data, _edit_rows(_day_negative))
    fc = forecasts["de-frankfurt"]
    assert any("DE-LU_2023_hourly.csv: 24 value(s) of carbon_intensity_g_per_kwh outside "
               "[0, inf] set to NaN" in n for n in notes), notes
    assert any("1 gap(s) of >= 24 h in the history, longest 24 h from "
               "2023-07-10T00:00:00+00:00" in n for n in notes), notes
    assert fc.signal_quality == "degraded"
    assert (fc.signals["carbon_intensity_g_per_kwh"] > 0).all()


def test_all_zero_series_is_not_planned_as_zero(tmp_path, shared_data):
    forecasts, notes, _ = _forecast(tmp_path, shared_data, _edit_rows(_all_zero))
    assert "de-frankfurt" not in forecasts
    assert any("flat line(s) of >= 24 identical values quarantined" in n and "value 0" in n
               for n in notes), notes
    # the forecasting path reads a year of history (issue 12): 2022 is intact, so the site is
    # left out because its newest valid value is half a year old, the reason naming the zeros
    assert any(n.startswith("site de-frankfurt left out: site de-frankfurt: newest "
                            "carbon-intensity observation is 2022-12-31T23:00:00+00:00, more "
                            "than 48 h before the issue time") and "value 0" in n
               for n in notes), notes


def test_three_day_gap_is_noted_and_degrades(tmp_path, shared_data):
    forecasts, notes, _ = _forecast(tmp_path, shared_data, _edit_rows(_gap_3_days))
    fc = forecasts["de-frankfurt"]
    assert fc.signal_quality == "degraded"
    assert any("DE-LU_2023_hourly.csv: 72 missing hour(s) inserted as NaN, first "
               "2023-07-01T00:00:00+00:00" in n for n in notes), notes
    assert any("longest 72 h from 2023-07-01T00:00:00+00:00" in n for n in notes), notes


def test_undamaged_history_is_measured_without_quality_notes(tmp_path, shared_data):
    forecasts, notes, _ = _forecast(tmp_path, shared_data, _edit_rows(lambda ts, f: f))
    assert forecasts["de-frankfurt"].signal_quality == "measured"
    assert not any("degraded" in n or "quarantined" in n for n in notes), notes


@pytest.mark.parametrize("site", ["gb-london", "us-ny-newyork"])
def test_flat_line_in_another_zone(site, tmp_path, shared_data):
    """A different instance: a stuck meter (same value 26 h) inside GB's or NYISO's history."""
    zone = load_catalog("global").site(site).zone

    def stuck(ts, f):
        return f[:4] + ["123.4", "150.0"] + f[6:] if "2023-07-05 00" <= ts[:13] <= \
            "2023-07-06 01" else f

    data = mirror(shared_data, tmp_path / "data",
                  {f"sustain-cluster/carbon_intensity/{zone}_2023_hourly.csv": _edit_rows(stuck)})
    forecasts, notes, _ = gather_forecasts(_catalog_of(site), data, ISSUE, 24)
    assert forecasts[site].signal_quality == "degraded"
    assert any("26 hour(s) in 1 flat line(s)" in n and "value 123.4" in n for n in notes), notes
    assert np.isfinite(forecasts[site].signals["carbon_intensity_g_per_kwh"]).all()
