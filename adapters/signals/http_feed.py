"""A generic CSV or JSON feed over HTTP with a declared column mapping.

For grids with no public API (for example a provincial dispatch-centre export in China): the
providers file declares where the feed is, how its time column reads and which of its columns
feed which carbonsched signal (``regions/schema.md``, section *Providers file*)::

    [providers.js-dispatch]
    kind = "http-feed"
    base_url = "https://dispatch.example.cn"
    path = "/export/{zone}.csv?from={start}&to={end}"
    format = "csv"                 # or "json" (then ``records`` names the list, dotted path)
    time_column = "time"
    time_zone = "Asia/Shanghai"    # for stamps without offset; stamps with offsets are converted
    time_label = "end"             # "start" (default) or "end" of the interval
    columns = { carbon_intensity_g_per_kwh = "ci_gco2_kwh", renewable_pct = "re_share" }
    scale = { renewable_pct = 100.0 }   # optional multipliers (a 0-1 share to %)

Rules (tested): stamps without offset are read in ``time_zone`` (a spring-gap label or an
ambiguous autumn label raises, because the feed must then give offsets); sub-hourly rows are
averaged to hour start; ``time_label = "end"`` shifts stamps back by one interval; empty cells and
``null`` stay NaN; a mapped column absent from the feed raises naming it; a carbon intensity
outside 0..1,500 g/kWh is NaN (noted), and a feed with more than 2 % of its hours outside is
refused as being in another unit (``scale`` converts one: lbs/MWh × 0.45359237).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from carbonsched.adapters.http import Fetcher
from carbonsched.adapters.signals._live import (
    finish,
    hourly_mean,
    iso_z,
    mask_implausible_ci,
    offset_stamps_utc,
)
from carbonsched.errors import ProviderConfigError, ProviderError


@dataclass(frozen=True)
class FeedSpec:
    """A declared feed (see the module docstring)."""

    name: str
    path: str
    format: str = "csv"
    time_column: str = "time"
    time_zone: str = "UTC"
    time_label: str = "start"
    columns: Mapping[str, str] = field(default_factory=dict)
    scale: Mapping[str, float] = field(default_factory=dict)
    records: str = "data"

    def __post_init__(self) -> None:
        if self.format not in ("csv", "json"):
            raise ProviderConfigError(self.name, f"format {self.format!r} must be csv or json")
        if self.time_label not in ("start", "end"):
            raise ProviderConfigError(self.name, f"time_label {self.time_label!r} must be "
                                      "start or end")
        if not self.columns:
            raise ProviderConfigError(self.name, "columns mapping is empty; map at least one "
                                      "signal (e.g. carbon_intensity_g_per_kwh = \"ci\")")


def read_http_feed(body: str | bytes, spec: FeedSpec) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse a feed body with its declared mapping into an hour-start UTC frame.

    Raises
    ------
    ProviderError
        Unparsable body, a missing mapped or time column, unparsable stamps or numbers.
    """
    text = body.decode("utf-8-sig") if isinstance(body, bytes) else body
    try:
        if spec.format == "csv":
            raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        else:
            import json

            doc: Any = json.loads(text)
            for key in spec.records.split(".") if spec.records else []:
                doc = doc[key]
            raw = pd.DataFrame(doc).astype(object)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProviderError(spec.name, f"feed body is not {spec.format} with the declared "
                            f"layout: {exc}") from exc
    needed = [spec.time_column, *spec.columns.values()]
    missing = [c for c in needed if c not in raw.columns]
    if missing:
        raise ProviderError(spec.name, f"feed has no column(s) {missing}; it has "
                            f"{list(raw.columns)}")
    stamps = raw[spec.time_column].astype(str)
    # stamps with offsets: each by its own (local stamps carry two across a DST change)
    with_offset = offset_stamps_utc(stamps, spec.name, f"time column {spec.time_column!r}")
    if with_offset is not None:
        parsed = pd.Series(with_offset)
    else:
        try:
            parsed = pd.to_datetime(stamps, format="ISO8601")
        except (ValueError, TypeError) as exc:
            raise ProviderError(spec.name, f"time column {spec.time_column!r}: {exc}") from exc
        try:
            parsed = parsed.dt.tz_localize(spec.time_zone, ambiguous="raise",
                                           nonexistent="raise")
        except Exception as exc:  # pytz/zoneinfo raise several types
            raise ProviderError(spec.name, f"stamps without offset in {spec.time_zone}: {exc}; "
                                "the feed must give UTC offsets around DST changes") from exc
    idx = pd.DatetimeIndex(parsed).tz_convert("UTC")
    frame = pd.DataFrame(index=idx)
    for signal, col in spec.columns.items():
        values = pd.to_numeric(raw[col].replace({"": None, "null": None, "NA": None}),
                               errors="coerce")
        bad = values.isna() & raw[col].notna() & ~raw[col].isin(["", "null", "NA"])
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ProviderError(spec.name, f"column {col!r} row {i + 1}: {raw[col].iloc[i]!r} "
                                "is not a number")
        frame[signal] = values.to_numpy(float) * float(spec.scale.get(signal, 1.0))
    frame = frame.sort_index()
    notes: list[str] = []
    frame = mask_implausible_ci(frame, spec.name, "feed", notes)
    steps = frame.index.to_series().diff().dropna()
    period = steps.min() if len(steps) else pd.Timedelta(hours=1)
    if spec.time_label == "end":
        frame.index = frame.index - period
    if period < pd.Timedelta(hours=1):
        frame, more = hourly_mean(frame, period, spec.name)
        notes.extend(more)
    frame["is_estimated"] = False
    frame, newest = finish(frame, spec.name, "feed", list(spec.columns))
    return frame, {"source": spec.name, "signal_type": ",".join(spec.columns),
                   "emission_factor_type": None, "newest_value_at": newest, "notes": notes,
                   "time_convention": f"{spec.time_column} = interval {spec.time_label}, "
                                      f"{spec.time_zone} when without offset"}


def get_http_feed(fetcher: Fetcher, spec: FeedSpec, zone: str, start: pd.Timestamp,
                  end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fetch the feed for ``zone`` on ``[start, end)`` and parse it with its mapping."""
    url = spec.path.format(zone=zone, start=iso_z(start), end=iso_z(end))
    response = fetcher.request("GET", url)
    frame, meta = read_http_feed(response.content, spec)
    meta.update(zone=zone, requests=1)
    return frame[(frame.index >= start) & (frame.index < end)], meta
