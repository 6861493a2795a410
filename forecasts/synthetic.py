"""Synthetic hourly series with the shapes of carbonsched's signals, for tests and test data.

Every generator is seeded and returns ``(y, X)`` as a forecaster's ``fit`` takes them (``X`` the
hourly weather where a signal depends on it, else ``None``); :mod:`carbonsched.forecasts.testing`
checks every forecaster on them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from carbonsched.domain import PueModel
from carbonsched.forecasts.pue import pue_from_weather

START = pd.Timestamp("2023-03-01T00:00:00Z")
"""First hour of every synthetic series (UTC)."""
N_HOURS = 24 * 70
"""Default length of a synthetic series: ten weeks. [h]"""


def hourly_index(n: int = N_HOURS) -> pd.DatetimeIndex:
    """``n`` hourly UTC timestamps from :data:`START`, named ``ts``."""
    return pd.date_range(START, periods=n, freq="h", name="ts")


def synthetic_weather(seed: int = 0, n: int = N_HOURS) -> pd.DataFrame:
    """Hourly weather: temperature 5-35 °C (daily and slow cycle) and humidity 30-90 %."""
    rng = np.random.default_rng(seed)
    idx = hourly_index(n)
    h = np.arange(n)
    t = 18 + 8 * np.sin(2 * np.pi * (h - 9) / 24) + 6 * np.sin(2 * np.pi * h / (24 * 20))
    t = t + rng.normal(0, 1.0, n)
    rh = np.clip(60 - 1.5 * (t - 18) + rng.normal(0, 8, n), 5, 100)
    return pd.DataFrame({"temperature_c": t, "relative_humidity_pct": rh}, index=idx)


def synthetic_level(seed: int = 0, n: int = N_HOURS) -> tuple[pd.Series, pd.DataFrame | None]:
    """Carbon-intensity-like series (~300 g/kWh, daily and weekly cycle, AR(1) noise)."""
    rng = np.random.default_rng(seed)
    h = np.arange(n)
    noise = np.zeros(n)
    e = rng.normal(0, 12, n)
    for i in range(1, n):
        noise[i] = 0.8 * noise[i - 1] + e[i]
    y = (300 + 80 * np.sin(2 * np.pi * (h - 6) / 24) + 30 * ((h // 24) % 7 >= 5) + noise)
    return pd.Series(y, index=hourly_index(n), name="y"), synthetic_weather(seed, n)


def synthetic_index(seed: int = 0, n: int = N_HOURS) -> tuple[pd.Series, pd.DataFrame | None]:
    """Surplus-index-like series in [0, 1]: midday peaks on some days, zero at night."""
    rng = np.random.default_rng(seed)
    h = np.arange(n)
    day_strength = rng.uniform(0, 1, n // 24 + 1)[h // 24]
    shape = np.clip(np.sin(2 * np.pi * (h % 24 - 6) / 24), 0, None)
    y = np.clip(day_strength * shape * 1.3 - 0.3 + rng.normal(0, 0.05, n), 0, 1)
    return pd.Series(y, index=hourly_index(n), name="green_surplus_index"), None


def synthetic_pue(seed: int = 0, n: int = N_HOURS) -> tuple[pd.Series, pd.DataFrame | None]:
    """Measured-PUE-like series from :func:`pue_from_weather` on synthetic weather plus noise."""
    rng = np.random.default_rng(seed)
    w = synthetic_weather(seed, n)
    y = pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], PueModel())
    return (y + rng.normal(0, 0.01, n)).rename("pue"), w
