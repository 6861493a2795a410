"""The eia930-sustaindc files, aligned per balancing area, put solar generation around solar noon.

Solar noon (UTC hours) = 12 - longitude/15 - EoT/60, with the equation of time EoT [min] =
9.87 sin 2B - 7.53 cos B - 1.5 sin B, B = 2 pi (doy - 81) / 364 (Duffie & Beckman, *Solar
Engineering of Thermal Processes*, 4th ed., 2013, eq. 1.5.3, Spencer/Cooper approximation; error
under a minute). Longitudes: the approximate centre of each BA's utility-scale solar fleet, an
ASSUMPTION good to about 2 degrees (8 minutes), far below the 30-minute tolerance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.adapters.signals import load_site_signals
from carbonsched.adapters.signals.eia930 import (
    SUSTAINDC_HOUR_END_SHIFT,
    align_sustaindc,
    read_eia930,
)
from carbonsched.catalog import load_catalog

SOLAR_LONGITUDE_DEG = {"AZPS": -112.3, "BPAT": -120.5, "CISO": -119.0, "ERCO": -99.0,
                       "MISO": -91.0, "PJM": -78.5, "SOCO": -85.0, "WAAT": -108.5}
AZPS_STORAGE_RESIDUAL_H = 0.68
"""AZPS after its 1 h shift: Solana (280 MW parabolic trough, 6 h storage) generates into the
evening and night, so its generation centroid stays ~0.7 h after noon (see
eia930.SUSTAINDC_HOUR_END_SHIFT)."""


def solar_centroid_offset_hours(frame: pd.DataFrame, longitude_deg: float) -> float:
    """Generation-weighted circular mean of (interval mid-point - solar noon) of SUN. [h]

    Circular (on the 24 h clock), so night-time output (AZPS's stored solar heat) does not wrap
    from +12 h to -12 h when the stamps move.
    """
    sun = frame["generation_sun_mw"].clip(lower=0).fillna(0.0)
    ts = sun.index
    doy = ts.day_of_year.to_numpy()
    b = 2 * np.pi * (doy - 81) / 364
    eot_min = 9.87 * np.sin(2 * b) - 7.53 * np.cos(b) - 1.5 * np.sin(b)
    noon_h = 12 - longitude_deg / 15 - eot_min / 60
    mid_h = ts.hour.to_numpy() + 0.5
    angle = 2 * np.pi * (mid_h - noon_h) / 24
    w = sun.to_numpy()
    return float(np.arctan2((w * np.sin(angle)).sum(), (w * np.cos(angle)).sum()) * 24
                 / (2 * np.pi))


@pytest.mark.parametrize("ba", sorted(SOLAR_LONGITUDE_DEG))
def test_aligned_solar_centroid_is_at_solar_noon(shared_data, ba):
    raw, meta = read_eia930(shared_data / "eia930-sustaindc" / f"{ba}_NG_avgCI_2022.csv")
    assert meta["time_convention"] == "unknown"
    aligned = align_sustaindc(raw, ba)
    assert aligned.index.tz is not None and str(aligned.index.tz) == "UTC"
    periods = SUSTAINDC_HOUR_END_SHIFT[ba]
    starts = [pd.Timestamp(s) if s else aligned.index[0] for s, _ in periods]
    ends = starts[1:] + [aligned.index[-1] + pd.Timedelta(hours=1)]
    for a, b in zip(starts, ends, strict=True):
        part = aligned[(aligned.index >= a) & (aligned.index < b)]
        c = solar_centroid_offset_hours(part, SOLAR_LONGITUDE_DEG[ba])
        if ba == "AZPS":
            assert c == pytest.approx(AZPS_STORAGE_RESIDUAL_H, abs=0.05)
        else:
            assert abs(c) <= 0.5, (ba, str(a), c)
        # and the raw stamps, read as hour starts, were off by about the shift applied
        raw_part = raw[(raw.index >= a) & (raw.index < b)]
        c_raw = solar_centroid_offset_hours(raw_part, SOLAR_LONGITUDE_DEG[ba])
        shift = dict(zip(starts, [h for _, h in periods], strict=True))[a]
        assert c_raw - c == pytest.approx(shift, abs=0.01)


def test_ciso_changes_convention_on_2022_06_13(shared_data):
    raw, _ = read_eia930(shared_data / "eia930-sustaindc" / "CISO_NG_avgCI_2022.csv")
    aligned = align_sustaindc(raw, "CISO")
    t = pd.Timestamp("2022-06-13 18:00", tz="UTC")
    # before: unchanged; the empty row 18:00 and the next one moved to 17:00 / 18:00
    assert aligned.loc[t - pd.Timedelta(hours=2), "generation_sun_mw"] == raw.loc[
        t - pd.Timedelta(hours=2), "generation_sun_mw"]
    assert aligned.loc[t, "generation_sun_mw"] == raw.loc[t + pd.Timedelta(hours=1),
                                                          "generation_sun_mw"]
    # sunrise ramp (first hour >= 500 MW) stays at 13:00Z across the change
    for day in ("2022-06-12", "2022-06-14", "2022-06-20"):
        d = aligned.loc[f"{day} 10:00":f"{day} 20:00", "generation_sun_mw"]
        assert d[d >= 500].index[0].hour == 13, day


def test_registry_serves_aligned_eia930_with_a_note(shared_data):
    site = load_catalog("us-2022").site(next(s.id for s in load_catalog("us-2022").sites
                                             if s.zone == "ERCO"))
    start = pd.Timestamp("2022-07-01", tz="UTC")
    frame, meta = load_site_signals(site, shared_data, start, start + pd.Timedelta(days=2))
    raw, _ = read_eia930(shared_data / "eia930-sustaindc" / "ERCO_NG_avgCI_2022.csv")
    # the hour starting 2022-07-01 00:00 is the file's row stamped 01:00 (hour-ending)
    assert frame["carbon_intensity_g_per_kwh"].iloc[0] == pytest.approx(
        raw.loc[start + pd.Timedelta(hours=1), "carbon_intensity_g_per_kwh"])
    assert any("EIA-930 ERCO stamps aligned to hour starts (all -1 h" in n
               for n in meta["notes"]), meta["notes"]
