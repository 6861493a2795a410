"""``GET /ui``: the plan as a read-only web page, rendered on the server.

One HTML page, no script and no external fetch (it works behind any proxy and in a browser
with scripts off): per site a timeline of the plan's placements over the carbon-intensity
forecast with its 80 % and 95 % intervals (inline SVG, one shared y-scale so sites compare)
and the inference GPUs per hour; the savings against the carbon-agnostic baseline, exactly
the plan document's ``totals``; a job search (a GET form over job id and tenant); the plan's
notes grouped by kind. ``?plan=`` picks a plan by id or unique prefix (as ``plans show``);
without it, the newest plan of the served catalog (as ``GET /v1/plans/latest``).

It sits behind the read role like the ``/v1`` read routes: no token is 401, a weak one 403.
It is left out of the OpenAPI document (a page for people; clients read ``/v1/plans``).
The page's template and stylesheet are package data (``carbonsched/api/templates``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import escape
from importlib.resources import files
from string import Template
from typing import Annotated, Any
from urllib.parse import urlencode

import pandas as pd
from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from carbonsched.api.deps import ReadRole, State
from carbonsched.api.routes import ERRORS
from carbonsched.errors import InputError
from carbonsched.limits import MAX_ID_CHARS
from carbonsched.notes import group_notes
from carbonsched.pipeline.document import placed_words

router = APIRouter(tags=["ui"], responses=ERRORS)

CI_SIGNAL = "carbon_intensity_g_per_kwh"
"""The forecast signal drawn under the placements (the store's ``forecasts.signal``)."""
MAX_JOB_ROWS = 500
"""Most job rows the page lists; more are counted and left to the search. [rows]"""
MAX_LANES = 40
"""Most placement lanes drawn per site; the placements beyond are counted under the chart."""
MAX_QUERY_CHARS = MAX_ID_CHARS
"""Longest job-id or tenant search text: a job id's limit (:data:`carbonsched.limits.
MAX_ID_CHARS`, the store's ``String(200)``). [characters]"""
MAX_PLAN_REF_CHARS = 64
"""Longest ``?plan=`` value (a plan id is 32 hexadecimal digits). [characters]"""

_W, _ML, _MR = 960, 56, 36          # SVG width and side margins [px]
_TOP, _CI_H, _LANE_H, _INF_H = 20, 150, 13, 34  # top, CI panel, a lane, inference [px]


def _template(name: str) -> str:
    return (files("carbonsched.api") / "templates" / name).read_text(encoding="utf-8")


def _ts(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _hhmm(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%m-%d %H:%M")


def _tenants(doc: dict[str, Any]) -> dict[str, str]:
    return {j["job_id"]: j.get("tenant", "") for j in
            (doc.get("workload") or {}).get("jobs", [])}


def job_rows(doc: dict[str, Any], job: str = "", tenant: str = "") -> list[dict[str, Any]]:
    """The plan's jobs as rows (placed pieces, then unplaced), filtered by the search.

    Parameters
    ----------
    doc : dict
        The plan document.
    job, tenant : str
        Case-insensitive substrings of the job id and of the tenant; empty matches all.

    Returns
    -------
    list of dict
        ``job_id, tenant, state, site, start, end, gpu_type, gpus, energy_kwh, emissions_kg,
        baseline_site, baseline_start, reason``; ``start``/``end`` as ISO strings [UTC],
        energy [kWh], emissions [kg CO2e].
    """
    tenants = _tenants(doc)
    base: dict[str, dict[str, Any]] = {}
    for p in (doc.get("baseline") or {}).get("placements", []):
        base.setdefault(p["job_id"], p)
    rows: list[dict[str, Any]] = []
    for p in sorted(doc["placements"], key=lambda p: (p["start"], p["job_id"])):
        b = base.get(p["job_id"], {})
        rows.append({**{k: p.get(k) for k in ("job_id", "site", "start", "end", "gpu_type",
                                               "gpus", "energy_kwh", "emissions_kg")},
                     "tenant": tenants.get(p["job_id"], ""), "state": "placed",
                     "baseline_site": b.get("site", ""), "baseline_start": b.get("start", ""),
                     "reason": ""})
    for u in doc.get("unplaced", []):
        rows.append({"job_id": u["job_id"], "tenant": tenants.get(u["job_id"], ""),
                     "state": "unplaced", "site": "", "start": "", "end": "", "gpu_type": "",
                     "gpus": None, "energy_kwh": None, "emissions_kg": None,
                     "baseline_site": "", "baseline_start": "", "reason": u.get("reason", "")})
    j, t = job.strip().lower(), tenant.strip().lower()
    return [r for r in rows if j in r["job_id"].lower() and t in r["tenant"].lower()]


def savings(doc: dict[str, Any]) -> dict[str, float]:
    """Emissions against the carbon-agnostic baseline, from the document's ``totals``.

    Returns
    -------
    dict
        ``emissions_kg``, ``baseline_emissions_kg``, ``saved_kg`` (baseline − plan; negative
        when the plan emits more) [kg CO2e] and ``saved_pct`` [% of the baseline; 0 when the
        baseline is 0].
    """
    tot = doc["totals"]
    plan_kg, base_kg = float(tot["emissions_kg"]), float(tot["baseline_emissions_kg"])
    saved = base_kg - plan_kg
    return {"emissions_kg": plan_kg, "baseline_emissions_kg": base_kg, "saved_kg": saved,
            "saved_pct": 100.0 * saved / base_kg if base_kg else 0.0}


def _site_svg(site: str, t0: datetime, hours: int, ci: pd.DataFrame | None, y_max: float,
              placements: list[dict[str, Any]], inference: dict[datetime, int]) -> str:
    """One site's timeline: CI forecast and intervals, placement lanes, inference strip."""
    pw = _W - _ML - _MR
    span = hours * 3600.0

    def x(t: datetime) -> float:
        return _ML + pw * min(max((t - t0).total_seconds() / span, 0.0), 1.0)

    def y(v: float) -> float:
        return _TOP + _CI_H * (1.0 - v / y_max)

    lanes: list[datetime] = []
    placed: list[tuple[int, dict[str, Any]]] = []
    hidden = 0
    for p in sorted(placements, key=lambda p: (p["start"], p["job_id"])):
        s, e = _ts(p["start"]), _ts(p["end"])
        lane = next((i for i, end in enumerate(lanes) if end <= s), None)
        if lane is None:
            if len(lanes) >= MAX_LANES:
                hidden += 1
                continue
            lanes.append(e)
            lane = len(lanes) - 1
        else:
            lanes[lane] = e
        placed.append((lane, p))
    lanes_top = _TOP + _CI_H + 18
    inf_top = lanes_top + max(len(lanes), 1) * _LANE_H + 10
    height = inf_top + _INF_H + 18
    parts = [f'<svg class="timeline" data-site="{escape(site)}" viewBox="0 0 {_W} {height}" '
             f'width="{_W}" height="{height}" role="img" aria-label="timeline of '
             f'{escape(site)}">']
    for k in range(0, 5):  # y grid and labels, g/kWh
        v = y_max * k / 4
        parts.append(f'<line class="grid" x1="{_ML}" x2="{_W - _MR}" y1="{y(v):.1f}" '
                     f'y2="{y(v):.1f}"/><text x="{_ML - 4}" y="{y(v) + 3:.1f}" '
                     f'text-anchor="end">{v:,.0f}</text>')
    parts.append(f'<text x="{_ML - 4}" y="10" text-anchor="end">g/kWh</text>')
    step = 3 if hours <= 48 else 12
    for h in range(0, hours + 1, step):
        t = t0 + timedelta(hours=h)
        parts.append(f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{_TOP}" '
                     f'y2="{inf_top + _INF_H}"/><text x="{x(t):.1f}" y="{height - 4}" '
                     f'text-anchor="middle">{t.strftime("%H:%M") if h % 24 else _hhmm(t)}'
                     '</text>')
    if ci is not None and len(ci):
        ts = [t.to_pydatetime() for t in ci["ts"]]
        # each forecast hour drawn over its whole interval (the hour it labels by its start)
        edges = [(x(t), x(t + timedelta(hours=1))) for t in ts]

        def band(lo: str, hi: str) -> str:
            top = " ".join(f"{a:.1f},{y(v):.1f} {b:.1f},{y(v):.1f}"
                           for (a, b), v in zip(edges, ci[hi], strict=True))
            bottom = " ".join(f"{b:.1f},{y(v):.1f} {a:.1f},{y(v):.1f}"
                              for (a, b), v in reversed(list(zip(edges, ci[lo], strict=True))))
            return f"{top} {bottom}"

        parts.append(f'<polygon class="band95" points="{band("lo_95", "hi_95")}"/>')
        parts.append(f'<polygon class="band80" points="{band("lo_80", "hi_80")}"/>')
        mean = " ".join(f"{a:.1f},{y(v):.1f} {b:.1f},{y(v):.1f}"
                        for (a, b), v in zip(edges, ci["mean"], strict=True))
        parts.append(f'<polyline class="ci-mean" points="{mean}"/>')
        for t, row in zip(ts, ci.itertuples(index=False), strict=True):
            parts.append(f'<rect x="{x(t):.1f}" y="{_TOP}" width="{pw / hours:.1f}" '
                         f'height="{_CI_H}" fill="transparent" data-ci-hour="{t:%H}">'
                         f'<title>{_hhmm(t)} UTC: {row.mean:,.0f} g/kWh (80 %: '
                         f'{row.lo_80:,.0f}–{row.hi_80:,.0f}, 95 %: {row.lo_95:,.0f}–'
                         f'{row.hi_95:,.0f})</title></rect>')
    else:
        parts.append(f'<text x="{_ML + 8}" y="{_TOP + _CI_H / 2}">no stored carbon-intensity '
                     'forecast for this site</text>')
    parts.append(f'<text x="4" y="{lanes_top + 9}">jobs</text>')
    for lane, p in placed:
        s, e = _ts(p["start"]), _ts(p["end"])
        x0, x1 = x(s), x(e)
        yy = lanes_top + lane * _LANE_H
        jid = escape(p["job_id"])
        parts.append(f'<g class="placement" data-job="{jid}"><rect class="job" '
                     f'x="{x0:.1f}" y="{yy}" width="{max(x1 - x0 - 1, 1.5):.1f}" '
                     f'height="{_LANE_H - 2}"><title>{jid}: {escape(str(p["gpus"]))}× '
                     f'{escape(str(p["gpu_type"]))}, {_hhmm(s)}–{_hhmm(e)} UTC, '
                     f'{p["emissions_kg"]:,.2f} kg CO2e</title></rect>')
        if x1 - x0 > 6.2 * len(p["job_id"]):
            parts.append(f'<text class="job-label" x="{x0 + 3:.1f}" y="{yy + 9}">{jid}</text>')
        parts.append("</g>")
    parts.append(f'<text x="4" y="{inf_top + 12}">inference</text>'
                 f'<text x="4" y="{inf_top + 24}">GPUs</text>')
    peak = max(inference.values(), default=0)
    for h in range(hours):
        t = t0 + timedelta(hours=h)
        g = inference.get(t, 0)
        bh = (_INF_H - 12) * g / peak if peak else 0.0
        parts.append(f'<g class="inference-hour" data-hour="{t:%Y-%m-%dT%H}" '
                     f'data-gpus="{g}"><rect class="inf" x="{x(t) + 1:.1f}" '
                     f'y="{inf_top + _INF_H - bh:.1f}" width="{pw / hours - 2:.1f}" '
                     f'height="{bh:.1f}"><title>{_hhmm(t)} UTC: {g} inference GPUs</title>'
                     f'</rect><text x="{x(t) + pw / hours / 2:.1f}" y="{inf_top + 9}" '
                     f'text-anchor="middle">{g if g else ""}</text></g>')
    parts.append("</svg>")
    if hidden:
        parts.append(f'<p class="more">{hidden} more placement(s) at {escape(site)} not drawn '
                     f'(at most {MAX_LANES} lanes); the job table lists them.</p>')
    return "".join(parts)


def _fmt(v: float | None, digits: int) -> str:
    return "" if v is None else f"{v:,.{digits}f}"


def render_page(doc: dict[str, Any], forecasts: pd.DataFrame, recent: list[dict[str, Any]],
                job: str = "", tenant: str = "", plan_ref: str = "") -> str:
    """The ``/ui`` page of one plan.

    Parameters
    ----------
    doc : dict
        The plan document (the store's, as ``GET /v1/plans/latest`` answers it).
    forecasts : pandas.DataFrame
        The plan's stored forecasts (:meth:`carbonsched.store.Store.forecasts`); only the
        ``carbon_intensity_g_per_kwh`` rows are drawn [g CO2e/kWh].
    recent : list of dict
        The newest plans (:meth:`carbonsched.store.Store.list_plans`), offered as links.
    job, tenant : str
        The job search (case-insensitive substrings); both empty: every job.
    plan_ref : str
        The ``?plan=`` value the page was asked for (kept in the forms).

    Returns
    -------
    str
        The HTML document, every value from the plan escaped.
    """
    sites: list[str] = list(doc.get("sites") or dict.fromkeys(
        [p["site"] for p in doc["placements"]] + [i["site"] for i in doc.get("inference", [])]))
    t0 = _ts(doc.get("issued_at") or f"{doc['date']}T00:00:00Z")
    hours = int(doc.get("horizon_hours") or 24)
    ci_all = forecasts[forecasts["signal"] == CI_SIGNAL] if len(forecasts) else forecasts
    if len(ci_all):
        ci_all = ci_all.assign(ts=pd.to_datetime(ci_all["ts"], utc=True))
        ci_all = ci_all[(ci_all["ts"] >= t0) & (ci_all["ts"] < t0 + timedelta(hours=hours))]
    y_max = float(ci_all["hi_95"].max()) if len(ci_all) else 1.0
    y_max = max(y_max * 1.05, 1.0)
    sv = savings(doc)
    pid = doc["plan_id"]
    s = doc["solver"]
    out: list[str] = []
    out.append(f'<p class="meta" id="plan-meta" data-plan-id="{escape(pid)}">plan '
               f'<code>{escape(pid)}</code> for {escape(doc["date"])} · catalog '
               f'<b>{escape(doc["catalog"])}</b> · signals {escape(doc["signal_quality"])} · '
               f'solver {escape(str(s.get("name")))} {escape(str(s.get("status")))} · '
               f'{hours} h from {_hhmm(t0)} UTC</p>')
    if (doc.get("workload") or {}).get("source") == "demo":
        out.append('<p class="meta warn">workload: DEMO — the catalog\'s generated demo day, '
                   'not real jobs</p>')
    pct = f"{abs(sv['saved_pct']):.1f} % {'less' if sv['saved_kg'] >= 0 else 'more'}"
    out.append(
        '<h2>Savings against the carbon-agnostic baseline</h2><section id="savings">'
        f'<div>plan<br><span class="big" id="plan-kg" data-kg="{sv["emissions_kg"]:.6f}">'
        f'{sv["emissions_kg"]:,.1f}</span> kg CO2e</div>'
        f'<div>baseline<br><span class="big" id="baseline-kg" '
        f'data-kg="{sv["baseline_emissions_kg"]:.6f}">{sv["baseline_emissions_kg"]:,.1f}'
        '</span> kg CO2e</div>'
        f'<div>{"saved" if sv["saved_kg"] >= 0 else "more than the baseline"}<br>'
        f'<span class="big" id="saved-kg" data-kg="{sv["saved_kg"]:.6f}">'
        f'{abs(sv["saved_kg"]):,.1f}</span> kg CO2e ({pct})</div>'
        f'<div>placed {escape(placed_words(doc["placements"]))} · unplaced '
        f'{len(doc.get("unplaced", []))}'
        f'<br>baseline unplaced {len(doc.get("baseline_unplaced", []))}</div></section>')
    base = doc.get("baseline") or {}
    if base.get("definition"):
        out.append(f'<p class="legend">baseline: {escape(base["definition"])}</p>')
    # per-site timelines
    out.append('<h2>Per site: placements over the carbon-intensity forecast</h2>'
               '<p class="legend">orange line: forecast mean; bands: 80 % and 95 % intervals; '
               'blue bars: job placements (hover for job, GPUs, kg); green: inference GPUs per '
               'hour. One y-scale for every site.</p>')
    by_site: dict[str, list[dict[str, Any]]] = {x: [] for x in sites}
    for p in doc["placements"]:
        by_site.setdefault(p["site"], []).append(p)
    inf: dict[str, dict[datetime, int]] = {x: {} for x in by_site}
    for i in doc.get("inference", []):
        h = _ts(i["hour"])
        inf.setdefault(i["site"], {})[h] = inf.get(i["site"], {}).get(h, 0) + int(i["gpus"])
    missing = []
    for site in by_site:
        ci = ci_all[ci_all["site"] == site].sort_values("ts") if len(ci_all) else None
        if ci is None or not len(ci):
            missing.append(site)
        ps = by_site[site]
        kg = sum(p["emissions_kg"] for p in ps) + sum(
            i.get("emissions_kg", 0.0) for i in doc.get("inference", []) if i["site"] == site)
        role = (doc.get("site_roles") or {}).get(site, "")
        out.append(f'<section class="site" id="site-{escape(site)}" data-site="{escape(site)}">'
                   f'<h3>{escape(site)}{" · " + escape(role) if role else ""}</h3>'
                   f'<p class="meta">{len(ps)} placement(s) · '
                   f'{sum(inf.get(site, {}).values())} inference GPU-h · {kg:,.1f} kg CO2e</p>')
        out.append(_site_svg(site, t0, hours, ci, y_max, ps, inf.get(site, {})))
        out.append("</section>")
    if missing:
        out.insert(1, f'<p class="meta warn" id="missing-forecasts">{len(missing)} site(s) '
                   f'without a stored carbon-intensity forecast (drawn without the curve): '
                   f'{escape(", ".join(missing))}</p>')
    # job search
    rows = job_rows(doc, job, tenant)
    searched = bool(job.strip() or tenant.strip())
    out.append('<h2 id="jobs">Jobs</h2><form class="search" method="get" action="/ui#jobs">'
               f'<input type="hidden" name="plan" value="{escape(plan_ref)}">'
               f'<label>job id <input name="job" value="{escape(job)}" '
               f'maxlength="{MAX_QUERY_CHARS}"></label> '
               f'<label>tenant <input name="tenant" value="{escape(tenant)}" '
               f'maxlength="{MAX_QUERY_CHARS}"></label> <button type="submit">search</button>'
               '</form>')
    if searched:
        what = " and ".join(f"{k} containing “{escape(v.strip())}”"
                            for k, v in (("job id", job), ("tenant", tenant)) if v.strip())
        if not rows:
            out.append(f'<p class="none" id="job-result">no job in plan {escape(pid[:12])} '
                       f'with {what}</p>')
        else:
            out.append(f'<p id="job-result">{len(rows)} job row(s) with {what}</p>')
    if rows:
        out.append('<table id="job-table"><thead><tr><th>job</th><th>tenant</th>'
                   '<th>state</th><th>site</th><th>start (UTC)</th><th>end (UTC)</th>'
                   '<th>GPUs</th><th class="num">energy kWh</th>'
                   '<th class="num">kg CO2e</th><th>baseline site</th>'
                   '<th>baseline start (UTC)</th><th>reason</th></tr></thead><tbody>')
        for r in rows[:MAX_JOB_ROWS]:
            gpus = f"{r['gpus']}× {escape(str(r['gpu_type']))}" if r["gpus"] else ""
            out.append(
                f'<tr data-job="{escape(r["job_id"])}"><td>{escape(r["job_id"])}</td>'
                f'<td>{escape(r["tenant"])}</td><td>{r["state"]}</td>'
                f'<td>{escape(r["site"])}</td>'
                f'<td>{_hhmm(_ts(r["start"])) if r["start"] else ""}</td>'
                f'<td>{_hhmm(_ts(r["end"])) if r["end"] else ""}</td><td>{gpus}</td>'
                f'<td class="num">{_fmt(r["energy_kwh"], 1)}</td>'
                f'<td class="num" data-kg="{r["emissions_kg"] or 0:.6f}">'
                f'{_fmt(r["emissions_kg"], 2)}</td><td>{escape(r["baseline_site"])}</td>'
                f'<td>{_hhmm(_ts(r["baseline_start"])) if r["baseline_start"] else ""}</td>'
                f'<td>{escape(r["reason"])}</td></tr>')
        out.append("</tbody></table>")
        if len(rows) > MAX_JOB_ROWS:
            out.append(f'<p class="more" id="jobs-truncated">showing {MAX_JOB_ROWS} of '
                       f'{len(rows)} job rows; search by job id or tenant to see the rest</p>')
    elif not searched:
        out.append('<p class="none">no jobs in this plan</p>')
    # notes
    notes = doc.get("notes", [])
    groups = group_notes(notes, sites)
    out.append(f'<h2>Notes</h2><section class="notes" id="notes" data-count="{len(notes)}">'
               f'<p class="meta">{len(notes)} note(s) in {len(groups)} kind(s)</p>')
    for g in groups:
        where = (f" · {len(g['sites'])} site(s): {escape(', '.join(g['sites']))}"
                 if g["sites"] else "")
        out.append(f'<details class="note-kind" data-count="{len(g["notes"])}"><summary>'
                   f'<b>{escape(g["kind"])}</b> ({len(g["notes"])}){where}</summary><ul>'
                   + "".join(f"<li>{escape(n)}</li>" for n in g["notes"]) + "</ul></details>")
    out.append("</section>")
    if recent:
        out.append('<h2>Recent plans</h2><ul id="recent">' + "".join(
            f'<li><a href="/ui?{urlencode({"plan": r["plan_id"][:12]})}">'
            f'{escape(r["plan_id"][:12])}</a> {escape(r["date"])} {escape(r["catalog"])} · '
            f'{r["emissions_kg"]:,.1f} kg (baseline {r["baseline_emissions_kg"]:,.1f})</li>'
            for r in recent) + "</ul>")
    return _page(f"plan {pid[:12]} · carbonsched", f"Plan {pid[:12]} for {doc['date']}",
                 "".join(out), plan_ref)


def _page(title: str, heading: str, body: str, plan_ref: str = "") -> str:
    return Template(_template("ui.html")).substitute(
        title=escape(title), heading=escape(heading), body=body, plan_ref=escape(plan_ref),
        css=_template("ui.css"))


def _message(status: int, heading: str, text: str, plan_ref: str = "") -> HTMLResponse:
    body = f'<p class="none" id="message">{escape(text)}</p>'
    return HTMLResponse(_page(f"{heading} · carbonsched", heading, body, plan_ref),
                        status_code=status)


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
def plan_page(state: State, role: ReadRole,
              plan: Annotated[str, Query(description="A plan id or a unique prefix of it (at "
                                         "least 6 characters); empty: the newest plan of the "
                                         "served catalog.")] = "",
              job: Annotated[str, Query(description="Show jobs whose id contains this "
                                        "(case-insensitive).")] = "",
              tenant: Annotated[str, Query(description="Show jobs whose tenant contains this "
                                           "(case-insensitive).")] = "") -> HTMLResponse:
    """The plan as a read-only web page (HTML; needs the read role).

    Not in the OpenAPI document: a page for people, not an API for clients (they read
    ``GET /v1/plans/latest``). Answers 200 with the page, 404 with a page naming an unknown
    plan or saying there is none yet, 422 with a page naming a too-long field and its limit.
    """
    for name, value, limit in (("plan", plan, MAX_PLAN_REF_CHARS), ("job", job, MAX_QUERY_CHARS),
                               ("tenant", tenant, MAX_QUERY_CHARS)):
        if len(value) > limit:
            return _message(422, "Search too long",
                            f"?{name}= is {len(value)} characters; at most {limit} are "
                            f"accepted — shorten it (a part of the {name} is enough).")
    ref = plan.strip()
    if ref and ref != "latest":
        try:
            pid = state.store.resolve_plan_id(ref)
        except InputError as exc:
            return _message(404, "No such plan", f"{exc}. Leave the plan field empty for the "
                            "newest plan, or pick one under Recent plans.", plan)
    else:
        pid = state.db.latest_plan_id(state.catalog.name)
        if pid is None:
            return _message(404, "No plan yet",
                            f"no plan yet for catalog {state.catalog.name!r}: run "
                            "`carbonsched plan` (or wait for the service's daily run), then "
                            "reload this page.")
    doc = state.store.get_plan(pid)
    html = render_page(doc, state.store.forecasts(pid), state.store.list_plans(limit=10),
                       job, tenant, plan)
    return HTMLResponse(html)
