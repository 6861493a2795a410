"""Bring your own fleet: write a site catalog from a short table, and check what it can plan.

:func:`fleet_catalog_toml` turns rows (a CSV file, :func:`read_fleet_csv`, or ``--site`` flags,
:func:`parse_site_flag`) into a commented catalog TOML that :func:`carbonsched.catalog.load_catalog`
accepts, and :func:`fleet_providers_toml` the providers file for the rows that name a live
provider. :func:`check_fleet` says, per site, which signal comes from where (a shared-data file
or a provider and its zone), the dates that can be planned and what is modelled or missing.

Row columns (``docs/your-fleet.md``; ``*`` required):

=====================  ==========================================================================
``id*``                site id (letters, digits, ``.``, ``_``, ``-``)
``role*``              ``green-hub``, ``edge``, or ``area`` (a row that is a user area)
``latitude*``          ° N; ``longitude*`` ° E
``timezone*``          IANA zone of the site (or of the area's users)
``zone*``              grid zone: Electricity Maps zone, EIA balancing area or ``CN-xx``
``gpus*``              ``TYPE:COUNT`` or ``TYPE:COUNT:WATTS`` (board power), several joined by
                       ``;``, ``+`` or spaces, e.g. ``A100:16;V100:4``
``backend*``           ``slurm:CLUSTER[:PARTITION]`` or ``kubernetes:CONTEXT/NAMESPACE``
``name``               display name (default: the id)
``signal_source``      ``electricitymaps`` (default), ``eia930`` or ``modelled-china``
``it_power_cap_kw``    IT power cap [kW]; default 0.8 × the GPUs' system power (the shipped
                       catalogs' sizing rule, ``regions/schema.md``), known GPU types only
``facility_power_cap_kw``  grid-connection cap [kW] (optional)
``green_surplus_max_kw``   curtailable green power the site may absorb [kW] (optional)
``provider``           live provider of the carbon intensity: ``KIND`` or ``KIND:ZONE`` (e.g.
                       ``watttime:CAISO_NORTH``); rows with one go into the providers file
``province``           province code for ``modelled-china``
``aliases``            other names (cloud regions), joined by ``;``, ``+`` or spaces
``demand_weight``      area rows: relative share of inference demand (default 1)
=====================  ==========================================================================
"""

from __future__ import annotations

import csv
import json
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.catalog import Catalog, fibre_rtt_ms, parse_catalog
from carbonsched.domain import PueModel, Site
from carbonsched.errors import CarbonschedError, InputError

COLUMNS: tuple[str, ...] = (
    "id", "role", "latitude", "longitude", "timezone", "zone", "gpus", "backend", "name",
    "signal_source", "it_power_cap_kw", "facility_power_cap_kw", "green_surplus_max_kw",
    "provider", "province", "aliases", "demand_weight",
)
"""Columns a fleet row may have (the module docstring says what each means)."""

SITE_REQUIRED: tuple[str, ...] = ("id", "role", "latitude", "longitude", "timezone", "zone",
                                  "gpus", "backend")
"""Columns every site row must fill."""

AREA_REQUIRED: tuple[str, ...] = ("id", "latitude", "longitude", "timezone")
"""Columns every ``role = area`` row must fill."""

IT_CAP_SHARE = 0.8
"""Default IT power cap as a share of the GPUs' full-load system power: the rule the shipped
catalogs were sized with ("the cap binds above 80 % utilisation", ``regions/schema.md``). [-]"""

MIN_HISTORY_HOURS = 48
"""Hours of carbon-intensity history a site needs before a day can be planned, and the most
the newest observation may lie before the issue time (the rules of
:func:`carbonsched.pipeline.daily.forecast_site`). [h]"""

LIVE_PROVIDER_KINDS: tuple[str, ...] = ("electricitymaps", "watttime", "entsoe", "eia",
                                        "http-feed")
"""Provider kinds that can feed a site's carbon intensity (``regions/schema.md``)."""


