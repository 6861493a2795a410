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
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import InputError
from carbonsched.report.build import Report

FORMATS = ("csv", "json", "html", "xlsx")
TABLES = ("jobs", "sites", "tenants", "days", "instruments", "site_hours")
OPTIONAL_TABLES = ("flex_events", "flex_hours")
"""Tables a report holds only when its period has them (the flexibility section)."""


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


def _hourly(report: Report) -> str:
    """Per site: hourly direct carbon intensity (line) with the placed GPU-hours (bars)."""
    sh = report.frames["site_hours"]
    used = sh.groupby("site")["gpu_h"].sum()
    parts = ['<figure id="chart-hourly-ci" class="chart"><figcaption>Hourly carbon intensity '
             '(direct, actual) per site, with the GPU-hours placed in each hour</figcaption>']
    w, h, left, right, top = 900, 120, 60, 60, 12
    for k, site in enumerate(used.index):
        f = sh[sh["site"] == site].reset_index(drop=True)
        n = len(f)
        ci = f["ci_direct_g_per_kwh"].to_numpy(float)
        gh = f["gpu_h"].to_numpy(float)
        cmax = np.nanmax(ci) if np.isfinite(ci).any() else 1.0
        gmax = max(gh.max(), 1e-9)
        x = left + (w - left - right) * np.arange(n) / max(n - 1, 1)
        bw = max((w - left - right) / max(n, 1), 0.5)
        ih = h - top - 22
        svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
               f'viewBox="0 0 {w} {h}" class="site-hourly" data-site="{html.escape(site)}" '
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
                   f'{cmax:.0f}</text><text x="{left - 4}" y="{top + ih}" font-size="10" '
                   'text-anchor="end">0</text>')
        svg.append(f'<text x="{w - right + 4}" y="{top + 8}" font-size="10" fill="#3182bd">'
                   f'{gmax:.0f} GPU·h</text>')
        svg.append(f'<text x="{left}" y="{h - 4}" font-size="10">{html.escape(f.hour.iloc[0])}'
                   f'</text><text x="{w - right}" y="{h - 4}" font-size="10" text-anchor="end">'
                   f'{html.escape(f.hour.iloc[-1])}</text>')
        svg.append("</svg>")
        parts.append("\n".join(svg))
    parts.append('<p class="note">Line: gCO2e/kWh (direct), left scale; bars: GPU-hours placed '
                 'in the hour, right scale. Breaks in the line are hours without actual data.'
                 '</p></figure>')
    return "\n".join(parts)


def _table(df: pd.DataFrame, cid: str, max_rows: int | None = None) -> str:
    d = df if max_rows is None else df.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in d.columns)
    body = []
    for row in d.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, (float, np.floating)):
                cells.append(f'<td class="num">{_fmt(v, 3)}</td>')
            else:
                cells.append(f"<td>{_fmt(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = "" if max_rows is None or len(df) <= max_rows else \
        f'<p class="note">First {max_rows} of {len(df)} rows; every row is in the JSON, CSV ' \
        'and XLSX forms.</p>'
    return (f'<table id="{cid}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            f"</tbody></table>{more}")


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
    flex_html = ""
    if "flex_events" in report.frames:
        flex_rows = "".join(
            f'<tr data-total="{k}"><th>{html.escape(label)}</th>'
            f'<td class="num">{_fmt(t.get(k), 3 if unit == "MWh" else 1)}</td>'
            f"<td>{html.escape(unit)}</td></tr>" for k, label, unit in FLEX_LABELS)
        flex_html = (f'<h2>Flexibility</h2><table id="flex-totals" class="totals"><tbody>'
                     f"{flex_rows}</tbody></table>"
                     f'<p class="note">{html.escape(m["rules"].get("flexibility", ""))}</p>'
                     f'<h3>Events</h3><div class="scroll">'
                     f'{_table(report.frames["flex_events"], "table-flex-events")}</div>'
                     f'<h3>Per event hour</h3><div class="scroll">'
                     f'{_table(report.frames["flex_hours"], "table-flex-hours", 300)}</div>')
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in m["notes"]) or "<li>none</li>"
    rules = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                    for k, v in m["rules"].items())
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
    css = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;
max-width:1100px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
table.totals th{background:#f6f6f6;width:430px} table.totals td{font-size:14px}
figure.chart{margin:16px 0} figcaption{font-weight:600;margin-bottom:4px}
.note{color:#555;font-size:12px} .scroll{max-height:420px;overflow:auto}
"""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(m['title'])} {html.escape(m['period']['from'][:10])}</title>
<style>{css}</style></head><body>
<h1>{html.escape(m['title'])}</h1>
<p class="meta">Catalog <b>{html.escape(m['catalog'])}</b> ·
period {html.escape(m['period']['from'])} to {html.escape(m['period']['to'])} (exclusive) ·
{m['days_with_plans']} day(s) with plans ·
{html.escape(prov['software'])} · generated {html.escape(prov['generated_at'])}</p>
<h2>Totals</h2>
{totals_html}
<h2>Charts</h2>
{''.join(charts)}
<h2>Sites</h2>
<div class="scroll">{_table(sites[site_cols], "table-sites")}</div>
<h2>Tenants</h2>
<div class="scroll">{_table(tenants, "table-tenants")}</div>
<h2>Jobs</h2>
<div class="scroll">{_table(report.frames["jobs"][job_cols], "table-jobs", 300)}</div>
<h2>Instruments</h2>
{_table(report.frames["instruments"], "table-instruments")}
{flex_html}
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
