"""Contractual instruments and per-site factors for the market-based method (Scope 2).

The input is a TOML file (``carbonsched report --instruments FILE``)::

    [sites."de-frankfurt"]
    market = "DE"                      # market / grid boundary; default: the site's zone
    residual_mix_g_per_kwh = 724.0     # for energy no instrument covers
    residual_mix_source = "AIB, European Residual Mixes 2023 (DE)"
    fossil_g_per_kwh = 820.0           # optional: hourly rule's factor when no residual mix

    [[instruments]]
    id = "go-de-2023-07"
    kind = "certificate"               # certificate | ppa | supplier
    market = "DE"
    valid_from = 2023-07-01T00:00:00Z  # TOML datetimes with offset (naive ones are refused)
    valid_to = 2023-08-01T00:00:00Z    # exclusive
    volume_mwh = 2.0                   # certificates: the volume; a PPA: sum of its profile
    factor_g_per_kwh = 0.0             # default 0 (renewable); supplier: required
    hourly = false                     # certificate with hourly granularity (needs a profile)
    profile_csv = "ppa.csv"            # PPA / hourly certificate: columns hour_utc, energy_mwh
    # or inline: profile = [{hour = 2023-07-03T10:00:00Z, mwh = 0.5}, ...]
    sites = ["de-frankfurt"]           # optional: only these sites (supplier: required)
    source = "registry id, contract"

Rules (GHG Protocol Scope 2 Guidance 2015, ch. 6-7; GHG Protocol, Scope 2 public consultation
draft, October 2025):

* an instrument counts only for sites in its own ``market`` and for consumption inside its
  validity period ``[valid_from, valid_to)``; a supplier-specific factor applies to the energy of
  its ``sites`` that no volume instrument covers;
* ids are unique; two supplier factors for the same site with overlapping validity are an
  error; volume instruments that together exceed the consumption are **capped**, applied in the
  file's order, and the unused volume is reported (never carried to other markets or periods).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.errors import DataFormatError, InputError, UnknownSiteError

KINDS = ("certificate", "ppa", "supplier")


@dataclass(frozen=True)
class SiteFactors:
    """Market-based configuration of one site.

    Attributes
    ----------
    market
        Market and grid boundary the site's instruments must come from.
    residual_mix_g_per_kwh
        Residual-mix emission factor for uncovered energy, or ``None``. [gCO2e/kWh]
    residual_mix_source
        Where the residual-mix factor comes from.
    fossil_g_per_kwh
        Fossil factor for the hourly rule's unmatched energy when no residual mix is configured,
        or ``None``. [gCO2e/kWh]
    """

    market: str
    residual_mix_g_per_kwh: float | None = None
    residual_mix_source: str = ""
    fossil_g_per_kwh: float | None = None


@dataclass(frozen=True)
class Instrument:
    """One contractual instrument.

    Attributes
    ----------
    id, kind, market, source
        Identity; ``kind`` in :data:`KINDS`.
    valid_from, valid_to
        Validity ``[valid_from, valid_to)``, tz-aware UTC.
    volume_mwh
        Volume (certificates; PPAs: the profile's sum inside the validity). [MWh]
    factor_g_per_kwh
        Emission factor of the energy the instrument covers. [gCO2e/kWh]
    hourly
        Whether the instrument carries hourly granularity (PPAs always do).
    profile_mwh
        Hourly generation or certificate volume, index hour (UTC), or ``None``. [MWh]
    sites
        Sites the instrument is restricted to (empty: every site of its market).
    """

    id: str
    kind: str
    market: str
    valid_from: pd.Timestamp
    valid_to: pd.Timestamp
    volume_mwh: float = 0.0
    factor_g_per_kwh: float = 0.0
    hourly: bool = False
    profile_mwh: pd.Series | None = None
    sites: tuple[str, ...] = ()
    source: str = ""

    @property
    def rule_2015(self) -> str:
        """How the 2015 rule counts it."""
        if self.kind == "supplier":
            return "supplier-specific factor on energy no volume instrument covers"
        return "annual matching: volume against the market's consumption in its validity"

    @property
    def rule_hourly(self) -> str:
        """How the hourly-matching rule counts it."""
        if self.kind == "supplier":
            return "supplier-specific factor on unmatched energy"
        if self.profile_mwh is not None:
            return "hourly matching by its hourly profile"
        return ("no hourly granularity: volume spread evenly over the validity hours, then "
                "matched hour by hour (flat load-profile approximation)")

    def hourly_volume_mwh(self, hours: pd.DatetimeIndex) -> pd.Series:
        """The instrument's volume on ``hours`` for hourly matching. [MWh]"""
        if self.profile_mwh is not None:
            return self.profile_mwh.reindex(hours).fillna(0.0)
        n = max((self.valid_to - self.valid_from) / pd.Timedelta(hours=1), 1.0)
        inside = (hours >= self.valid_from) & (hours < self.valid_to)
        return pd.Series(inside.astype(float) * self.volume_mwh / n, index=hours)


@dataclass
class MarketConfig:
    """Site factors and instruments from one TOML file (or none)."""

    sites: dict[str, SiteFactors] = field(default_factory=dict)
    instruments: list[Instrument] = field(default_factory=list)
    path: str = ""

    def site(self, site_id: str, zone: str) -> SiteFactors:
        """Factors of ``site_id``; default market = its zone, no residual mix."""
        return self.sites.get(site_id, SiteFactors(market=zone))



def _num(value: Any, where: str, path: Any) -> float:
    """``value`` as a finite float, or a :class:`DataFormatError` naming the file and field."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(path, f"{where}: {value!r} is not a number") from None
    if not math.isfinite(out):
        raise DataFormatError(path, f"{where}: {value!r} is not a finite number")
    return out

def _ts(value: Any, where: str, path: Path) -> pd.Timestamp:
    if isinstance(value, datetime):
        t = pd.Timestamp(value)
    else:
        try:
            t = pd.Timestamp(str(value))
        except ValueError as exc:
            raise DataFormatError(path, f"{where}: cannot read {value!r} as a time") from exc
    if t.tzinfo is None:
        raise DataFormatError(path, f"{where}: time {value!r} has no UTC offset; write it as "
                                    "2023-07-01T00:00:00Z")
    return t.tz_convert("UTC")


def _profile(raw: dict[str, Any], iid: str, path: Path) -> pd.Series | None:
    if "profile_csv" in raw:
        p = Path(raw["profile_csv"])
        p = p if p.is_absolute() else path.parent / p
        if not p.exists():
            raise DataFormatError(p, f"instrument {iid!r}: profile file not found")
        df = pd.read_csv(p)
        missing = {"hour_utc", "energy_mwh"} - set(df.columns)
        if missing:
            raise DataFormatError(p, f"instrument {iid!r}: profile lacks column(s) "
                                     f"{', '.join(sorted(missing))} (needs hour_utc, energy_mwh)")
        hours = [_ts(v, f"instrument {iid!r} profile line {i + 2}", p)
                 for i, v in enumerate(df["hour_utc"])]
        s = pd.Series([_num(v, f"instrument {iid!r} profile line {i + 2} energy_mwh", p)
                       for i, v in enumerate(df["energy_mwh"])],
                      index=pd.DatetimeIndex(hours), dtype=float)
    elif "profile" in raw:
        rows = raw["profile"]
        s = pd.Series([_num(r.get("mwh"), f"instrument {iid!r} profile mwh", path)
                       for r in rows],
                      index=pd.DatetimeIndex([_ts(r["hour"], f"instrument {iid!r} profile", path)
                                              for r in rows]))
    else:
        return None
    if s.index.has_duplicates:
        raise DataFormatError(path, f"instrument {iid!r}: profile repeats hour "
                                    f"{s.index[s.index.duplicated()][0].isoformat()}")
    if (s < 0).any():
        raise DataFormatError(path, f"instrument {iid!r}: negative profile energy")
    if (s.index != s.index.floor("h")).any():
        raise DataFormatError(path, f"instrument {iid!r}: profile hours must be on the hour")
    return s.sort_index()


def load_market_config(path: str | Path | None, site_ids: set[str] | None = None
                       ) -> MarketConfig:
    """Read the instruments TOML (module docstring); ``None`` gives an empty configuration.

    Parameters
    ----------
    path
        The TOML file or ``None``.
    site_ids
        Known site ids; sites outside it are refused.

    Raises
    ------
    DataFormatError
        Unreadable TOML, unknown kind, naive or inverted validity, negative volume, a profile
        that cannot be read, a duplicated id.
    UnknownSiteError
        A site the catalog does not define.
    InputError
        Two supplier factors for one site overlapping in time.
    """
    if path is None:
        return MarketConfig()
    p = Path(path)
    if not p.exists():
        raise DataFormatError(p, "instruments file not found")
    try:
        raw = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise DataFormatError(p, f"not valid TOML: {exc}") from exc
    known = site_ids or set()

    def _check_site(sid: str, where: str) -> None:
        if known and sid not in known:
            raise UnknownSiteError(f"{p}: {where} names site {sid!r}, which the catalog does "
                                   f"not define (its sites: {', '.join(sorted(known))})")

    sites: dict[str, SiteFactors] = {}
    for sid, cfg in raw.get("sites", {}).items():
        _check_site(sid, "[sites]")
        if "market" not in cfg:
            raise DataFormatError(p, f"[sites.{sid}] needs a market (e.g. its grid zone)")
        for k in ("residual_mix_g_per_kwh", "fossil_g_per_kwh"):
            if k in cfg and _num(cfg[k], f"[sites.{sid}] {k}", p) < 0:
                raise DataFormatError(p, f"[sites.{sid}] {k} must be >= 0")
        sites[sid] = SiteFactors(
            market=str(cfg["market"]),
            residual_mix_g_per_kwh=(None if "residual_mix_g_per_kwh" not in cfg
                                    else float(cfg["residual_mix_g_per_kwh"])),
            residual_mix_source=str(cfg.get("residual_mix_source", "")),
            fossil_g_per_kwh=(None if "fossil_g_per_kwh" not in cfg
                              else float(cfg["fossil_g_per_kwh"])))
    instruments: list[Instrument] = []
    seen: set[str] = set()
    for n, r in enumerate(raw.get("instruments", []), 1):
        iid = str(r.get("id") or f"#{n}")
        where = f"instrument {iid!r}"
        if iid in seen:
            raise DataFormatError(p, f"{where} is listed twice; ids must be unique (a "
                                     "certificate counted twice is double counting)")
        seen.add(iid)
        kind = str(r.get("kind", ""))
        if kind not in KINDS:
            raise DataFormatError(p, f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        for k in ("market", "valid_from", "valid_to"):
            if k not in r:
                raise DataFormatError(p, f"{where}: missing {k}")
        t0 = _ts(r["valid_from"], f"{where} valid_from", p)
        t1 = _ts(r["valid_to"], f"{where} valid_to", p)
        if t1 <= t0:
            raise DataFormatError(p, f"{where}: valid_to {t1.isoformat()} is not after "
                                     f"valid_from {t0.isoformat()}")
        isites = tuple(str(s) for s in r.get("sites", ()))
        for s in isites:
            _check_site(s, where)
        profile = _profile(r, iid, p)
        if profile is not None:
            profile = profile[(profile.index >= t0) & (profile.index < t1)]
        if kind == "supplier":
            if not isites:
                raise DataFormatError(p, f"{where}: a supplier-specific factor needs sites = [..]")
            if "factor_g_per_kwh" not in r:
                raise DataFormatError(p, f"{where}: a supplier-specific factor needs "
                                         "factor_g_per_kwh")
            volume = 0.0
        elif kind == "ppa":
            if profile is None:
                raise DataFormatError(p, f"{where}: a PPA needs its hourly generation profile "
                                         "(profile_csv or profile)")
            volume = float(profile.sum())
        else:
            if bool(r.get("hourly", False)) and profile is None:
                raise DataFormatError(p, f"{where}: hourly = true needs a profile")
            volume = (float(profile.sum()) if profile is not None
                      else _num(r.get("volume_mwh", -1), f"{where}: volume_mwh", p))
            if volume < 0:
                raise DataFormatError(p, f"{where}: volume_mwh must be given and >= 0")
        factor = _num(r.get("factor_g_per_kwh", 0.0), f"{where}: factor_g_per_kwh", p)
        if factor < 0:
            raise DataFormatError(p, f"{where}: factor_g_per_kwh must be >= 0")
        instruments.append(Instrument(
            id=iid, kind=kind, market=str(r["market"]), valid_from=t0, valid_to=t1,
            volume_mwh=volume, factor_g_per_kwh=factor,
            hourly=kind == "ppa" or profile is not None, profile_mwh=profile, sites=isites,
            source=str(r.get("source", ""))))
    sup = [i for i in instruments if i.kind == "supplier"]
    for a_i, a in enumerate(sup):
        for b in sup[a_i + 1:]:
            both = set(a.sites) & set(b.sites)
            if both and a.valid_from < b.valid_to and b.valid_from < a.valid_to:
                raise InputError(
                    f"{p}: supplier factors {a.id!r} and {b.id!r} both apply to site(s) "
                    f"{', '.join(sorted(both))} between {max(a.valid_from, b.valid_from):%Y-%m-%d}"
                    f" and {min(a.valid_to, b.valid_to):%Y-%m-%d}; a site has one supplier at a "
                    "time: shorten one validity period")
    return MarketConfig(sites=sites, instruments=instruments, path=str(p))