def _gpu_table() -> dict[str, dict[str, float]]:
    """Board power [W] and system power per GPU [kW] of the known GPU types.

    The values and their sources are in ``data/workload_traces.toml``.
    """
    text = resources.files("carbonsched.data").joinpath("workload_traces.toml").read_text("utf-8")
    out = {}
    for gpu, t in tomllib.loads(text).get("gpu_types", {}).items():
        out[gpu] = {"board_power_w": float(t["board_power_w"]["value"]),
                    "it_power_per_gpu_kw": float(t["it_power_per_gpu_kw"]["value"])}
    return out


# --------------------------------------------------------------------------- reading the rows


def read_fleet_csv(path: str | Path) -> list[dict[str, str]]:
    """The rows of a fleet CSV file (header row with the :data:`COLUMNS` it uses).

    Returns
    -------
    list of dict
        One dict per data row, column -> stripped text, with ``"_where"`` = ``"FILE row N"``
        (N counts the header as row 1, as a spreadsheet does).

    Raises
    ------
    InputError
        Missing file, no data row, or an unknown column (named, with the known ones).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"fleet file {p} not found; give a CSV file with a header row "
                         f"({', '.join(SITE_REQUIRED)}, ...) (docs/your-fleet.md)")
    with p.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in reader.fieldnames or []]
        unknown = [h for h in header if h and h not in COLUMNS]
        if unknown:
            raise InputError(f"{p} row 1: unknown column(s) {', '.join(map(repr, unknown))}; "
                             f"known columns: {', '.join(COLUMNS)} (docs/your-fleet.md)")
        rows = []
        for n, raw in enumerate(reader, start=2):
            row = {k.strip(): (v or "").strip() for k, v in raw.items() if k}
            if not any(row.values()):
                continue
            row["_where"] = f"{p} row {n}"
            rows.append(row)
    if not rows:
        raise InputError(f"{p}: no data row; add one row per site under the header")
    return rows


def parse_site_flag(text: str, position: int = 1) -> dict[str, str]:
    """One ``--site`` flag: ``"key=value key=value ..."`` (shell quoting for spaces).

    Raises
    ------
    InputError
        A token without ``=`` or an unknown key (named, with the known ones).
    """
    where = f"--site #{position}"
    row: dict[str, str] = {"_where": where}
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        if not sep:
            raise InputError(f"{where}: {token!r} is not key=value; write e.g. --site "
                             "\"id=tor role=green-hub latitude=43.7 ...\"")
        if key not in COLUMNS:
            raise InputError(f"{where}: unknown key {key!r}; known keys: {', '.join(COLUMNS)}")
        row[key] = value.strip()
    return row


def _fail(row: Mapping[str, str], column: str, problem: str, fix: str) -> InputError:
    return InputError(f"{row['_where']}, column {column!r}: {problem}; {fix} "
                      "(docs/your-fleet.md)")


def _number(row: Mapping[str, str], column: str, required: bool = True) -> float | None:
    text = row.get(column, "")
    if not text:
        if required:
            raise _fail(row, column, "is empty", "give a number")
        return None
    try:
        value = float(text)
    except ValueError:
        raise _fail(row, column, f"{text!r} is not a number", "give a plain decimal number "
                    "such as 43.7") from None
    return value


def _split(text: str) -> list[str]:
    return [p for p in text.replace(";", " ").replace("+", " ").split() if p]


def _gpus(row: Mapping[str, str], known: Mapping[str, Mapping[str, float]]
          ) -> dict[str, tuple[int, float]]:
    pools: dict[str, tuple[int, float]] = {}
    for part in _split(row.get("gpus", "")):
        bits = part.split(":")
        if len(bits) not in (2, 3):
            raise _fail(row, "gpus", f"{part!r} is not TYPE:COUNT or TYPE:COUNT:WATTS",
                        "write e.g. A100:16 or H100:8:700")
        gpu, count_text = bits[0], bits[1]
        try:
            count = int(count_text)
        except ValueError:
            raise _fail(row, "gpus", f"count {count_text!r} of {gpu} is not a whole number",
                        "give the number of GPUs, e.g. A100:16") from None
        if count < 0:
            raise _fail(row, "gpus", f"count {count} of {gpu} is negative", "give >= 0")
        if len(bits) == 3:
            try:
                watts = float(bits[2])
            except ValueError:
                raise _fail(row, "gpus", f"board power {bits[2]!r} of {gpu} is not a number",
                            "give watts, e.g. H100:8:700") from None
        elif gpu in known:
            watts = known[gpu]["board_power_w"]
        else:
            raise _fail(row, "gpus", f"GPU type {gpu!r} has no known board power",
                        f"give it as {gpu}:{count}:WATTS (known types: {', '.join(known)})")
        if gpu in pools:
            raise _fail(row, "gpus", f"GPU type {gpu!r} is listed twice", "list each type once")
        pools[gpu] = (count, watts)
    if not pools:
        raise _fail(row, "gpus", "is empty", "give at least one TYPE:COUNT, e.g. A100:16")
    return pools


def _backend(row: Mapping[str, str]) -> dict[str, str]:
    text = row.get("backend", "")
    kind, _, rest = text.partition(":")
    if kind == "slurm" and rest:
        cluster, _, partition = rest.partition(":")
        return {"kind": "slurm", "cluster": cluster} | ({"partition": partition}
                                                         if partition else {})
    if kind == "kubernetes" and "/" in rest:
        context, _, namespace = rest.partition("/")
        if context and namespace:
            return {"kind": "kubernetes", "context": context, "namespace": namespace}
    raise _fail(row, "backend", f"{text!r} is not a backend",
                "write slurm:CLUSTER[:PARTITION] or kubernetes:CONTEXT/NAMESPACE")


def _provider(row: Mapping[str, str]) -> tuple[str, str | None] | None:
    text = row.get("provider", "")
    if not text:
        return None
    kind, _, zone = text.partition(":")
    if kind not in LIVE_PROVIDER_KINDS:
        raise _fail(row, "provider", f"unknown provider kind {kind!r}",
                    f"give one of {', '.join(LIVE_PROVIDER_KINDS)}, optionally :ZONE")
    return kind, (zone or None)


# --------------------------------------------------------------------------- writing the TOML


def _q(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def _key(text: str) -> str:
    """A TOML key: bare when it may be (letters, digits, ``_`` and ``-``), else quoted."""
    return text if text and all(c.isascii() and (c.isalnum() or c in "_-") for c in text) \
        else _q(text)


def _fmt(value: float) -> str:
    return repr(round(float(value), 6))


def _areas(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    areas = []
    for r in rows:
        if r.get("role") == "area":
            for col in AREA_REQUIRED:
                if not r.get(col):
                    raise _fail(r, col, "is empty", f"an area row needs {', '.join(AREA_REQUIRED)}")
            areas.append({"id": r["id"], "name": r.get("name") or r["id"],
                          "latitude": _number(r, "latitude"), "longitude": _number(r, "longitude"),
                          "timezone": r["timezone"],
                          "demand_weight": _number(r, "demand_weight", required=False) or 1.0,
                          "derived": False})
    if areas:
        return areas
    sites = [r for r in rows if r.get("role") != "area"]
    edges = [r for r in sites if r.get("role") == "edge"] or sites
    return [{"id": r["id"], "name": r.get("name") or r["id"],
             "latitude": _number(r, "latitude"), "longitude": _number(r, "longitude"),
             "timezone": r["timezone"], "demand_weight": 1.0, "derived": True} for r in edges]


def fleet_catalog_toml(rows: Iterable[Mapping[str, str]], name: str, description: str = "",
                       source: str = "") -> str:
    """A commented catalog TOML for the fleet ``rows`` that :func:`load_catalog` accepts.

    Latencies are the shipped catalogs' assumed fibre rule
    (:func:`carbonsched.catalog.fibre_rtt_ms`, rounded to 0.1 ms); without ``role = area``
    rows every edge (or, with none, every site) is also a user area at its own position; the
    PUE model is left at :class:`carbonsched.domain.PueModel`'s defaults, written as comments.

    Parameters
    ----------
    rows
        Fleet rows (:func:`read_fleet_csv`, :func:`parse_site_flag`).
    name, description
        The catalog's name and description.
    source
        Where the rows came from, for the header comment.

    Returns
    -------
    str
        The TOML text, validated by :func:`carbonsched.catalog.parse_catalog`.

    Raises
    ------
    InputError
        A row with a missing or malformed value: names the row (file and row, or ``--site``
        position), the column and how to fix it; or a catalog-level violation (e.g. an unknown
        time zone), with the row of the site named.
    """
    rows = [dict(r) for r in rows]
    if not rows:
        raise InputError("no site given; give --from FILE.csv or one --site per site "
                         "(docs/your-fleet.md)")
    known = _gpu_table()
    sites = [r for r in rows if r.get("role") != "area"]
    if not sites:
        raise InputError("every row is a user area (role = area); add at least one site row "
                         "with role green-hub or edge")
    for r in sites:
        for col in SITE_REQUIRED:
            if not r.get(col):
                raise _fail(r, col, "is empty", f"a site row needs {', '.join(SITE_REQUIRED)}")
        if r["role"] not in ("green-hub", "edge"):
            raise _fail(r, "role", f"unknown role {r['role']!r}",
                        "give green-hub, edge, or area for a row that is a user area")
    areas = _areas(rows)
    sources = {r.get("signal_source") or "electricitymaps" for r in sites}
    quality = "modelled" if "modelled-china" in sources else "measured"
    out = [f"# Site catalog {name!r}, written by `carbonsched catalog init`"
           + (f" from {source}" if source else "") + ".",
           "# Schema and units: regions/schema.md; walk-through: docs/your-fleet.md.",
           "# Check it with `carbonsched catalog check <this file>`; plan with",
           "# `carbonsched plan --catalog <this file> --date YYYY-MM-DD`.",
           "# ASSUMPTIONS to review: latencies (fibre rule of regions/schema.md, not measured),",
           "# PUE parameters (defaults), power caps where not given (0.8 x GPU system power).",
           f"name = {_q(name)}",
           f"description = {_q(description or f'{name}: {len(sites)} sites')}",
           "# 'measured' when every site has real hourly history, 'modelled' otherwise",
           f"signal_quality = {_q(quality)}", ""]
    for a in areas:
        out += ["# a user area: where latency-critical inference requests come from"
                + (" (this site's position: no role = area row given)" if a["derived"] else ""),
                f"[areas.{_key(a['id'])}]", f"name = {_q(a['name'])}",
                f"latitude = {_fmt(a['latitude'])}", f"longitude = {_fmt(a['longitude'])}",
                f"timezone = {_q(a['timezone'])}",
                f"demand_weight = {_fmt(a['demand_weight'])}  # relative share of demand", ""]
    for r in sites:
        lat, lon = _number(r, "latitude"), _number(r, "longitude")
        assert lat is not None and lon is not None
        pools = _gpus(r, known)
        backend = _backend(r)
        _provider(r)
        cap = _number(r, "it_power_cap_kw", required=False)
        cap_note = "given"
        if cap is None:
            unknown = [g for g in pools if g not in known]
            if unknown:
                raise _fail(r, "it_power_cap_kw", f"is empty and GPU type(s) "
                            f"{', '.join(unknown)} have no known system power",
                            "give the site's IT power cap in kW")
            cap = IT_CAP_SHARE * sum(n * known[g]["it_power_per_gpu_kw"]
                                     for g, (n, _) in pools.items())
            cap_note = (f"ASSUMPTION: {IT_CAP_SHARE:g} x the GPUs' full-load system power "
                        "(data/workload_traces.toml); replace with the PDU/UPS limit")
        src = r.get("signal_source") or "electricitymaps"
        out += ["[[sites]]", f"id = {_q(r['id'])}", f"name = {_q(r.get('name') or r['id'])}",
                f"role = {_q(r['role'])}  # green-hub: batch work; edge: near users, inference",
                f"zone = {_q(r['zone'])}  # grid zone of the signals",
                f"signal_source = {_q(src)}  # electricitymaps | eia930 | modelled-china",
                f"latitude = {_fmt(lat)}", f"longitude = {_fmt(lon)}",
                f"timezone = {_q(r['timezone'])}",
                f"it_power_cap_kw = {_fmt(round(cap, 3))}  # [kW] {cap_note}"]
        for col, unit in (("facility_power_cap_kw", "grid-connection cap on IT x PUE [kW]"),
                          ("green_surplus_max_kw", "curtailable green power absorbable [kW]")):
            v = _number(r, col, required=False)
            out.append(f"{col} = {_fmt(v)}  # {unit}" if v is not None
                       else f"# {col} = ...  # {unit}")
        if r.get("province"):
            out.append(f"province = {_q(r['province'])}")
        if r.get("aliases"):
            out.append("aliases = [" + ", ".join(_q(a) for a in _split(r["aliases"])) + "]")
        if r.get("provider"):
            out.append(f"notes = {_q('live carbon intensity: ' + r['provider'])}")
        for gpu, (n, w) in pools.items():
            out += [f"[sites.gpus.{_key(gpu)}]", f"count = {n}",
                    f"board_power_w = {_fmt(w)}  # [W]"]
        out.append("[sites.pue]  # the PUE model's defaults; uncomment to change")
        pue = PueModel()
        out += [f"# {k} = {_fmt(getattr(pue, k))}" for k in PueModel.__dataclass_fields__]
        out.append("[sites.latency_ms]  # round trip to each user area [ms], fibre rule "
                   "(ASSUMPTION)")
        out += [f"{_key(a['id'])} = "
                f"{round(fibre_rtt_ms(lat, lon, a['latitude'], a['longitude']), 1)}"
                for a in areas]
        out.append("[sites.backend]")
        out += [f"{k} = {_q(v)}" for k, v in backend.items()]
        out.append("")
    text = "\n".join(out)
    try:
        parse_catalog(tomllib.loads(text), f"catalog {name!r}", name)
    except CarbonschedError as exc:
        raise InputError(_with_row(str(exc), sites, rows, areas)) from exc
    return text


def _with_row(message: str, sites: list[dict[str, str]], rows: list[dict[str, str]],
              areas: list[dict[str, Any]]) -> str:
    """A catalog error on the generated TOML, with the input row of the site or area it names.

    An area made from a site's position is named by that site's row.
    """
    for i, r in enumerate(sites):
        if f"(sites[{i}])" in message:
            return f"{r['_where']}: {message}"
    for a in areas:
        if f"area {a['id']!r}:" in message:
            pool = sites if a["derived"] else [r for r in rows if r.get("role") == "area"]
            r = next(r for r in pool if r["id"] == a["id"])
            made = " (the user area made from this site's position)" if a["derived"] else ""
            return f"{r['_where']}{made}: {message}"
    return message


def fleet_providers_toml(rows: Iterable[Mapping[str, str]], name: str) -> str | None:
    """The providers file (``regions/schema.md``) for the rows with a ``provider``, or ``None``.

    Each such site's ``carbon_intensity`` is bound to its provider (with its zone when given)
    and its ``weather`` to Open-Meteo at the site's coordinates.
    """
    bound = [(r, _provider(r)) for r in rows if r.get("role") != "area" and r.get("provider")]
    if not bound:
        return None
    kinds = sorted({p[0] for _, p in bound if p is not None})
    out = [f"# Providers of the live signals of catalog {name!r}, written by `carbonsched "
           "catalog init`.", "# Schema: regions/schema.md (Providers file); credentials come "
           "from the environment", "# (ELECTRICITYMAPS_TOKEN, WATTTIME_USERNAME/"
           "WATTTIME_PASSWORD, ENTSOE_API_KEY, EIA_API_KEY)", "# or CARBONSCHED_SECRETS_FILE, "
           "never from this file. Test them with `carbonsched signals check`.", ""]
    for kind in [*kinds, "open-meteo"]:
        out += [f"[providers.{kind}]", f"kind = {_q(kind)}", ""]
    for r, p in bound:
        assert p is not None
        kind, zone = p
        ci = _q(kind) if zone is None else f"{{ provider = {_q(kind)}, zone = {_q(zone)} }}"
        out += [f"[sites.{_key(r['id'])}]", f"carbon_intensity = {ci}", 'weather = "open-meteo"',
                ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- checking a fleet


@dataclass
class SignalLine:
    """Where one signal group of a site comes from.

    Attributes
    ----------
    group
        ``carbon intensity``, ``weather (PUE)``, ``price``.
    status
        ``measured``, ``modelled``, ``live``, ``missing``, ``partial`` or ``not used``.
    detail
        The file(s), provider and zone, or what the plan does without it.
    """

    group: str
    status: str
    detail: str


@dataclass
class SiteCheck:
    """What one site can be planned with (:func:`check_fleet`).

    Attributes
    ----------
    site_id, role, zone, source
        The site's id, role, grid zone and ``signal_source``.
    signals
        One :class:`SignalLine` per signal group.
    first_date, last_date
        First and last day (UTC, ``YYYY-MM-DD``) a plan can be made for; ``None`` when the
        data decides no bound (a modelled source or a live provider: any day) — see
        ``plannable``.
    plannable
        The range as a person reads it.
    problems
        Why the site cannot be planned at all (an empty list when it can).
    """

    site_id: str
    role: str
    zone: str
    source: str
    signals: list[SignalLine] = field(default_factory=list)
    first_date: str | None = None
    last_date: str | None = None
    plannable: str = ""
    problems: list[str] = field(default_factory=list)


def _years_on_disk(data_dir: Path, site: Site) -> list[int]:
    from carbonsched.adapters.signals.coverage import coverage

    cov = coverage(data_dir)
    if site.signal_source == "electricitymaps":
        return cov.get("electricitymaps", {}).get(site.zone, [])
    ba = (site.meta or {}).get("balancing_area", site.zone)
    return cov.get("eia930", {}).get(ba, [])


def _check_files(site: Site, data_dir: Path, out: SiteCheck) -> None:
    from carbonsched.adapters.signals.registry import load_site_signals

    years = _years_on_disk(data_dir, site)
    folder = ("sustain-cluster/carbon_intensity" if site.signal_source == "electricitymaps"
              else "eia930-sustaindc")
    if not years:
        out.signals.append(SignalLine("carbon intensity", "missing",
                                      f"no {site.signal_source} file for zone {site.zone} "
                                      f"under {data_dir / folder}"))
        out.problems.append(f"no carbon-intensity history for zone {site.zone!r}: add the "
                            f"zone's files under {data_dir / folder}, or feed it from a "
                            "provider (--providers, docs/providers.md)")
        out.plannable = "none"
        return
    start = pd.Timestamp(f"{years[0]}-01-01", tz="UTC")
    end = pd.Timestamp(f"{years[-1] + 1}-01-01", tz="UTC")
    frame, meta = load_site_signals(site, data_dir, start, end)
    ci = frame["carbon_intensity_g_per_kwh"].dropna()
    files = [Path(f) for f in meta.get("files", [])]
    ci_files = [f.name for f in files
                if f.name.endswith("_hourly.csv") or "_NG_avgCI_" in f.name]
    label = ", ".join(ci_files)
    if len(ci) < MIN_HISTORY_HOURS:
        out.signals.append(SignalLine("carbon intensity", "missing",
                                      f"{label}: only {len(ci)} hours with a value"))
        out.problems.append(f"fewer than {MIN_HISTORY_HOURS} hours of carbon intensity in "
                            f"{label}")
        out.plannable = "none"
        return
    share = len(ci) / len(frame)
    out.signals.append(SignalLine(
        "carbon intensity", "measured" if share > 0.99 else "partial",
        f"{label} ({folder}/): {ci.index[0]:%Y-%m-%d} .. {ci.index[-1]:%Y-%m-%d}, "
        f"{100 * share:.0f} % of hours"))
    first = (ci.index[MIN_HISTORY_HOURS - 1] + pd.Timedelta(hours=1)).ceil("D")
    last = (ci.index[-1] + pd.Timedelta(hours=MIN_HISTORY_HOURS)).floor("D")
    out.first_date, out.last_date = f"{first:%Y-%m-%d}", f"{last:%Y-%m-%d}"
    out.plannable = (f"{out.first_date} .. {out.last_date} (needs {MIN_HISTORY_HOURS} h of "
                     "history before the day, the newest at most "
                     f"{MIN_HISTORY_HOURS} h old)")
    wx = frame[["temperature_c", "relative_humidity_pct"]].notna().all(axis=1)
    wx_files = [f.name for f in files if f.parent.name == "weather" or f.suffix == ".epw"
                or f == Path(str(site.meta.get("weather_file", "")))]
    if wx.any():
        span = frame.index[wx.to_numpy()]
        out.signals.append(SignalLine(
            "weather (PUE)", "measured" if wx.mean() > 0.99 else "partial",
            f"{', '.join(wx_files) or 'weather file'}: {span[0]:%Y-%m-%d} .. "
            f"{span[-1]:%Y-%m-%d}, {100 * wx.mean():.0f} % of hours; days without it plan PUE "
            f"at pue_min {site.pue.pue_min:g} (interval to pue_max {site.pue.pue_max:g})"))
    else:
        out.signals.append(SignalLine(
            "weather (PUE)", "missing",
            f"no weather file: PUE planned at pue_min {site.pue.pue_min:g} (interval to pue_max "
            f"{site.pue.pue_max:g}); add sustain-cluster/weather/{site.zone}_<YEAR>.json or a "
            "weather_file"))
    out.signals.append(SignalLine("price", "not used",
                                  "a carbon plan does not use electricity prices"))


def _check_modelled(site: Site, out: SiteCheck) -> None:
    ef = (f", annual mean {site.annual_emission_factor_g_per_kwh:g} g/kWh"
          if site.annual_emission_factor_g_per_kwh else "")
    out.signals += [
        SignalLine("carbon intensity", "modelled",
                   f"china_modelled grid model of province {site.province}{ef} "
                   "(data/china_grid_model.toml)"),
        SignalLine("weather (PUE)", "modelled", "the model's climatological weather"),
        SignalLine("price", "not used", "a carbon plan does not use electricity prices"),
    ]
    out.plannable = "any date (modelled signals)"


def _check_live(site: Site, bindings: Mapping[str, Any], out: SiteCheck) -> None:
    for group, label in (("carbon_intensity", "carbon intensity"), ("weather", "weather (PUE)"),
                         ("price", "price")):
        b = bindings.get(group)
        if b is None:
            status, detail = (("not used", "a carbon plan does not use electricity prices")
                              if group == "price" else
                              ("missing", f"no provider: PUE planned at pue_min "
                               f"{site.pue.pue_min:g}"))
            out.signals.append(SignalLine(label, status, detail))
            continue
        zone = b.zone or (f"{site.latitude:g}, {site.longitude:g}" if group == "weather"
                          else site.zone)
        if group == "price":
            out.signals.append(SignalLine(label, "not used", f"provider {b.provider}, zone "
                                          f"{zone}; a carbon plan does not use electricity "
                                          "prices"))
            continue
        out.signals.append(SignalLine(label, "live", f"provider {b.provider}, zone {zone} "
                                      "(cached in the store)"))
    out.plannable = ("any date the provider has at least 48 h of history before "
                     "(`carbonsched signals check` tests the credentials)")


def check_fleet(catalog: Catalog, data_dir: str | Path | None,
                providers: Any | None = None) -> list[SiteCheck]:
    """Per site: where each signal comes from, the dates that can be planned, what is missing.

    Parameters
    ----------
    catalog
        The loaded catalog.
    data_dir
        Folder laid out like ``../shared/data`` (the files of measured sources); ``None``
        when only providers and modelled sources are used.
    providers
        A :class:`carbonsched.adapters.signals.providers.ProvidersConfig`: its sites take their
        signals from the providers instead of the files.

    Returns
    -------
    list of SiteCheck
        In catalog order.

    Raises
    ------
    DataFormatError
        A shared-data file that exists but cannot be read.
    """
    checks = []
    for site in catalog.sites:
        out = SiteCheck(site.id, str(site.role), site.zone, site.signal_source)
        if providers is not None and site.id in providers.sites:
            out.source = "providers file"
            _check_live(site, providers.site(site.id), out)
        elif site.signal_source == "modelled-china":
            _check_modelled(site, out)
        elif data_dir is None or not Path(data_dir).is_dir():
            out.signals.append(SignalLine("carbon intensity", "missing",
                                          f"data folder {data_dir} not found"))
            out.problems.append("no data folder: give --data-dir (the ../shared/data layout) "
                                "or a providers file naming this site")
            out.plannable = "none"
        else:
            _check_files(site, Path(data_dir), out)
        checks.append(out)
    return checks


def common_range(checks: list[SiteCheck]) -> tuple[str | None, str | None]:
    """The dates every site with a data-bound range can be planned: (first, last) or Nones."""
    firsts = [c.first_date for c in checks if c.first_date]
    lasts = [c.last_date for c in checks if c.last_date]
    if not firsts:
        return None, None
    return max(firsts), min(lasts)
