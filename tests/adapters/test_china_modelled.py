from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from carbonsched.adapters.signals import china_modelled as cm
from carbonsched.catalog import load_catalog
from carbonsched.errors import CatalogError, TimeAxisError

CATALOG = load_catalog("china-eastdata-westcompute")
UTC = "UTC"


def year(site_id: str, y: int = 2023) -> pd.DataFrame:
    frame, _ = cm.load_signals(CATALOG.site(site_id), pd.Timestamp(f"{y}-01-01", tz=UTC),
                               pd.Timestamp(f"{y + 1}-01-01", tz=UTC))
    return frame


@pytest.mark.parametrize("site_id", [s.id for s in CATALOG.sites])
@pytest.mark.parametrize("y", [2023, 2026])
def test_annual_mean_equals_official_factor(site_id: str, y: int) -> None:
    site = CATALOG.site(site_id)
    ci = year(site_id, y)["carbon_intensity_g_per_kwh"]
    assert len(ci) == (8784 if y % 4 == 0 else 8760)
    assert ci.mean() == pytest.approx(site.annual_emission_factor_g_per_kwh, rel=0.005)
    assert (ci > 0).all()


def test_frame_contract_and_meta() -> None:
    site = CATALOG.site("cn-nx-zhongwei")
    start = pd.Timestamp("2026-12-31T20:00:00+08:00")  # 12:00 UTC, crosses the new year
    end = pd.Timestamp("2027-01-01T12:00:00Z")
    frame, meta = cm.load_signals(site, start, end)
    assert frame.index.name == "ts"
    assert str(frame.index.tz) == UTC
    assert frame.index[0] == pd.Timestamp("2026-12-31T12:00:00Z")
    assert frame.index[-1] == pd.Timestamp("2027-01-01T11:00:00Z")
    assert len(frame) == 24 and frame.index.freq == "h"
    assert list(frame.columns) == list(cm.COLUMNS)
    assert frame["carbon_intensity_lca_g_per_kwh"].isna().all()
    assert frame["price_usd_per_mwh"].isna().all()
    assert not frame["carbon_intensity_estimated"].any()
    assert frame["green_surplus_index"].between(0, 1).all()
    assert meta["signal_quality"] == "modelled"
    assert meta["source"] == "modelled-china" and meta["zone"] == "CN-NX"
    assert meta["files"] == ["carbonsched/data/china_grid_model.toml"]
    assert any(n.startswith("MODELLED, not measured") for n in meta["notes"])
    assert sum(n.startswith(("2026:", "2027:")) for n in meta["notes"]) == 2


def test_deterministic_across_calls_and_cache() -> None:
    a = year("cn-gs-qingyang")
    cm._model_year.cache_clear()
    b = year("cn-gs-qingyang")
    pd.testing.assert_frame_equal(a, b)
    # a different year draws different weather but keeps the same annual mean
    c = year("cn-gs-qingyang", 2024)
    assert not np.allclose(a["carbon_intensity_g_per_kwh"].to_numpy()[:8000],
                           c["carbon_intensity_g_per_kwh"].to_numpy()[:8000])


@pytest.mark.parametrize("site_id", ["cn-nx-zhongwei", "cn-gs-qingyang"])
def test_midday_dip_in_solar_heavy_western_hub(site_id: str) -> None:
    f = year(site_id).loc["2023-06-01":"2023-08-31"]
    local_hour = f.index.tz_convert("Asia/Shanghai").hour
    ci = f["carbon_intensity_g_per_kwh"]
    noon = ci[(local_hour >= 12) & (local_hour <= 14)].mean()
    night = ci[(local_hour >= 0) & (local_hour <= 2)].mean()
    assert noon < 0.8 * night
    # on the acceptance day too: 13:00 local (05 UTC) below 01:00 local (17 UTC)
    day = year(site_id).loc["2023-07-15"]["carbon_intensity_g_per_kwh"]
    assert day.loc["2023-07-15T05:00Z"] < 0.8 * day.loc["2023-07-15T17:00Z"]


