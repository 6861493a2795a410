"""Render a :class:`~carbonsched.report.build.Report` as CSV, JSON, XLSX or one HTML page.

Every format is drawn from the same frames and totals; nothing is recomputed here (the HTML's
numbers are the JSON's). Formats:

* ``json``: ``{"metadata", "totals", "jobs", "sites", "tenants", "days", "instruments",
  "site_hours"}``; NaN (a gap, an unknown) is ``null``;
* ``csv``: the metadata block as ``# key: value`` lines, then one section per breakdown, each
  introduced by a ``# table: NAME`` line and separated by a blank line
  (:func:`read_csv_sections` splits it back into frames);
* ``xlsx`` (openpyxl): a ``summary`` sheet (totals, rules, provenance, notes) and one sheet per
  breakdown; every time (a job's start and end, a site hour, the generation time) is a real
  Excel date-time in UTC under a header ending ``_utc`` (Excel has no time zones:
  :func:`excel_times`);
* ``html``: one page, inline SVG charts, no scripts and no network fetches.
"""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import InputError, require_extra
from carbonsched.report.build import Report

FORMATS = ("csv", "json", "html", "xlsx")
TABLES = ("jobs", "sites", "tenants", "days", "instruments", "site_hours")
OPTIONAL_TABLES = ("flex_events", "flex_hours", "fair_shares", "fair_days")
"""Tables a report holds only when its period has them (the flexibility and fair-shares
sections)."""


def tables(report: Report) -> tuple[str, ...]:
    """The report's tables in order: :data:`TABLES`, then the optional ones it holds."""
    return TABLES + tuple(n for n in OPTIONAL_TABLES if n in report.frames)
MEDIA_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
"""Format -> HTTP media type (for ``GET /v1/reports``)."""


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else round(float(v), 6)
    if isinstance(v, pd.Timestamp):
        return v.strftime("%Y-%m-%dT%H:%M:%SZ")
    if v is pd.NaT or (v is not None and not isinstance(v, str) and pd.isna(v) is True):
        return None
    return v


def to_dict(report: Report) -> dict[str, Any]:
    """The JSON document of a report (NaN as ``None``)."""
    doc: dict[str, Any] = {"metadata": report.metadata, "totals": report.totals}
    for name in tables(report):
        doc[name] = report.frames[name].to_dict(orient="records")
    return _clean(doc)


def _meta_lines(report: Report) -> list[str]:
    m = report.metadata
    lines = [f"# {m['title']}", f"# period_from: {m['period']['from']}",
             f"# period_to_exclusive: {m['period']['to']}", f"# catalog: {m['catalog']}",
             f"# software: {m['provenance']['software']}",
             f"# generated_at: {m['provenance']['generated_at']}"]
    lines += [f"# total {k}: {_clean(v)}" for k, v in report.totals.items()]
    lines += [f"# unit of *{k}: {v}" for k, v in m["units"].items()]
    lines += [f"# rule {k}: {v}" for k, v in m["rules"].items()]
    lines += [f"# note: {n}" for n in m["notes"]]
    return lines


def read_csv_sections(data: bytes | str) -> dict[str, pd.DataFrame]:
    """Split a CSV report back into its tables (``# table: NAME`` sections)."""
    text = data.decode() if isinstance(data, bytes) else data
    out: dict[str, pd.DataFrame] = {}
    for chunk in text.split("# table: ")[1:]:
        name, _, body = chunk.partition("\n")
        out[name.strip()] = pd.read_csv(io.StringIO(body.strip() + "\n"))
    return out


def render(report: Report, fmt: str) -> bytes:
    """The report as bytes in ``fmt`` (one of :data:`FORMATS`).

    Raises
    ------
    InputError
        An unknown format.
    """
    if fmt == "json":
        return (json.dumps(to_dict(report), indent=1, ensure_ascii=False) + "\n").encode()
    if fmt == "csv":
        parts = ["\n".join(_meta_lines(report))]
        for name in tables(report):
            parts.append(f"# table: {name}\n" + report.frames[name].to_csv(
                index=False, float_format="%.6g", lineterminator="\n"))
        return ("\n".join(parts)).encode()
    if fmt == "xlsx":
        return _xlsx(report)
    if fmt == "html":
        return _html(report).encode()
    raise InputError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")


UTC_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]00:?00)$")
"""An ISO 8601 instant in UTC as the frames and the metadata write it (``...Z`` or ``+00:00``)."""

