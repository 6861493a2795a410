"""Green-power surplus: an hourly index in [0, 1] of renewable power the grid would curtail.

The planner absorbs ``index × site.green_surplus_max_kw`` kW in an hour. Where a source models
curtailment directly (the modelled China source), its ``green_surplus_index`` column is used as
it stands. No Electricity Maps zone publishes curtailment, so :func:`green_surplus_index`
derives a **proxy** from two signals that curtailment follows:

1. **Negative or near-zero day-ahead prices.** Renewable generators with output-based support
   keep producing, and bid below zero, until the market clears at a negative price; negative
   prices therefore mark hours of inflexible oversupply, which is when operators curtail
   (Seel, Millstein, Mills, Bolinger & Wiser, "Plentiful electricity turns wholesale prices
   negative", *Advances in Applied Energy* 4, 100073, 2021, doi:10.1016/j.adapen.2021.100073;
   CAISO, "Managing oversupply", https://www.caiso.com/about/our-business/managing-oversupply,
   where curtailment is reported in the spring midday hours of negative prices).
   ``price_score = clip((p0 - price) / p0, 0, 1)`` with ``p0 = near_zero_price_usd_per_mwh``:
   1 at a price <= 0, falling linearly to 0 at ``p0`` (default 10 USD/MWh, about a tenth of
   the 2023 median day-ahead price in most of the zones).
2. **A renewable share high for the zone.** Curtailment concentrates in the hours of the
   highest renewable share of each grid (Bird, Cochran & Wang, *Wind and Solar Energy
   Curtailment: Experience and Practices in the United States*, NREL/TP-6A20-60983, 2014).
   Grids differ (Brazil's is ~87 % renewable in its median hour, Korea's ~2 %), so the share is
   judged against the zone's *own* distribution: with ``u`` the empirical CDF value of
   ``renewable_pct`` in a reference period, ``renewable_score = clip((u - q) / (1 - q), 0, 1)``
   with ``q = renewable_quantile`` (default 0.9): 0 below the zone's 90th percentile, 1 at its
   maximum.

``green_surplus_index = max(price_score, renewable_score)`` (either alone where the other is
missing; NaN where both are). The proxy is an *indicator of when* surplus is likely, not a
measured MW; the contracted ``green_surplus_max_kw`` sets the scale.

Forecasting: :class:`GreenSurplusForecaster` (per-lead OLS on lagged index values, clipped to
[0, 1], additive split-conformal intervals) and :class:`SurplusSeasonalNaive` (yesterday's
index repeated), both scored in ``bench/results/signal_eval.md`` (16 zones of 2023, 77
day-ahead issues each): mean Brier score 0.055 against 0.071, lower in 14 zones, +0.001 in
IN-WE, +0.043 in CL-SIC, where solar growth pushed late 2023 above the 2022 reference; the
regression is more precise (0.66 against 0.49) but finds fewer surplus hours (recall 0.37
against 0.48), as a conditional mean shrinks towards the frequent zeros.

Known limit: with a fixed reference year the renewable score drifts upwards in a zone whose
renewable share grows fast (CL-SIC: 16 % of 2023 hours score >= 0.5, 45 % in November);
pass a recent ``reference`` (for example the last 365 days) to follow the growth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import InputError
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.carbon_intensity import LeadRegression

INDEX_COLUMN = "green_surplus_index"
PRICE_COLUMN = "price_usd_per_mwh"
RENEWABLE_COLUMN = "renewable_pct"


def price_score(price_usd_per_mwh: pd.Series, near_zero_price_usd_per_mwh: float = 10.0
                ) -> pd.Series:
    """Surplus score of a day-ahead price: 1 at <= 0, linear to 0 at ``near_zero``.

    Parameters
    ----------
    price_usd_per_mwh
        Day-ahead price, shape ``(n,)``. [USD/MWh]
    near_zero_price_usd_per_mwh
        Price at and above which the score is 0. [USD/MWh] Must be > 0.

    Returns
    -------
    Series
        Shape ``(n,)`` in [0, 1]; NaN where the price is NaN.

    Raises
    ------
    InputError
        If ``near_zero_price_usd_per_mwh <= 0``.
    """
    if not near_zero_price_usd_per_mwh > 0:
        raise InputError(
            f"near_zero_price_usd_per_mwh must be > 0 USD/MWh, got {near_zero_price_usd_per_mwh}; "
            "pass for example 10.0")
    p0 = float(near_zero_price_usd_per_mwh)
    return ((p0 - price_usd_per_mwh.astype(float)) / p0).clip(0.0, 1.0)


def renewable_score(renewable_pct: pd.Series, renewable_quantile: float = 0.9,
                    reference: pd.Series | None = None) -> pd.Series:
    """Surplus score of a renewable share judged against the zone's own distribution.

    Parameters
    ----------
    renewable_pct
        Renewable share of generation, shape ``(n,)``. [%]
    renewable_quantile
        ``q`` in (0, 1): shares below the reference's ``q``-quantile score 0. [-]
    reference
        The zone's reference shares (for example the previous year); default ``renewable_pct``
        itself.

    Returns
    -------
    Series
        ``clip((F(x) - q) / (1 - q), 0, 1)`` with ``F`` the empirical CDF of the reference
        (fraction of reference hours <= x); shape ``(n,)``; NaN where the share is NaN.

    Raises
    ------
    InputError
        If ``renewable_quantile`` is not in (0, 1) or the reference has no value.
    """
    if not 0.0 < renewable_quantile < 1.0:
        raise InputError(f"renewable_quantile must be in (0, 1), got {renewable_quantile}; "
                         "pass for example 0.9")
    ref = (renewable_pct if reference is None else reference).dropna().to_numpy(float)
    if ref.size == 0:
        raise InputError("renewable_score: the reference renewable_pct has no value; pass a "
                         "reference period with data")
    ref = np.sort(ref)
    x = renewable_pct.to_numpy(float)
    u = np.searchsorted(ref, x, side="right") / ref.size
    score = np.clip((u - renewable_quantile) / (1.0 - renewable_quantile), 0.0, 1.0)
    score[~np.isfinite(x)] = np.nan
    return pd.Series(score, index=renewable_pct.index)


def green_surplus_index(
    frame: pd.DataFrame,
    near_zero_price_usd_per_mwh: float = 10.0,
    renewable_quantile: float = 0.9,
    reference: pd.Series | None = None,
) -> pd.Series:
    """Hourly green-surplus index in [0, 1] of a site signal frame (``docs/signals.md``).

    Uses the frame's own ``green_surplus_index`` when it has values (sources that model
    curtailment); otherwise ``max(price_score, renewable_score)`` as defined in the module
    docstring, from ``price_usd_per_mwh`` and ``renewable_pct``.

    Parameters
    ----------
    frame
        Hourly signal frame, shape ``(n, k)``.
    near_zero_price_usd_per_mwh
        See :func:`price_score`. [USD/MWh]
    renewable_quantile
        See :func:`renewable_score`. [-]
    reference
        Reference ``renewable_pct`` for the zone's distribution; default the frame's own.

    Returns
    -------
    Series
        ``green_surplus_index``, shape ``(n,)``, values in [0, 1], NaN where no input is known.

    Raises
    ------
    InputError
        If the frame has none of ``green_surplus_index``, ``price_usd_per_mwh``,
        ``renewable_pct``.
    """
    if INDEX_COLUMN in frame and frame[INDEX_COLUMN].notna().any():
        return frame[INDEX_COLUMN].astype(float).clip(0.0, 1.0).rename(INDEX_COLUMN)
    parts = []
    if PRICE_COLUMN in frame and frame[PRICE_COLUMN].notna().any():
        parts.append(price_score(frame[PRICE_COLUMN], near_zero_price_usd_per_mwh))
    if RENEWABLE_COLUMN in frame and frame[RENEWABLE_COLUMN].notna().any():
        parts.append(renewable_score(frame[RENEWABLE_COLUMN], renewable_quantile, reference))
    if not parts:
        raise InputError(
            f"green_surplus_index: the frame has no values in any of {INDEX_COLUMN!r}, "
            f"{PRICE_COLUMN!r}, {RENEWABLE_COLUMN!r} (columns: {list(frame.columns)}); load the "
            "site's signals with prices or renewable share (docs/signals.md)")
    idx = pd.concat(parts, axis=1).max(axis=1, skipna=True)
    return idx.rename(INDEX_COLUMN)


class GreenSurplusForecaster(LeadRegression):
    """Day-ahead forecast of the green-surplus index: per-lead OLS, clipped to [0, 1].

    The features and the fitting are those of
    :class:`~carbonsched.forecasts.carbon_intensity.LeadRegression` (last value, same hour
    yesterday and last week, 7-day same-hour mean, 24 h mean); intervals are additive
    split-conformal on held-out residuals, and every column is clipped to [0, 1].

    Parameters
    ----------
    **params
        As :class:`LeadRegression`; ``relative_intervals`` is False and ``clip`` is (0, 1).
    """

    name = "green-surplus-lead-ols"

    def __init__(self, max_lead_hours: int = 48, train_days: int = 28,
                 calib_fraction: float = 0.5) -> None:
        super().__init__(max_lead_hours=max_lead_hours, train_days=train_days,
                         calib_fraction=calib_fraction, relative_intervals=False,
                         clip=(0.0, 1.0))

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Return the default and a short-lead setting."""
        return [{}, {"max_lead_hours": 6, "train_days": 14}]


class SurplusSeasonalNaive(SeasonalNaive):
    """Seasonal baseline for the index: the same hour one day before issue, clipped to [0, 1].

    Parameters
    ----------
    season_hours
        Season length. [h] Default 24.
    """

    name = "green-surplus-seasonal-naive"

    def __init__(self, season_hours: int = 24) -> None:
        super().__init__(season_hours=season_hours, clip=(0.0, 1.0))

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Return the daily season."""
        return [{"season_hours": 24}]
