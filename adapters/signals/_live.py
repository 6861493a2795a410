"""Helpers shared by the live provider clients (private).

Every ``read_<provider>()`` of a live client returns ``(frame, meta)``:

* ``frame``: index ``ts`` — tz-aware UTC, hourly, each stamp the **start** of its hour — and
  columns named with their units (``carbon_intensity_g_per_kwh``, ``temperature_c``, ...), plus a
  boolean ``is_estimated`` where the provider flags estimates; ``null`` values stay NaN (never 0);
* ``meta``: provenance — ``source`` (provider), ``zone``, ``signal_type``,
  ``emission_factor_type`` (``direct``/``lifecycle`` or ``None``), ``time_convention`` (what the
  provider's stamps mean and what was done to them), ``newest_value_at`` (start of the newest
  hour with a value, ISO 8601 UTC, or ``None``) and ``notes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals._common import OFFSET_RE
from carbonsched.adapters.signals.quality import CI_RANGE_G_PER_KWH, MAX_BAD_ROW_SHARE
from carbonsched.errors import ProviderError, TimeAxisError

HOUR = pd.Timedelta(hours=1)

CI_COLUMNS = ("carbon_intensity_g_per_kwh", "carbon_intensity_lca_g_per_kwh",
              "marginal_carbon_intensity_g_per_kwh")
"""Carbon-intensity columns a live reader may return. [gCO2eq/kWh]"""


def offset_stamps_utc(values: Sequence[Any] | pd.Series, provider: str, what: str
                      ) -> pd.DatetimeIndex | None:
    """Parse ISO 8601 stamps that all carry an offset (or ``Z``) to UTC, each by its own offset.

    Local stamps across a DST change carry two offsets (``+01:00`` before, ``+02:00`` after);
    each converts by its own, where a parse into one zone refuses the mix. An offset is
    ``Z``, ``±HH:MM``, ``±HHMM`` or ``±HH`` after the time
    (:data:`~carbonsched.adapters.signals._common.OFFSET_RE`).

    Parameters
    ----------
    values
        The stamps, shape ``(n,)``, as the provider wrote them.
    provider
        The provider's name, for the error.
    what
        What the stamps are (``"DE carbon intensity"``), for the error.

    Returns
    -------
    DatetimeIndex or None
        UTC, one per stamp, shape ``(n,)``; None when no stamp has an offset (the caller
        decides what naive stamps mean), an empty UTC index for no stamps.

    Raises
    ------
    ProviderError
        Some stamps with an offset and some without (the first that differs quoted), or a
        stamp that cannot be parsed.
    """
    text = pd.Series([str(v).strip() for v in values], dtype=object)
    if text.empty:
        return pd.DatetimeIndex([], tz="UTC")
    has_offset = text.str.contains(OFFSET_RE).to_numpy(bool)
    if not has_offset.any():
        return None
    if not has_offset.all():
        i = int(np.flatnonzero(~has_offset)[0])
        raise ProviderError(provider, f"{what}: timestamp {text.iloc[i]!r} has no UTC offset "
                            "while others have one; give every stamp an offset")
    try:
        return pd.DatetimeIndex(pd.to_datetime(text, format="ISO8601", utc=True))
    except (ValueError, TypeError) as exc:
        raise ProviderError(provider, f"{what}: unparsable timestamp ({exc})") from exc


def utc_stamps(values: Sequence[Any] | pd.Series, provider: str, what: str) -> pd.DatetimeIndex:
    """Parse provider timestamps that carry an offset or ``Z``; refuse naive ones.

    Each stamp converts by its own offset (:func:`offset_stamps_utc`).

    Parameters
    ----------
    values, provider, what
        As :func:`offset_stamps_utc`.

    Returns
    -------
    DatetimeIndex
        UTC, shape ``(n,)``.

    Raises
    ------
    ProviderError
        A stamp that cannot be parsed or has no offset (the first one quoted).
    """
    idx = offset_stamps_utc(values, provider, what)
    if idx is None:
        raise ProviderError(provider, f"{what}: timestamp {str(list(values)[0])!r} has no UTC "
                            "offset; refusing to guess its zone")
    return idx


def hourly_mean(frame: pd.DataFrame, period: pd.Timedelta, provider: str,
                min_coverage: float = 0.5) -> tuple[pd.DataFrame, list[str]]:
    """Aggregate sub-hourly interval-start points to hour-start means.

    An hour keeps its mean when at least ``min_coverage`` of its points have values; otherwise
    it is NaN (counted in the returned notes). Boolean columns are "any" within the hour.
    """
    notes: list[str] = []
    if period >= HOUR or frame.empty:
        return frame, notes
    per_hour = int(HOUR / period)
    hour = frame.index.floor("h")
    num = frame.select_dtypes(include="number")
    grouped = num.groupby(hour)
    means = grouped.mean()
    counts = grouped.count()
    thin = counts < min_coverage * per_hour
    if thin.to_numpy().any():
        notes.append(f"{int(thin.any(axis=1).sum())} hour(s) with fewer than "
                     f"{min_coverage:.0%} of their {per_hour} points: NaN")
    means = means.mask(thin)
    for c in frame.columns.difference(num.columns):
        means[c] = frame[c].astype(bool).groupby(hour).any()
    notes.append(f"{per_hour} points of {int(period.total_seconds() // 60)} min averaged per hour")
    means.index.name = "ts"
    return means, notes


def mask_implausible_ci(frame: pd.DataFrame, provider: str, what: str,
                        notes: list[str]) -> pd.DataFrame:
    """Carbon intensity outside the physical range set to NaN (noted); refuse too many.

    The range is :data:`carbonsched.adapters.signals.quality.CI_RANGE_G_PER_KWH`; an answer with
    more than :data:`~carbonsched.adapters.signals.quality.MAX_BAD_ROW_SHARE` of its valued hours
    outside it is in another unit and refused.

    Raises
    ------
    ProviderError
        Naming the column, the count, the first hours and values.
    """
    lo, hi = CI_RANGE_G_PER_KWH
    out = frame
    for c in CI_COLUMNS:
        if c not in frame:
            continue
        v = frame[c].astype(float)
        bad = (v < lo) | (v > hi)
        n = int(bad.sum())
        if not n:
            continue
        first = ", ".join(f"{t.isoformat()}: {x:g}" for t, x in v[bad].head(3).items())
        if n / max(int(v.notna().sum()), 1) > MAX_BAD_ROW_SHARE:
            raise ProviderError(provider, f"{what}: {c}: {n} of {int(v.notna().sum())} hours "
                                f"outside the physical range {lo:g}..{hi:g} g/kWh (first "
                                f"{first}): the answer is in another unit (lbs/MWh is 2.2 times "
                                "g/kWh); fix the feed's unit or its declared scale")
        out = out.copy() if out is frame else out
        out.loc[bad, c] = np.nan
        notes.append(f"{n} hour(s) of {c} outside {lo:g}..{hi:g} g/kWh set to NaN (first "
                     f"{first})")
    return out


def finish(frame: pd.DataFrame, provider: str, what: str,
           value_columns: Iterable[str]) -> tuple[pd.DataFrame, str | None]:
    """Sort, check the hour grid and duplicates; return the frame and its newest valued hour.

    Raises
    ------
    TimeAxisError
        A stamp off the hour after conversion.
    ProviderError
        Two different values for one hour (chunk boundaries may repeat an hour with the *same*
        value; that copy is dropped).
    """
    frame = frame.sort_index()
    frame.index.name = "ts"
    off = frame.index[frame.index != frame.index.floor("h")]
    if len(off):
        raise TimeAxisError(f"{provider} {what}: stamp {off[0].isoformat()} is not on the hour")
    dup = frame.index.duplicated(keep="first")
    if dup.any():
        d = frame[frame.index.isin(frame.index[dup])]
        conflicting = d.groupby(level=0).nunique(dropna=False).gt(1).any(axis=1)
        if conflicting.any():
            ts = conflicting[conflicting].index[0]
            raise ProviderError(provider, f"{what}: hour {ts.isoformat()} returned twice with "
                                "different values")
        frame = frame[~dup]
    cols = [c for c in value_columns if c in frame]
    valued = frame[cols].notna().any(axis=1) if cols else pd.Series(False, index=frame.index)
    newest = frame.index[valued.to_numpy()].max() if valued.any() else None
    return frame, (None if newest is None or pd.isna(newest) else newest.isoformat())


def as_float(values: Iterable[Any]) -> np.ndarray:
    """Provider numbers as float, ``None``/``null`` as NaN (never 0)."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def iso_z(ts: pd.Timestamp) -> str:
    """``2023-07-01T00:00:00Z``."""
    return ts.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def chunks(start: pd.Timestamp, end: pd.Timestamp,
           size: pd.Timedelta) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """``[start, end)`` cut into consecutive windows of at most ``size``."""
    out = []
    t = start
    while t < end:
        out.append((t, min(end, t + size)))
        t = t + size
    return out