EXCEL_DATETIME_FORMAT = "YYYY-MM-DD HH:MM:SS"
"""Number format of the time cells (ISO 8601 order, read the same in every locale)."""


def _is_utc_times(values: pd.Series) -> bool:
    present = values.dropna()
    return len(present) > 0 and all(isinstance(v, str) and UTC_TIME.match(v) for v in present)


def excel_times(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each column of UTC instants as naive UTC datetimes, renamed ``<name>_utc``.

    Excel stores no time zone, so a time cell is a wall time in UTC and its header says so;
    openpyxl reads the cells back as :class:`datetime.datetime`. A column is converted when
    every value present is an ISO 8601 instant in UTC (:data:`UTC_TIME`); missing values stay
    empty cells.
    """
    out = frame.copy()
    renames = {}
    for col in frame.columns:
        if str(col).endswith("_utc") or not _is_utc_times(frame[col]):
            continue
        out[col] = pd.to_datetime(frame[col], utc=True).dt.tz_localize(None)
        renames[col] = f"{col}_utc"
    return out.rename(columns=renames)


def _xlsx(report: Report) -> bytes:
    require_extra("openpyxl", "the report's xlsx format", "report")
    buf = io.BytesIO()
    summary = [("total", k, _clean(v)) for k, v in report.totals.items()]
    summary += [("rule", k, v) for k, v in report.metadata["rules"].items()]
    summary += [("unit", f"*{k}", v) for k, v in report.metadata["units"].items()]
    prov = report.metadata["provenance"]
    summary += [("provenance", f"{k}_utc", pd.Timestamp(v).tz_convert("UTC").tz_localize(None)
                 .to_pydatetime()) if isinstance(v, str) and UTC_TIME.match(v) else
                ("provenance", k, json.dumps(_clean(v)) if isinstance(v, dict) else v)
                for k, v in prov.items()]
    summary += [("period", k, str(v)) for k, v in report.metadata["period"].items()]
    summary += [("note", str(i + 1), n) for i, n in enumerate(report.metadata["notes"])]
    with pd.ExcelWriter(buf, engine="openpyxl", datetime_format=EXCEL_DATETIME_FORMAT) as xw:
        pd.DataFrame(summary, columns=["section", "name", "value"]).to_excel(
            xw, sheet_name="summary", index=False)
        for name in tables(report):
            excel_times(report.frames[name]).to_excel(xw, sheet_name=name, index=False)
        for cell in (c for row in xw.book["summary"].iter_rows() for c in row):
            if isinstance(cell.value, datetime):
                cell.number_format = EXCEL_DATETIME_FORMAT
    return buf.getvalue()


# ---------------------------------------------------------------------------------------- HTML
PALETTE = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
           "#666666"]


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if isinstance(v, (int, float, np.floating)):
        return f"{float(v):,.{digits}f}"
    return html.escape(str(v))


def _bars(title: str, items: list[tuple[str, float]], unit: str, chart_id: str,
          colors: list[str] | None = None, note: str = "") -> str:
    """A horizontal bar chart as inline SVG."""
    w, row, left = 720, 26, 230
    h = 14 + row * len(items)
    vmax = max([v for _, v in items if v is not None and math.isfinite(v)] + [1e-9])
    out = [f'<figure id="{chart_id}" class="chart"><figcaption>{html.escape(title)}</figcaption>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" role="img" aria-label="{html.escape(title)}">']
    for i, (label, v) in enumerate(items):
        y = 10 + i * row
        ok = v is not None and math.isfinite(v)
        bw = 0 if not ok else max((w - left - 120) * max(v, 0) / vmax, 1)
        c = (colors or PALETTE)[i % len(colors or PALETTE)]
        out.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" font-size="12">'
                   f'{html.escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y + 3}" width="{bw:.1f}" height="{row - 8}" '
                   f'fill="{c}"><title>{html.escape(label)}: {_fmt(v)} {unit}</title></rect>')
        out.append(f'<text x="{left + bw + 6:.1f}" y="{y + 15}" font-size="12">{_fmt(v)} '
                   f'{html.escape(unit)}</text>')
    out.append("</svg>")
    if note:
        out.append(f'<p class="note">{html.escape(note)}</p>')
    out.append("</figure>")
    return "\n".join(out)


def _time_ticks(hours: pd.DatetimeIndex) -> list[tuple[int, str, bool]]:
    """Ticks of an hourly axis: ``(position, label, is_day_start)``, in UTC.

    Every day start is labelled with the date (``Mon 3 Jul``); periods of up to three days also
    get a tick every 6 hours (``06:00``); longer ones thin the day labels to about 14.
    """
    n = len(hours)
    if n == 0:
        return []
    days = [i for i, t in enumerate(hours) if t.hour == 0] or [0]
    step = max(1, math.ceil(len(days) / 14))
    out = [(i, f"{hours[i]:%a} {hours[i].day} {hours[i]:%b}", True) for i in days[::step]]
    if len(days) <= 3:
        out += [(i, f"{t:%H:%M}", False) for i, t in enumerate(hours)
                if t.hour in (6, 12, 18)]
    return sorted(out)


def _hourly(report: Report) -> str:
    """Per site: hourly direct carbon intensity (line) with the placed GPU-hours (bars).

    The small multiples share one scale (the largest intensity and GPU-hours of any site), so
    their heights compare across sites; the time axis is labelled in dates and hours (UTC).
    """
    sh = report.frames["site_hours"]
    used = sh.groupby("site")["gpu_h"].sum()
    ci_all = sh["ci_direct_g_per_kwh"].to_numpy(float)
    cmax = float(np.nanmax(ci_all)) if np.isfinite(ci_all).any() else 1.0
    gmax = max(float(sh["gpu_h"].max()) if len(sh) else 0.0, 1e-9)
    parts = ['<figure id="chart-hourly-ci" class="chart"><figcaption>Hourly carbon intensity '
             '(direct, actual) per site, with the GPU-hours placed in each hour</figcaption>',
             f'<p class="note" id="hourly-scale">One scale for every site: carbon intensity '
             f'0–{cmax:,.0f} g CO2e/kWh (line, left), GPU-hours 0–{gmax:,.0f} per hour (bars, '
             'right); times in UTC.</p>']
    w, h, left, right, top = 900, 140, 60, 70, 14
    for k, site in enumerate(used.index):
        f = sh[sh["site"] == site].reset_index(drop=True)
        n = len(f)
        hours = pd.DatetimeIndex(pd.to_datetime(f["hour"], utc=True))
        ci = f["ci_direct_g_per_kwh"].to_numpy(float)
        gh = f["gpu_h"].to_numpy(float)
        x = left + (w - left - right) * np.arange(n) / max(n - 1, 1)
        bw = max((w - left - right) / max(n, 1), 0.5)
        ih = h - top - 36
        svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
               f'viewBox="0 0 {w} {h}" class="site-hourly" data-site="{html.escape(site)}" '
               f'data-ci-max="{cmax:.3f}" data-gpu-h-max="{gmax:.3f}" '
               f'role="img" aria-label="hourly carbon intensity at {html.escape(site)}">',
               f'<text x="{left}" y="10" font-size="12" font-weight="bold">'
               f'{html.escape(site)}' + ("" if gh.sum() > 0 else
                                          " (no work in the inventory; counterfactual only)")
               + "</text>"]
        for xi, g in zip(x, gh, strict=True):
            if g > 0:
                bh = ih * g / gmax
                svg.append(f'<rect x="{xi - bw / 2:.1f}" y="{top + ih - bh:.1f}" '
                           f'width="{bw:.2f}" height="{bh:.1f}" fill="#9ecae1"/>')
        segs, cur = [], []
        for xi, c in zip(x, ci, strict=True):
            if math.isfinite(c):
                cur.append(f"{xi:.1f},{top + ih - ih * c / cmax:.1f}")
            elif cur:
                segs.append(cur)
                cur = []
        if cur:
            segs.append(cur)
        color = PALETTE[k % len(PALETTE)]
        for s in segs:
            svg.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.2" '
                       f'points="{" ".join(s)}"/>')
        svg.append(f'<line x1="{left}" y1="{top + ih}" x2="{w - right}" y2="{top + ih}" '
                   'stroke="#999"/>')
        svg.append(f'<text x="{left - 4}" y="{top + 8}" font-size="10" text-anchor="end">'
                   f'{cmax:,.0f}</text><text x="{left - 4}" y="{top + ih}" font-size="10" '
                   'text-anchor="end">0</text>'
                   f'<text x="{left - 4}" y="{top + ih / 2 + 4:.1f}" font-size="9" '
                   'text-anchor="end" fill="#555">g/kWh</text>')
        svg.append(f'<text x="{w - right + 4}" y="{top + 8}" font-size="10" fill="#3182bd">'
                   f'{gmax:,.0f} GPU·h</text>')
        for i, label, major in _time_ticks(hours):
            xi = x[i]
            svg.append(f'<line x1="{xi:.1f}" y1="{top + ih}" x2="{xi:.1f}" '
                       f'y2="{top + ih + (5 if major else 3)}" stroke="#777"/>'
                       f'<text class="{"tick-day" if major else "tick-hour"}" x="{xi:.1f}" '
                       f'y="{top + ih + (16 if major else 14)}" font-size="{10 if major else 9}"'
                       f' text-anchor="middle" fill="{"#222" if major else "#666"}">'
                       f'{html.escape(label)}</text>')
        svg.append(f'<text x="{w - right + 4}" y="{top + ih + 16}" font-size="9" '
                   'fill="#555">UTC</text>')
        svg.append("</svg>")
        parts.append("\n".join(svg))
    parts.append('<p class="note">Line: g CO2e/kWh (direct), left scale; bars: GPU-hours placed '
                 'in the hour, right scale; both scales are the same for every site. Breaks in '
                 'the line are hours without actual data.</p></figure>')
    return "\n".join(parts)


#: Words and units for the frames' column names in the HTML tables (the data formats keep the
#: names, their units in the suffix: ``metadata.units``). Columns not listed here get their
#: name in words with the unit of their suffix (:func:`column_label`).
COLUMN_WORDS = {
    "job_id": "Job", "plan_id": "Plan", "date": "Day", "day": "Day", "tenant": "Tenant",
    "kind": "Kind", "site": "Site", "zone": "Grid zone", "market": "Market",
    "gpu_type": "GPU type", "gpus": "GPUs", "start": "Start (UTC)", "end": "End (UTC)",
    "pieces": "Pieces", "hours_basis": "Hours from", "gpu_h": "GPU-hours",
    "it_energy_kwh": "IT energy (kWh)", "it_energy_basis": "IT energy from",
    "pue_mean_ratio": "Mean PUE", "facility_energy_kwh": "Energy, facility (kWh)",
    "location_based_kg": "Location-based (kg CO2e)", "lifecycle_kg": "Life-cycle (kg CO2e)",
    "market_based_kg": "Market-based, 2015 (kg CO2e)",
    "market_based_hourly_kg": "Market-based, hourly (kg CO2e)",
    "cfe_matched_kwh": "Carbon-free matched (kWh)",
    "cfe_hourly_share": "Hourly CFE score (0–1)",
    "location_gap_share": "Energy in data gaps (0–1)",
    "grid_estimated_share": "Grid intensity estimated (0–1)",
    "embodied_kg": "Embodied (kg CO2e)", "sci_g_per_unit": "SCI (g CO2e per GPU-hour)",
    "embodied_source": "Embodied source",
    "residual_mix_g_per_kwh": "Residual mix (g CO2e/kWh)",
    "residual_mix_source": "Residual-mix source",
    "unmatched_basis_2015": "Uncovered energy at (2015)",
    "unmatched_basis_hourly": "Uncovered energy at (hourly)",
    "location_factor_flag": "Location factor used",
    "surplus_absorbed_mwh": "Green surplus absorbed, forecast (MWh)",
    "surplus_absorbed_occurred_mwh": "… of which occurred (MWh)",
    "signal_source": "Signal source", "pue_source": "PUE source",
    "instrument": "Instrument", "rule_applied": "Rule",
    "volume_in_period_mwh": "Volume in period (MWh)", "volume_basis": "Volume from",
    "used_mwh": "Used (MWh)", "unused_mwh": "Unused (MWh)",
    "emissions_kg": "Emissions (kg CO2e)", "method": "Method",
}


def column_label(name: str, units: dict[str, str]) -> str:
    """A table header in words with its unit: :data:`COLUMN_WORDS`, else from the suffix.

    ``units`` maps name suffixes to units (the report's ``metadata.units``); the longest
    matching suffix wins, e.g. ``queue_wait_kwh`` -> ``Queue wait (kWh)``.
    """
    if name in COLUMN_WORDS:
        return COLUMN_WORDS[name]
    for suffix in sorted(units, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[: -len(suffix)].replace("_", " ")
            return f"{stem[:1].upper()}{stem[1:]} ({units[suffix]})"
    words = name.replace("_", " ")
    return words[:1].upper() + words[1:]


def _table(df: pd.DataFrame, cid: str, units: dict[str, str],
           max_rows: int | None = None) -> str:
    d = df if max_rows is None else df.head(max_rows)
    head = "".join(f'<th data-column="{html.escape(str(c))}">'
                   f"{html.escape(column_label(str(c), units))}</th>" for c in d.columns)
    body = []
    for row in d.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, (float, np.floating)):
                cells.append(f'<td class="num">{_fmt(v, 3)}</td>')
            elif isinstance(v, str) and UTC_TIME.match(v):
                # an instant in UTC as a person reads it; the header says UTC
                cells.append(f'<td class="time">{pd.Timestamp(v):%Y-%m-%d %H:%M}</td>')
            else:
                cells.append(f"<td>{_fmt(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = "" if max_rows is None or len(df) <= max_rows else \
        f'<p class="note">First {max_rows} of {len(df)} rows; every row is in the JSON, CSV ' \
        'and XLSX forms.</p>'
    return (f'<table id="{cid}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            f"</tbody></table>{more}")


def _totals_section(title: str, totals_id: str, labels: list[tuple[str, str, str]],
                    totals: dict[str, Any], digits: Callable[[str], int], note: str,
                    units: dict[str, str],
                    parts: list[tuple[str, pd.DataFrame, str, int | None]]) -> str:
    """One optional section of the HTML page: its totals, its rule, then each part's table.

    ``labels`` are ``(total key, label, unit)``; ``digits(unit)`` the decimals of a total;
    ``parts`` are ``(heading, frame, table id, max rows)`` (:func:`_table`).
    """
    rows = "".join(
        f'<tr data-total="{k}"><th>{html.escape(label)}</th>'
        f'<td class="num">{_fmt(totals.get(k), digits(unit))}</td>'
        f"<td>{html.escape(unit)}</td></tr>" for k, label, unit in labels)
    out = (f'<h2>{title}</h2><table id="{totals_id}" class="totals"><tbody>{rows}</tbody>'
           f'</table><p class="note">{html.escape(note)}</p>')
    for heading, frame, cid, max_rows in parts:
        out += (f'<h3>{heading}</h3><div class="scroll">{_table(frame, cid, units, max_rows)}'
                "</div>")
    return out


FLEX_LABELS = [
    ("flex_events", "Grid events", "events"),
    ("flex_events_met", "Events whose commitment was delivered in every hour", "events"),
    ("flex_band_mwh", "Flexibility stated in the plans' band", "MWh"),
    ("flex_offered_mwh", "Flexibility offered (committed)", "MWh"),
    ("flex_target_mwh", "Reduction asked by the events", "MWh"),
    ("flex_delivered_mwh", "Reduction delivered (up to the commitment)", "MWh"),
    ("flex_shortfall_mwh", "Shortfall against the commitments", "MWh"),
    ("flex_extra_emissions_kg", "Extra emissions of the shifted work", "kg CO2e"),
]
"""The flexibility section's totals as the HTML page shows them."""

FAIR_LABELS = [
    ("fairness_cost_kg", "Carbon cost of fairness (fair plans − carbon-only plans)", "kg CO2e"),
    ("carbon_only_emissions_kg", "Carbon-only plans' emissions", "kg CO2e"),
    ("fairness_cost_pct", "Carbon cost of fairness", "%"),
    ("fair_tenants_with_target", "Tenant-days with a fair-share target", "tenant-days"),
    ("fair_tenants_within_5pct", "… dominant share within 5 % of its target", "tenant-days"),
    ("fair_quotas_missed", "Guaranteed quotas not met", "tenant-days"),
    ("fairness_not_applied_tenants", "Fairness not applied (plan fell back)", "tenant-days"),
]
"""The fair-shares section's totals as the HTML page shows them."""

TOTAL_LABELS = [
    ("it_energy_kwh", "IT energy", "kWh"),
    ("facility_energy_kwh", "Facility energy (IT × PUE)", "kWh"),
    ("location_based_kg", "Scope 2 location-based", "kg CO2e"),
    ("lifecycle_kg", "Life-cycle (shown beside, not in Scope 2)", "kg CO2e"),
    ("market_based_kg", "Scope 2 market-based (2015, annual matching)", "kg CO2e"),
    ("market_based_hourly_kg", "Scope 2 market-based (hourly matching, 2025 draft)", "kg CO2e"),
    ("cfe_hourly_share", "Hourly carbon-free energy score", "share"),
    ("embodied_kg", "Embodied GPU emissions (SCI M term)", "kg CO2e"),
    ("location_gap_share", "Energy in hours without actual grid data (gap)", "share"),
    ("surplus_absorbed_mwh", "Green surplus absorbed (forecast)", "MWh"),
    ("surplus_absorbed_occurred_mwh", "… of which really occurred", "MWh"),
    ("avoided_kg", "Avoided vs carbon-agnostic counterfactual (not subtracted)", "kg CO2e"),
    ("plan_estimate_error_pct", "Plans' own estimate: error vs actual", "%"),
]


def _when(iso: str) -> str:
    """An ISO 8601 instant as a person reads it, in UTC (``Mon 3 Jul 2023 00:00``)."""
    t = pd.Timestamp(iso).tz_convert("UTC")
    return f"{t:%a} {t.day} {t:%b %Y %H:%M}"


def _html(report: Report) -> str:
    t = report.totals
    m = report.metadata
    sites = report.frames["sites"]
    tenants = report.frames["tenants"]
    rows = "".join(
        f'<tr data-total="{k}"><th>{html.escape(label)}</th>'
        f'<td class="num">{_fmt(t.get(k), 3 if unit == "share" else 1)}</td>'
        f"<td>{html.escape(unit)}</td></tr>" for k, label, unit in TOTAL_LABELS)
    totals_html = f'<table id="totals" class="totals"><tbody>{rows}</tbody></table>'
    charts = [
        _hourly(report),
        _bars("Emissions by site: location-based", [
            (s, v) for s, v in zip(sites["site"], sites["location_based_kg"], strict=True)],
            "kg CO2e", "chart-site"),
        _bars("Emissions by tenant: location-based", [
            (s, v) for s, v in zip(tenants["tenant"], tenants["location_based_kg"],
                                   strict=True)], "kg CO2e", "chart-tenant"),
        _bars("Scope 2 totals: location- vs market-based", [
            ("location-based", t["location_based_kg"]),
            ("market-based (2015 annual)", t["market_based_kg"]),
            ("market-based (hourly 2025 draft)", t["market_based_hourly_kg"]),
            ("life-cycle (beside)", t["lifecycle_kg"])], "kg CO2e", "chart-scope2",
            colors=["#1b9e77", "#7570b3", "#e7298a", "#bbbbbb"],
            note="Each bar follows its own rule (see Rules); the life-cycle figure is shown "
                 "for information and is not part of either Scope 2 total."),
        _bars("Savings against the carbon-agnostic counterfactual", [
            ("counterfactual (agnostic)", t["counterfactual_location_based_kg"]),
            ("inventory (this schedule)", t["location_based_kg"]),
            ("avoided", t["avoided_kg"])], "kg CO2e", "chart-savings",
            colors=["#999999", "#1b9e77", "#66a61e"],
            note="Avoided emissions are reported separately and never subtracted from the "
                 "inventory."),
    ]
    flex_html = "" if "flex_events" not in report.frames else _totals_section(
        "Flexibility", "flex-totals", FLEX_LABELS, t, lambda unit: 3 if unit == "MWh" else 1,
        m["rules"].get("flexibility", ""), m["units"],
        [("Events", report.frames["flex_events"], "table-flex-events", None),
         ("Per event hour", report.frames["flex_hours"], "table-flex-hours", 300)])
    fair_html = "" if "fair_shares" not in report.frames else _totals_section(
        "Fair shares", "fair-totals", FAIR_LABELS, t, lambda unit: 2,
        m["rules"].get("fair_shares", ""), m["units"],
        [("Per day", report.frames["fair_days"], "table-fair-days", None),
         ("Per tenant and day", report.frames["fair_shares"], "table-fair-shares", 300)])
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in m["notes"]) or "<li>none</li>"
    market_note = ("" if not m.get("market_based_note") else
                   f'<p id="market-note" class="market-note">'
                   f'{html.escape(m["market_based_note"])}</p>')
    rules = "".join(f'<tr><th data-column="{html.escape(k)}">'
                    f"{html.escape(column_label(k, m['units']))}</th><td>{html.escape(v)}</td>"
                    "</tr>" for k, v in m["rules"].items())
    prov = m["provenance"]
    sig = "".join(f"<tr><th>{html.escape(s)}</th><td>{html.escape(str(v['source']))} "
                  f"{html.escape(str(v['zone']))} ({html.escape(str(v['signal_quality']))})</td>"
                  "</tr>" for s, v in prov["signals"].items())
    site_cols = ["site", "zone", "market", "facility_energy_kwh", "location_based_kg",
                 "market_based_kg", "market_based_hourly_kg", "cfe_hourly_share",
                 "location_gap_share", "unmatched_basis_2015", "unmatched_basis_hourly",
                 "surplus_absorbed_mwh", "surplus_absorbed_occurred_mwh"]
    job_cols = ["job_id", "tenant", "site", "start", "end", "hours_basis", "it_energy_kwh",
                "it_energy_basis", "facility_energy_kwh", "location_based_kg",
                "market_based_kg", "market_based_hourly_kg", "sci_g_per_unit"]
    # the tenants' energy and Scope 2 columns; every column is in the JSON, CSV and XLSX
    tenant_cols = ["tenant", "gpu_h", "it_energy_kwh", "facility_energy_kwh",
                   "location_based_kg", "market_based_kg", "market_based_hourly_kg",
                   "cfe_hourly_share", "embodied_kg", "location_gap_share"]
    units = m["units"]
    css = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;
max-width:1100px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:12px;margin:8px 0;max-width:100%}
th,td{border:1px solid #ddd;padding:3px 5px;text-align:left;vertical-align:top;
overflow-wrap:break-word;hyphens:auto}
thead th{background:#f6f6f6;font-weight:600;vertical-align:bottom}
td.time{white-space:nowrap}
p.market-note{background:#fff8e1;border-left:4px solid #e6ab02;padding:6px 10px;
font-size:13px}
td.num{text-align:right;font-variant-numeric:tabular-nums}
table.totals th{background:#f6f6f6;width:430px} table.totals td{font-size:14px}
figure.chart{margin:16px 0} figcaption{font-weight:600;margin-bottom:4px}
.note{color:#555;font-size:12px} .scroll{max-height:420px;overflow-y:auto;overflow-x:visible}
"""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(m['title'])} {html.escape(m['period']['from'][:10])}</title>
<style>{css}</style></head><body>
<h1>{html.escape(m['title'])}</h1>
<p class="meta">Catalog <b>{html.escape(m['catalog'])}</b> ·
period {_when(m['period']['from'])} to {_when(m['period']['to'])} UTC (exclusive) ·
{m['days_with_plans']} day(s) with plans ·
{html.escape(prov['software'])} · generated {_when(prov['generated_at'])} UTC</p>
<h2>Totals</h2>
{totals_html}
{market_note}
<h2>Charts</h2>
{''.join(charts)}
<h2>Sites</h2>
<div class="scroll">{_table(sites[site_cols], "table-sites", units)}</div>
<h2>Tenants</h2>
<div class="scroll">{_table(tenants[tenant_cols], "table-tenants", units)}</div>
<h2>Jobs</h2>
<div class="scroll">{_table(report.frames["jobs"][job_cols], "table-jobs", units, 300)}</div>
<h2>Instruments</h2>
<div class="scroll">{_table(report.frames["instruments"], "table-instruments", units)}</div>
{flex_html}
{fair_html}
<h2>Rules</h2><table id="rules">{rules}</table>
<h2>Provenance</h2><table id="provenance">{sig}
<tr><th>hours</th><td>{_fmt(prov['hours']['planned_share'] * 100)} % planned,
{_fmt(prov['hours']['actual_share'] * 100)} % actual (dispatch)</td></tr>
<tr><th>IT energy</th><td>{_fmt(prov['it_energy']['modelled_share'] * 100)} % modelled;
{prov['it_energy']['zero_counter_hours']} zero-counter hour(s)</td></tr>
<tr><th>grid intensity estimated by the provider</th>
<td>{_fmt(prov['grid_intensity_estimated_energy_share'] * 100)} % of the energy</td></tr>
<tr><th>PUE</th><td>{html.escape(prov['pue'])}</td></tr>
<tr><th>counterfactual</th><td>{html.escape(prov['counterfactual'])}</td></tr></table>
<h2>Notes</h2><ul id="notes">{notes}</ul>
</body></html>
"""