def test_green_surplus_index_in_western_hubs_only() -> None:
    zw = year("cn-nx-zhongwei")["green_surplus_index"]
    assert zw.between(0, 1).all() and zw.max() == 1.0
    local_hour = zw.index.tz_convert("Asia/Shanghai").hour
    assert (zw[(local_hour >= 11) & (local_hour <= 15)] > 0).sum() > 100  # midday solar peaks
    # windy nights where wind dominates (Inner Mongolia: wind share 0.167 vs solar 0.052)
    hr = year("cn-nm-horinger")["green_surplus_index"]
    h = hr.index.tz_convert("Asia/Shanghai").hour
    assert (hr[(h <= 5) | (h >= 21)] > 0).sum() > 100
    assert (year("cn-sh-qingpu")["green_surplus_index"] == 0).all()  # 100 % utilisation


def test_calibrated_curtailment_matches_gansu_wind_utilisation() -> None:
    _, meta = cm.load_signals(CATALOG.site("cn-gs-qingyang"), pd.Timestamp("2023-01-01", tz=UTC),
                              pd.Timestamp("2023-01-02", tz=UTC))
    # target = (5.0% x 0.238 + 2.0% x 0.132) / 0.370 = 3.93 % (NEA: Gansu wind 95.0 %)
    note = next(n for n in meta["notes"] if n.startswith("2023:"))
    assert "modelled curtailment 3.93% of wind+solar (on target)" in note
    assert not any("curtailment above its target" in n or "below its target" in n
                   for n in meta["notes"])


def test_unreachable_curtailment_target_is_named_with_why() -> None:
    # Sichuan: hydro alone exceeds 1 - floor in the wet season, the floor stays at its lower
    # bound and the modelled curtailment (hydro spill) is far above the 2.42 % target
    _, meta = cm.load_signals(CATALOG.site("cn-sc-tianfu"), pd.Timestamp("2023-01-01", tz=UTC),
                              pd.Timestamp("2023-01-02", tz=UTC))
    note = next(n for n in meta["notes"] if n.startswith("2023:"))
    assert "fossil must-run floor 8.0% of demand" in note
    # "(target 2.42%, not met)" read as an error on the first plan a new user ran
    assert "modelled curtailment" in note and "(above its 2.42% target, by design)" in note
    # why, in a note of its own that names no year (a site's years share it on screen)
    assert meta["notes"][-1] == (
        "modelled curtailment above its target by design: the modelled surplus includes hydro "
        "and nuclear spill, which the target (wind and solar only) does not, and the fossil "
        "must-run floor is already at its lower bound (fossil_floor_min in "
        "data/china_grid_model.toml)")


def test_curtailment_miss_threshold_at_its_limit() -> None:
    # just inside the tolerance (either side): not named; just beyond it: named, with the
    # bound the floor sits at
    tol = cm.CURTAILMENT_TARGET_TOLERANCE
    assert cm._target_missed(0.0393 + 0.99 * tol, 0.0393, 0.2, 0.08, 0.6) == ("on target", "")
    assert cm._target_missed(0.0393 - 0.99 * tol, 0.0393, 0.2, 0.08, 0.6) == ("on target", "")
    label, why = cm._target_missed(0.0393 - 1.01 * tol, 0.0393, 0.6, 0.08, 0.6)
    assert label == "below its 3.93% target" and "its upper bound (fossil_floor_max" in why
    label, why = cm._target_missed(0.0393 + 1.01 * tol, 0.0393, 0.08, 0.08, 0.6)
    assert label == "above its 3.93% target, by design"
    assert "its lower bound (fossil_floor_min" in why
    label, why = cm._target_missed(0.0393 + 1.01 * tol, 0.0393, 0.2, 0.08, 0.6)
    assert label == "off its 3.93% target" and "inside its bounds" in why


def test_weather_means_are_the_cited_annual_means() -> None:
    f = year("cn-nm-horinger")
    assert f["temperature_c"].mean() == pytest.approx(7.0, abs=0.05)  # [S21]
    july = f.loc["2023-07"]["temperature_c"].mean()
    jan = f.loc["2023-01"]["temperature_c"].mean()
    assert july - jan > 20
    assert f["relative_humidity_pct"].between(5, 100).all()


def test_sichuan_hydro_wet_season_is_cleaner() -> None:
    ci = year("cn-sc-tianfu")["carbon_intensity_g_per_kwh"]
    assert ci.loc["2023-08"].mean() < 0.5 * ci.loc["2023-01"].mean()


def test_solar_elevation_hand_checked() -> None:
    # Beijing at solar noon on the June solstice: 90 - 39.904 + 23.44 = 73.54 deg
    t = pd.DatetimeIndex([pd.Timestamp("2023-06-21T04:16:00Z")])
    s = cm.solar_elevation_sin(t, 39.904, 116.407)[0]
    assert math.degrees(math.asin(s)) == pytest.approx(73.54, abs=0.5)
    # equator, equinox, noon at Greenwich: sun near the zenith; midnight: below the horizon
    t2 = pd.DatetimeIndex([pd.Timestamp("2023-03-20T12:07:00Z"),
                           pd.Timestamp("2023-03-20T00:00:00Z")])
    s2 = cm.solar_elevation_sin(t2, 0.0, 0.0)
    assert s2[0] == pytest.approx(1.0, abs=2e-4)
    assert s2[1] == pytest.approx(-1.0, abs=2e-3)


def test_naive_start_refused() -> None:
    with pytest.raises(TimeAxisError, match=r"start 2023-07-15T00:00:00 is naive"):
        cm.load_signals(CATALOG.site("cn-nx-zhongwei"), pd.Timestamp("2023-07-15"),
                        pd.Timestamp("2023-07-16", tz=UTC))


def test_bad_ranges_refused() -> None:
    site = CATALOG.site("cn-nx-zhongwei")
    with pytest.raises(TimeAxisError, match=r"start 2023-07-15T00:30:00\+00:00 is not on the hour"):
        cm.load_signals(site, pd.Timestamp("2023-07-15T00:30Z"), pd.Timestamp("2023-07-16T00:00Z"))
    with pytest.raises(TimeAxisError, match=r"must be after start"):
        cm.load_signals(site, pd.Timestamp("2023-07-15T00:00Z"), pd.Timestamp("2023-07-15T00:00Z"))


def test_unknown_province_refused() -> None:
    site = dataclasses.replace(CATALOG.site("cn-nx-zhongwei"), id="x", province="CN-XZ")
    with pytest.raises(CatalogError, match=r"site 'x': province 'CN-XZ' has no parameters in "
                                           r"data/china_grid_model.toml; set the site's province "
                                           r"to one of CN-GD, CN-GS"):
        cm.load_signals(site, pd.Timestamp("2023-07-15T00:00Z"), pd.Timestamp("2023-07-16T00:00Z"))


def test_table_factor_used_when_site_has_none() -> None:
    site = dataclasses.replace(CATALOG.site("cn-gz-guian"), annual_emission_factor_g_per_kwh=None)
    f, _ = cm.load_signals(site, pd.Timestamp("2023-01-01T00:00Z"),
                           pd.Timestamp("2024-01-01T00:00Z"))
    assert f["carbon_intensity_g_per_kwh"].mean() == pytest.approx(568.3, rel=1e-9)


def test_every_parameter_has_a_source() -> None:
    import tomllib
    from importlib import resources

    raw = tomllib.loads(resources.files("carbonsched.data")
                        .joinpath("china_grid_model.toml").read_text("utf-8"))
    tables = [raw["model"], raw["national"], *raw["provinces"].values()]
    for t in tables:
        for key, v in t.items():
            if key in ("name", "version"):
                continue
            assert isinstance(v, dict) and v["source"].strip(), key
