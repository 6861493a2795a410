"""Build the sustainability report: tidy frames per job, site, tenant and day, and totals.

Every number comes from one hourly frame of *work rows* (a job or an inference area's GPUs at one
site in one hour, with the fraction of the hour worked):

* hours: the backend's actual start and end where dispatch knows them
  (:func:`carbonsched.report.inputs.actual_runs`), else the plan's; labelled ``actual``/``planned``;
* IT energy [kWh]: measured (power telemetry) where given and non-zero, else modelled as
  ``gpus × power_per_gpu_kw × hours`` (the workload's IT power per GPU), labelled which;
* facility energy = IT energy × PUE, the PUE from the *actual* weather through the site's PUE
  model (:func:`carbonsched.forecasts.pue.pue_from_weather`; its free-cooling floor when weather
  is missing, counted);
* location-based emissions = facility energy × the hour's actual *direct* (combustion) grid
  intensity (Electricity Maps ``Carbon Intensity gCO₂eq/kWh (direct)``); the life-cycle figure is
  a separate column, never mixed in; an hour without actual data is a *gap* (NaN, with its energy
  share reported), never zero (GHG Protocol Scope 2 Guidance 2015, ch. 6, location-based method);
* market-based emissions under two rules (:mod:`carbonsched.report.scope2`);
* SCI per job (ISO/IEC 21031:2024, Software Carbon Intensity): ``SCI = (E × I + M) / R`` with
  ``E × I`` the job's location-based emissions, ``M`` its GPUs' embodied emissions amortised over
  their lifetime for the hours reserved (``data/embodied_gpu.toml``) and ``R`` the functional unit,
  one GPU-hour;
* avoided emissions: the plan's carbon-agnostic counterfactual (stored with each plan) scored the
  same way, minus the inventory — reported beside the inventory, never subtracted from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import Catalog, load_catalog
from carbonsched.errors import InputError, UnknownSiteError
from carbonsched.forecasts.green_surplus import green_surplus_index
from carbonsched.forecasts.pue import pue_from_weather
from carbonsched.pipeline.daily import HISTORY_DAYS, MAX_HORIZON_HOURS, plan_uses
from carbonsched.pipeline.replayed import ReplayedSignals, ReplayShift
from carbonsched.report.fairness import RULE as FAIR_RULE
from carbonsched.report.fairness import fairness_section
from carbonsched.report.flex import RULE as FLEX_RULE
from carbonsched.report.flex import flexibility_section
from carbonsched.report.inputs import (
    actual_runs,
    load_embodied,
    normalise_actual_runs,
    read_telemetry,
    stored_forecasts,
    stored_plans,
)
from carbonsched.report.instruments import MarketConfig, load_market_config
from carbonsched.report.scope2 import RULE_2015, RULE_HOURLY, market_based
from carbonsched.timeaxis import HOUR, day_start_utc

FUNCTIONAL_UNIT = "GPU-hour"

UNITS = {
    "_kwh": "kWh", "_mwh": "MWh", "_kg": "kg CO2e", "_g_per_kwh": "g CO2e/kWh",
    "_g_per_unit": f"g CO2e per functional unit ({FUNCTIONAL_UNIT})", "_gpu_h": "GPU-hours",
    "_share": "fraction 0..1", "_pct": "percent", "_ratio": "dimensionless", "_kw": "kW",
    "_g_per_gpu_h": "g CO2e per GPU-hour",
}
"""Column-name suffix -> unit (the metadata block repeats it)."""


@dataclass
class Report:
    """A built report: the frames every format renders, totals and metadata.

    Attributes
    ----------
    frames
        ``jobs``, ``sites``, ``tenants``, ``days``, ``site_hours``, ``instruments``: one tidy
        frame per breakdown, column names with units (:data:`UNITS`); ``flex_events`` and
        ``flex_hours`` when a plan of the period committed a grid event
        (:mod:`carbonsched.report.flex`); ``fair_shares`` and ``fair_days`` when a plan was
        planned with tenants' fair shares (:mod:`carbonsched.report.fairness`).
    totals
        Inventory totals and the separately shown avoided emissions and forecast error.
    metadata
        Period, catalog, rules, provenance, notes.
    """

    frames: dict[str, pd.DataFrame]
    totals: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)


def _software_version() -> str:
    try:
        return version("carbonsched")
    except PackageNotFoundError:  # pragma: no cover - running from a tree without install
        return "unknown"


def _intervals(doc: dict[str, Any], part: dict[str, Any], catalog: Catalog,
               counts: dict[str, int]) -> list[dict[str, Any]]:
    """Work intervals (jobs and inference hours) of one plan part (the plan or its baseline)."""
    from carbonsched.workload.files import it_power_per_gpu_kw

    wl = doc.get("workload") or {}
    jobs = {j["job_id"]: j for j in wl.get("jobs", [])}
    # a row with an hour holds in that hour only; one without, in every hour
    inf_kw = {(r["area"], r["gpu_type"], pd.Timestamp(r["hour"]) if r.get("hour") else None):
              r["power_per_gpu_kw"] for r in wl.get("inference_power", [])}
    out = []
    for p in part.get("placements", []):
        j = jobs.get(p["job_id"])
        if j is None:
            counts["no_workload_record"] += 1
            kw, tenant, kind = it_power_per_gpu_kw(p["gpu_type"], catalog), "unknown", "unknown"
        else:
            # a fractional job draws its share of the GPU's power (as the planner counts it)
            kw = j["power_per_gpu_kw"] * (j.get("gpu_share") or 1.0)
            tenant, kind = j["tenant"], j["kind"]
        out.append(dict(plan_id=doc["plan_id"], date=doc["date"], job_id=p["job_id"],
                        piece=int(p.get("piece", 0)), tenant=tenant, kind=kind, site=p["site"],
                        gpu_type=p["gpu_type"], gpus=int(p["gpus"]),
                        start=pd.Timestamp(p["start"]), end=pd.Timestamp(p["end"]),
                        power_per_gpu_kw=float(kw),
                        overhead_minutes=float(p.get("overhead_minutes") or 0.0),
                        plan_emissions_kg=float(p.get("emissions_kg") or 0.0)))
    for i in part.get("inference", []):
        if int(i["gpus"]) == 0:
            continue
        h = pd.Timestamp(i["hour"])
        key = (i["area"], i.get("gpu_type", ""))
        kw = inf_kw.get((*key, h), inf_kw.get((*key, None)))
        if kw is None:
            counts["no_inference_power"] += 1
            kw = it_power_per_gpu_kw(i.get("gpu_type", ""), catalog)
        out.append(dict(plan_id=doc["plan_id"], date=doc["date"],
                        job_id=f"inference:{i['area']}:{doc['date']}", piece=0,
                        tenant=i["area"], kind="inference", site=i["site"],
                        gpu_type=i.get("gpu_type", ""), gpus=int(i["gpus"]), start=h,
                        end=h + HOUR, power_per_gpu_kw=float(kw), overhead_minutes=0.0,
                        plan_emissions_kg=float(i.get("emissions_kg") or 0.0)))
    return out


@dataclass(frozen=True)
class PlansInForce:
    """The order of the report's plans and the plan in force at each hour.

    Plans are ranked by issue time (``issued_at``; a document without one: 00:00 UTC of its
    date), then by the order they were stored, so a re-run of a day's plan (same issue time)
    ranks after the run it replaces. The plan *in force* at an hour is the highest-ranked plan
    issued at or before it whose horizon (``horizon_hours``, 24 when absent) covers it: a
    rolling service's runs of one day each hold from their issue time to the next run's.
    """

    rank: dict[str, tuple[pd.Timestamp, int]]
    """Plan id -> (issue time [UTC], order stored)."""
    hour: dict[pd.Timestamp, str]
    """Hour start [UTC] -> id of the plan in force."""

    @classmethod
    def of(cls, docs: list[dict[str, Any]]) -> PlansInForce:
        """Rank ``docs`` (given oldest stored first) and find the plan in force at each hour."""
        rank = {}
        for k, d in enumerate(docs):
            issued = (pd.Timestamp(d["issued_at"]) if d.get("issued_at")
                      else day_start_utc(d["date"]))
            rank[d["plan_id"]] = (issued.tz_convert("UTC"), k)
        hour: dict[pd.Timestamp, str] = {}
        for d in sorted(docs, key=lambda d: rank[d["plan_id"]]):
            hours = int(math.ceil(float(d.get("horizon_hours") or 24)))
            for h in pd.date_range(rank[d["plan_id"]][0].floor("h"), periods=hours, freq="h"):
                hour[h] = d["plan_id"]
        return cls(rank, hour)

    def at(self, times: Any) -> list[str | None]:
        """The id of the plan in force at each instant (``None`` where no plan covers it)."""
        return [self.hour.get(h) for h in pd.DatetimeIndex(times).floor("h")]

    def holds(self, plan_ids: pd.Series, at: pd.Series) -> pd.Series:
        """Whether each plan is in force at each instant (an hour no plan covers: ``True``)."""
        if plan_ids.empty:
            return pd.Series(True, index=plan_ids.index, dtype=bool)
        force = pd.Series(self.at(at), index=plan_ids.index)
        return force.isna() | (force == plan_ids)

    def newest_of_each_date(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The highest-ranked plan of each date (the day's last run), oldest date first."""
        last: dict[str, dict[str, Any]] = {}
        for d in sorted(docs, key=lambda d: self.rank[d["plan_id"]]):
            last[d["date"]] = d
        return [last[k] for k in sorted(last)]


def _knows(doc: dict[str, Any]) -> set[str]:
    """The jobs a plan decided about: its workload, and the rolling runs it held or ended."""
    known = {j["job_id"] for j in (doc.get("workload") or {}).get("jobs", [])}
    rolling = doc.get("rolling") or {}
    known |= set(rolling.get("running_held", []))
    known |= {u["job_id"] for u in rolling.get("ended", []) if isinstance(u, dict)}
    return known


def _inference_in_force(iv: pd.DataFrame, force: PlansInForce) -> pd.Series:
    """Rows to keep: every job row, and an inference hour only from the plan in force then."""
    if iv.empty:
        return pd.Series(True, index=iv.index, dtype=bool)
    return (iv["kind"] != "inference") | force.holds(iv["plan_id"], iv["start"])


def _one_plan_per_job(plan_iv: pd.DataFrame, base_iv: pd.DataFrame,
                      docs: list[dict[str, Any]], act: pd.DataFrame,
                      notes: list[str], force: PlansInForce,
                      dispatched: pd.DataFrame | None = None
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each job's intervals from the one plan it ran from, and its counterfactual's with them.

    A job placed by several plans of the period (a rolling service's runs of one day, a window
    across two days' horizons, an API job re-planned the next day, a re-run of a day's plan)
    ran once:

    1. from the plan dispatch recorded its first piece from (``dispatched``, the outbox,
       started or not; else ``act``, the actual runs);
    2. else from the newest of the plans whose placement of it was *live*: a placement is
       live unless the plan in force at its first start (:class:`PlansInForce`) is a later
       plan that decided about the job (:func:`_knows`: it placed it elsewhere, left it
       unplaced or ended it) or a re-run of the same issue time;
    3. else (every placement re-planned away before it started) not at all.

    The others' intervals of it are dropped, in the plan and its baseline alike, and the
    notes count the jobs of 2 and 3.

    Returns
    -------
    plan_iv, base_iv
        The intervals kept. [-]
    """
    work = plan_iv[plan_iv["kind"] != "inference"]
    if work.empty:
        return plan_iv, base_iv
    # the plan of each job's first dispatched piece (its claim: carbonsched.dispatch.outbox),
    # whether or not the run has started
    ran_from: dict[str, str] = {}
    for frame in (dispatched, act):
        if frame is None or frame.empty or "plan_id" not in frame:
            continue
        known = frame[frame["plan_id"].notna()].sort_values("piece", kind="stable")
        for job, plan in zip(known["job_id"], known["plan_id"], strict=True):
            ran_from.setdefault(job, plan)
    knows = {d["plan_id"]: _knows(d) for d in docs}
    first = work.groupby(["job_id", "plan_id"], sort=False)["start"].min().reset_index()
    force_at = force.at(first["start"])
    # a later plan in force replaces a placement when it decided about the job, or when it
    # re-ran the same issue (a re-run of the day's plan replaces the run it repeats)
    first["live"] = [f is None or f == p or (job not in knows.get(f, set())
                                             and force.rank[f][0] != force.rank[p][0])
                     for job, p, f in zip(first["job_id"], first["plan_id"], force_at,
                                          strict=True)]
    keep: dict[str, str | None] = {}
    several, gone = [], []
    for job, g in first.groupby("job_id", sort=False):
        plans = list(g["plan_id"])
        if ran_from.get(job) in plans:
            keep[job] = ran_from[job]
        else:
            live = list(g.loc[g["live"], "plan_id"])
            keep[job] = max(live, key=force.rank.__getitem__) if live else None
            if keep[job] is None:
                gone.append(job)
        if len(plans) > 1 and keep[job] is not None:
            several.append(job)

    def dropped(iv: pd.DataFrame) -> pd.Series:
        if iv.empty:
            return pd.Series(False, index=iv.index)
        jobs = iv["kind"] != "inference"
        chosen = iv["job_id"].map(keep)
        return jobs & iv["job_id"].isin(keep) & (iv["plan_id"] != chosen)

    def some(ids: list[str]) -> str:
        ids = sorted(ids)
        return ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")

    if several:
        notes.append(f"{len(several)} job(s) placed by more than one of the period's plans "
                     "counted once, from the plan dispatch ran them from, else the newest "
                     f"whose placement was still in force at its start: {some(several)}")
    if gone:
        notes.append(f"{len(gone)} job(s) re-planned away before they started (a later plan "
                     f"in force at their planned start did not run them then) not counted: "
                     f"{some(gone)}")
    return plan_iv[~dropped(plan_iv)], base_iv[~dropped(base_iv)]


def _outbox_of(store: Any, plan_iv: pd.DataFrame, t0: pd.Timestamp,
               t1: pd.Timestamp) -> pd.DataFrame:
    """The outbox rows a report of ``[t0, t1)`` reads: its jobs' and the runs in the period.

    The rows of the jobs the period's plans place (for :func:`_one_plan_per_job`: the plan
    each ran from) and the rows whose actual run may overlap the period (for
    :func:`~carbonsched.report.inputs.actual_runs`, which keeps exactly the overlapping ones,
    and names runs of jobs the plans do not place), each row once.
    """
    from carbonsched.dispatch.outbox import dispatch_records

    work = plan_iv.loc[plan_iv["kind"] != "inference", "job_id"]
    frames = [f for f in (dispatch_records(store, job_ids=set(work)),
                          dispatch_records(store, ran_in=(t0, t1))) if len(f)]
    if not frames:
        return dispatch_records(store, job_ids=())
    both = pd.concat(frames, ignore_index=True).drop_duplicates("key")
    return both.sort_values(["site", "planned_start", "key"], ignore_index=True)


def _plan_estimate_kg(plan_iv: pd.DataFrame, t0: pd.Timestamp, t1: pd.Timestamp) -> float:
    """The plans' own forecast emissions of the work the report counts, inside ``[t0, t1)``.

    Each counted row (a job's piece from the one plan it ran from, an inference hour from the
    plan in force) contributes its own ``emissions_kg`` (the plan's forecast, net of the
    green surplus it absorbs: :func:`carbonsched.plan.result.build_plan_result`) pro rata to
    the share of its *planned* interval inside the period. [kg CO2e]
    """
    if plan_iv.empty:
        return 0.0
    s, e = plan_iv["planned_start"], plan_iv["planned_end"]
    inside = (e.clip(upper=t1) - s.clip(lower=t0)).clip(lower=pd.Timedelta(0))
    length = (e - s).where(e > s)
    share = (inside / length).fillna(0.0)
    return float((plan_iv["plan_emissions_kg"] * share).sum())


def _expand(intervals: pd.DataFrame, t0: pd.Timestamp, t1: pd.Timestamp) -> pd.DataFrame:
    """One row per interval and hour it overlaps inside ``[t0, t1)``, with ``hour_fraction``."""
    rows = []
    for k, r in enumerate(intervals.itertuples(index=False)):
        s, e = max(r.start, t0), min(r.end, t1)
        h = s.floor("h")
        while h < e:
            frac = (min(h + HOUR, e) - max(h, s)) / HOUR
            if frac > 0:
                rows.append((k, h, frac))
            h += HOUR
    if not rows:
        return pd.DataFrame(columns=[*intervals.columns, "hour", "hour_fraction"])
    idx, hours, frac = zip(*rows, strict=True)
    out = intervals.iloc[list(idx)].reset_index(drop=True)
    out["hour"] = pd.DatetimeIndex(hours)
    out["hour_fraction"] = np.asarray(frac, float)
    return out


@dataclass
class _SiteActual:
    frame: pd.DataFrame          # hour -> ci, ci_lca, estimated, pue, surplus_kw
    meta: dict[str, Any]
    pue_floor_hours: int
    surplus_unknown: str = ""
    """Why some hours have no actual green-surplus figure (counted as no surplus), with how
    many; ``""`` when every hour has one or the site has no surplus to absorb."""
    reader_notes: tuple[str, ...] = ()
    """What the signal reader noted of the data read (missing or invalid hours, quarantined or
    repeated rows, clock checks), as a plan's notes carry them (:func:`plan_uses`)."""


def _site_actuals(catalog: Catalog, data_dir: Path, t0: pd.Timestamp, t1: pd.Timestamp,
                  sites: set[str], replay: ReplayShift | None = None) -> dict[str, _SiteActual]:
    out = {}
    load = ReplayedSignals(replay).load_site_signals if replay is not None else load_site_signals
    for site in catalog.sites:
        if site.id not in sites:
            continue
        frame, meta = load(site, data_dir, t0 - pd.Timedelta(days=HISTORY_DAYS), t1)
        hours = pd.date_range(t0, t1, freq="h", inclusive="left")
        f = frame.reindex(hours)
        w = f[["temperature_c", "relative_humidity_pct"]]
        ok = w.notna().all(axis=1)
        pue = pd.Series(site.pue.pue_min, index=hours, dtype=float)
        if ok.any():
            pue[ok] = pue_from_weather(w.loc[ok, "temperature_c"],
                                       w.loc[ok, "relative_humidity_pct"], site.pue).to_numpy()
        reference = frame.loc[frame.index < t0, "renewable_pct"] if "renewable_pct" in frame \
            else None
        unknown = ""
        try:
            gsi = green_surplus_index(frame, reference=reference).reindex(hours)
            if gsi.isna().any():
                unknown = f"{int(gsi.isna().sum())} h without data"
            gsi = gsi.fillna(0.0)
        except InputError:
            unknown = (f"{len(hours)} h: its data has no green-surplus index, price or "
                       "renewable share")
            gsi = pd.Series(0.0, index=hours)
        if site.green_surplus_max_kw <= 0:
            unknown = ""     # nothing to absorb there: no figure is missing
        est = f["carbon_intensity_estimated"] if "carbon_intensity_estimated" in f else \
            pd.Series(False, index=hours)
        lca = f["carbon_intensity_lca_g_per_kwh"] if "carbon_intensity_lca_g_per_kwh" in f \
            else pd.Series(np.nan, index=hours)
        out[site.id] = _SiteActual(pd.DataFrame({
            "ci": f["carbon_intensity_g_per_kwh"].astype(float),
            "ci_lca": lca.astype(float),
            "estimated": est.fillna(False).astype(bool),
            "pue": pue,
            "surplus_kw": gsi.clip(0, 1) * site.green_surplus_max_kw}, index=hours),
            meta, int((~ok).sum()), unknown,
            tuple(n for n in meta.get("notes", []) if plan_uses(n)))
    return out


def _score(rows: pd.DataFrame, actuals: dict[str, _SiteActual]) -> pd.DataFrame:
    """Attach the hour's actual PUE, intensities, and location-based emissions to work rows."""
    rows = rows.copy()
    for col in ("ci", "ci_lca", "estimated", "pue"):
        vals = np.empty(len(rows), dtype=object if col == "estimated" else float)
        for sid, a in actuals.items():
            m = (rows["site"] == sid).to_numpy()
            vals[m] = a.frame[col].reindex(pd.DatetimeIndex(rows.loc[m, "hour"])).to_numpy()
        rows[col] = vals
    rows["estimated"] = rows["estimated"].astype(bool)
    rows["facility_energy_kwh"] = rows["it_energy_kwh"] * rows["pue"]
    rows["location_based_kg"] = rows["facility_energy_kwh"] * rows["ci"] / 1000.0
    rows["lifecycle_kg"] = rows["facility_energy_kwh"] * rows["ci_lca"] / 1000.0
    return rows


def build_report(store: Any, catalog: str | Path | None, data_dir: str | Path | None,
                 date_from: str, date_to: str, *,
                 instruments: str | Path | MarketConfig | None = None,
                 telemetry: str | Path | pd.DataFrame | None = None,
                 actual: pd.DataFrame | None = None,
                 plans: list[dict[str, Any]] | None = None,
                 now: datetime | None = None) -> Report:
    """Build the report of the days ``date_from`` .. ``date_to`` (inclusive, UTC).

    Parameters
    ----------
    store
        The store holding the plans (:class:`carbonsched.store.Store`); also asked for actual
        runs (:func:`carbonsched.report.inputs.actual_runs`) and each plan's forecasts.
    catalog
        Catalog name or TOML path; ``None`` takes the stored plans' catalog (one only).
    data_dir
        Folder of the real data (``../shared/data`` layout); ``None`` uses the settings.
    date_from, date_to
        First and last day, ``YYYY-MM-DD``.
    instruments
        Contractual instruments TOML (:mod:`carbonsched.report.instruments`) or a loaded config.
    telemetry
        Power-telemetry CSV (:mod:`carbonsched.report.inputs`) or its frame.
    actual
        Actual runs to use instead of asking the store (columns of
        :data:`carbonsched.report.inputs.ACTUAL_RUN_COLUMNS`).
    plans
        Plan documents to use instead of the store's.
    now
        The report's time (tz-aware; default the wall clock): a run still going (no end on
        record) is counted to it, or to the period's end when that is earlier, and the notes
        say so.

    Returns
    -------
    Report

    Raises
    ------
    InputError
        Bad dates, a period with no plans, plans of several catalogs without ``catalog``,
        bad instruments or telemetry (see their readers).
    """
    t0 = day_start_utc(date_from)
    t1 = day_start_utc(date_to) + pd.Timedelta(days=1)
    if t1 <= t0:
        raise InputError(f"--to {date_to} is before --from {date_from}")
    if data_dir is None:
        from carbonsched.config import get_settings

        data_dir = get_settings().data_dir
    data_dir = Path(data_dir)
    dates = [d.strftime("%Y-%m-%d") for d in pd.date_range(t0, t1 - HOUR, freq="D")]
    # plans of the days before the period whose horizon reaches into it (work that crosses the
    # period's start is counted for its hours inside the period, never dropped)
    lookback = [d.strftime("%Y-%m-%d") for d in pd.date_range(
        t0 - pd.Timedelta(hours=MAX_HORIZON_HOURS), t0 - HOUR, freq="D")]
    cat_name = None
    if catalog is not None:
        cat_name = load_catalog(catalog).name
    skipped: list[str] = []
    docs = plans if plans is not None else stored_plans(store, lookback + dates, cat_name,
                                                        skipped)
    docs = [d for d in docs if (d["date"] in dates or d["date"] in lookback)
            and (cat_name is None or d["catalog"] == cat_name)]
    earlier = [d for d in docs if d["date"] in lookback]
    docs = [d for d in docs if d["date"] in dates]
    where = getattr(store, "url", "the given plans")
    if not docs:
        raise InputError(
            f"no plans between {date_from} and {date_to}"
            + (f" for catalog {cat_name!r}" if cat_name else "")
            + f" in {where}; plan those days first (carbonsched plan --date D"
            + (f" --catalog {cat_name}" if cat_name else "") + ")")
    cats = sorted({d["catalog"] for d in docs})
    if len(cats) > 1:
        raise InputError(f"the period has plans of several catalogs ({', '.join(cats)}); "
                         "choose one with --catalog")
    cat = load_catalog(catalog if catalog is not None else cats[0])
    zones = {s.id: s.zone for s in cat.sites}
    notes: list[str] = []
    if skipped:
        notes.append(f"{len(skipped)} plan(s) without a usable solution (not optimal, feasible "
                     f"or heuristic) passed over for an earlier plan of the day: "
                     f"{', '.join(skipped[:5])}" + (" ..." if len(skipped) > 5 else ""))
    _check_sites(docs + earlier, cat)
    replay = _replay_of(docs + earlier)
    if replay is not None:  # the first thing the reader is told
        notes.insert(0, _replay_note(docs + earlier, replay))
    counts = {"no_workload_record": 0, "no_inference_power": 0}
    missing_days = sorted(set(dates) - {d["date"] for d in docs})
    if missing_days:
        notes.append(f"{len(missing_days)} of {len(dates)} day(s) have no plan and are not in "
                     f"the report: {', '.join(missing_days[:10])}"
                     + (" ..." if len(missing_days) > 10 else ""))

    # ---- work intervals: plan and counterfactual
    force = PlansInForce.of(earlier + docs)
    plan_iv = pd.DataFrame([r for d in docs + earlier for r in _intervals(d, d, cat, counts)])
    if not plan_iv.empty:  # an inference hour is served once: by the plan in force then
        plan_iv = plan_iv[_inference_in_force(plan_iv, force)]
    if plan_iv.empty:
        raise InputError(f"the {len(docs)} plan(s) between {date_from} and {date_to} place no "
                         "work; there is nothing to report")
    base_docs = [d for d in docs + earlier if "baseline" in d]
    base_iv = pd.DataFrame([r for d in base_docs for r in _intervals(d, d["baseline"], cat,
                                                                     counts)])
    if len(base_iv):
        base_iv = base_iv[_inference_in_force(base_iv, force)]
    if len(base_iv):
        # like for like: the counterfactual runs the work the plan ran (its placed jobs and all
        # inference), never jobs the plan left unplaced (they would count as "avoided")
        placed = {(d["plan_id"], p["job_id"]) for d in base_docs
                  for p in d.get("placements", [])}
        keep = (base_iv["kind"] == "inference") | pd.Series(
            [(a, b) in placed for a, b in zip(base_iv["plan_id"], base_iv["job_id"],
                                              strict=True)], index=base_iv.index)
        if (~keep).any():
            notes.append(f"{int((~keep).sum())} job(s) the carbon-agnostic baseline ran but the "
                         "plan left unplaced are not in the counterfactual (like for like)")
        base_iv = base_iv[keep]
    # ---- actual hours from dispatch
    # the outbox: the plan each of the period's jobs was dispatched from, and the runs that
    # may overlap the period (read in SQL: the outbox's other history is not read)
    dispatched = None
    if actual is None and getattr(store, "actual_runs", None) is None \
            and hasattr(store, "engine"):
        dispatched = _outbox_of(store, plan_iv, t0, t1)
    act = (normalise_actual_runs(actual) if actual is not None
           else actual_runs(store, t0, t1, dispatched))
    if "end_assumed" in act and (n_assumed := int((act["end_assumed"] == True).sum())):  # noqa: E712
        notes.append(f"{n_assumed} run(s) ended (cancelled, failed or lost) without an end on "
                     "record: counted to their planned end")
    plan_iv, base_iv = _one_plan_per_job(plan_iv, base_iv, docs + earlier, act, notes, force,
                                         dispatched)
    plan_iv["hours_basis"] = "planned"
    plan_iv["planned_start"] = plan_iv["start"]
    plan_iv["planned_end"] = plan_iv["end"]
    if len(act):
        # a run is one dispatch unit: (job, piece); a preemptible job's pieces run apart
        a = act.drop_duplicates(["job_id", "piece"], keep="last").set_index(["job_id", "piece"])
        unit = pd.MultiIndex.from_arrays([plan_iv["job_id"], plan_iv["piece"]])
        m = pd.Series(unit.isin(a.index), index=plan_iv.index) & (plan_iv["kind"] != "inference")
        ids = unit[m.to_numpy()]
        plan_iv.loc[m, "start"] = a.loc[ids, "actual_start"].to_numpy()
        end = a.loc[ids, "actual_end"]
        if end.isna().any():
            # still going: its hours are counted as far as they have happened, never past the
            # report's time (a refresh loop that stopped would otherwise bill future hours)
            t_now = pd.Timestamp(now if now is not None else datetime.now(UTC))
            t_now = t_now.tz_localize(UTC) if t_now.tzinfo is None else t_now.tz_convert(UTC)
            cut = min(t1, t_now)
            start = pd.to_datetime(a.loc[ids, "actual_start"], utc=True)
            end = end.where(end.notna(), start.where(start > cut, cut))
            going = sorted({j for (j, _p), e, st in zip(ids, a.loc[ids, "actual_end"].isna(),
                                                        start <= cut, strict=True) if e and st})
            if going:
                notes.append(f"{len(going)} run(s) still going, no end on record "
                             f"({', '.join(going[:5])}{', ...' if len(going) > 5 else ''}): "
                             f"counted to {cut:%Y-%m-%d %H:%M} UTC, "
                             + ("the report's time" if cut < t1 else "the period's end")
                             + " (their state is as `carbonsched status` last refreshed it)")
        plan_iv.loc[m, "end"] = pd.to_datetime(end, utc=True).to_numpy()
        site = a.loc[ids, "site"]
        plan_iv.loc[m, "site"] = np.where(site.notna(), site, plan_iv.loc[m, "site"])
        plan_iv.loc[m, "hours_basis"] = "actual"
        unknown = sorted({j for j, _ in set(a.index) - set(unit)})
        if unknown:
            notes.append(f"{len(unknown)} actual run(s) for jobs not in the period's plans "
                         f"ignored: {', '.join(unknown[:5])}")
    rows = _expand(plan_iv, t0, t1)
    rows["it_energy_modelled_kwh"] = rows["gpus"] * rows["power_per_gpu_kw"] * rows[
        "hour_fraction"]
    rows["it_energy_kwh"] = rows["it_energy_modelled_kwh"]
    rows["it_energy_basis"] = "modelled"
    rows["it_energy_source"] = "gpus x power_per_gpu_kw x hours (workload)"

    # ---- measured IT energy
    zero_counter_hours = 0
    telemetry_unused = 0
    if telemetry is not None:
        tel = telemetry if isinstance(telemetry, pd.DataFrame) else read_telemetry(
            telemetry, set(zones))
        # a telemetry row is one job's energy at one site in one hour; the report's rows of
        # that job, site and hour (pieces, or an area's inference on two GPU types) share it
        # in proportion to their modelled energy, so none is counted twice
        key = pd.MultiIndex.from_arrays([rows["job_id"], rows["hour"], rows["site"]])
        tk = tel.set_index(["job_id", "hour_utc", "site"])
        hit = key.isin(tk.index)
        telemetry_unused = int((~tk.index.isin(key)).sum())
        meas = tk.reindex(key[hit])
        zero = meas["it_energy_kwh"].to_numpy() == 0
        zero_counter_hours = int(meas.index[zero].nunique())
        modelled = rows.loc[hit, "it_energy_modelled_kwh"]
        cell = modelled.groupby([rows.loc[hit, c] for c in ("job_id", "hour", "site")])
        total, count = cell.transform("sum").to_numpy(), cell.transform("size").to_numpy()
        share = np.where(total > 0, modelled.to_numpy() / np.where(total > 0, total, 1.0),
                         1.0 / count)
        use = np.flatnonzero(hit)[~zero]
        rows.loc[use, "it_energy_kwh"] = (meas["it_energy_kwh"].to_numpy() * share)[~zero]
        rows.loc[use, "it_energy_basis"] = "measured"
        rows.loc[use, "it_energy_source"] = meas["source"].to_numpy()[~zero]
        if zero_counter_hours:
            notes.append(f"{zero_counter_hours} job-hour(s) had zero power counters (power "
                         "source missing: unknown, not 0 W); their IT energy is modelled")
        if telemetry_unused:
            notes.append(f"{telemetry_unused} telemetry row(s) match no job, site and hour of "
                         "the report and were ignored")

    # ---- actual signals
    used_sites = set(rows["site"]) | (set(base_iv["site"]) if len(base_iv) else set())
    actuals = _site_actuals(cat, data_dir, t0, t1, used_sites, replay)
    rows = _score(rows, actuals)

    # ---- market-based, both rules
    cfg = instruments if isinstance(instruments, MarketConfig) else load_market_config(
        instruments, set(zones))
    mrows = rows[["site", "hour", "facility_energy_kwh"]].assign(
        location_g_per_kwh=rows["ci"])
    m15, use15 = market_based(mrows, cfg, zones, (t0, t1), hourly=False)
    mh, useh = market_based(mrows, cfg, zones, (t0, t1), hourly=True)
    rows["market_based_kg"] = m15["market_kg"]
    rows["market_based_hourly_kg"] = mh["market_kg"]
    rows["cfe_matched_kwh"] = mh["cfe_kwh"]
    rows["unmatched_basis_2015"] = m15["unmatched_basis"]
    rows["unmatched_basis_hourly"] = mh["unmatched_basis"]
    rows["gpu_h"] = rows["gpus"] * rows["hour_fraction"]
    rows["gap"] = rows["ci"].isna()
    for name, use in (("2015", use15), ("hourly", useh)):
        over = use[use["unused_mwh"] > 1e-9]
        for r in over.itertuples():
            notes.append(f"instrument {r.instrument} ({name} rule): {r.unused_mwh:.3f} MWh of "
                         f"{r.volume_in_period_mwh:.3f} MWh met no consumption in its market and "
                         "period; capped (not carried over)")

    # ---- embodied and SCI
    emb = load_embodied()
    per_gpu_h = {g: emb.per_gpu_hour_g(g) for g in rows["gpu_type"].unique()}
    rows["embodied_kg"] = rows["gpu_h"] * rows["gpu_type"].map(
        lambda g: per_gpu_h[g][0]) / 1000.0

    # ---- counterfactual
    if len(base_iv):
        brows = _expand(base_iv, t0, t1)
        brows["it_energy_kwh"] = brows["gpus"] * brows["power_per_gpu_kw"] * brows[
            "hour_fraction"]
        brows = _score(brows, actuals)
        counterfactual_kg = float(brows["location_based_kg"].sum())
        b_energy = float(brows["facility_energy_kwh"].sum())
        b_gap = float(brows.loc[brows["ci"].isna(), "facility_energy_kwh"].sum())
        counterfactual_gap_share = b_gap / b_energy if b_energy else 0.0
        if b_gap > 0:
            notes.append(f"the counterfactual has {100 * counterfactual_gap_share:.2f} % of its "
                         f"facility energy ({b_gap:.1f} kWh) in hours without an actual grid "
                         "intensity, excluded as the inventory's gap is: avoided emissions "
                         "compare the hours each side has data for")
        counterfactual_basis = ("the plans' carbon-agnostic baseline placements, scored like the "
                                "inventory (actual PUE and direct intensity, modelled IT energy)")
    else:
        counterfactual_kg = float("nan")
        counterfactual_gap_share = 0.0
        counterfactual_basis = "not available: the stored plans have no baseline placements"
    n_all = len(docs) + len(earlier)
    if len(base_docs) < n_all:
        notes.append(f"{n_all - len(base_docs)} plan(s) without baseline placements: "
                     "avoided emissions cover the other plans only")

    # ---- green surplus: forecast absorbed vs occurred; the plan's own estimate
    site_hour = rows.groupby(["site", "hour"]).agg(
        facility_energy_kwh=("facility_energy_kwh", "sum"),
        gpu_h=("gpu_h", "sum")).reset_index()
    site_hour["surplus_kw"] = [actuals[s].frame.at[h, "surplus_kw"]
                               for s, h in zip(site_hour["site"], site_hour["hour"], strict=True)]
    site_hour["ci"] = [actuals[s].frame.at[h, "ci"]
                       for s, h in zip(site_hour["site"], site_hour["hour"], strict=True)]
    absorbed_actual = np.minimum(site_hour["surplus_kw"], site_hour["facility_energy_kwh"])
    plan_rule_actual_kg = float(((site_hour["facility_energy_kwh"] - absorbed_actual)
                                 * site_hour["ci"]).sum() / 1000.0)
    plan_estimate_kg = _plan_estimate_kg(plan_iv, t0, t1)
    fc_absorbed, fc_occurred = _surplus_forecast(store, docs + earlier, plan_iv, rows, actuals,
                                                 cat, t0, t1, notes, force)

    # ---- frames
    frames = _frames(rows, cat, cfg, zones, actuals, use15, useh, fc_absorbed, fc_occurred,
                     per_gpu_h, site_hour)
    loc_total = float(rows["location_based_kg"].sum())
    # avoided emissions compare the same plans on both sides
    base_ids = {d["plan_id"] for d in base_docs}
    loc_with_baseline = float(rows.loc[rows["plan_id"].isin(base_ids),
                                       "location_based_kg"].sum())
    energy = float(rows["facility_energy_kwh"].sum())
    gap_kwh = float(rows.loc[rows["gap"], "facility_energy_kwh"].sum())
    if gap_kwh > 0:
        notes.append(f"{100 * gap_kwh / energy:.2f} % of the facility energy "
                     f"({gap_kwh:.1f} kWh) fell in hours without an actual grid intensity: "
                     "a gap, excluded from the location-based total (not counted as zero)")
    # the life-cycle figure (shown beside Scope 2) exists only where the source gives one; the
    # gap hours (no actual data at all) are the gap note's
    used = (rows["facility_energy_kwh"] > 0).to_numpy()
    no_lca = rows["ci_lca"].isna().to_numpy() & used & ~rows["gap"].to_numpy(dtype=bool)
    lca_gap_kwh = float(rows.loc[no_lca, "facility_energy_kwh"].sum())
    if lca_gap_kwh > 0:
        none_at = sorted(rows.loc[no_lca, "site"].unique())
        whole = not (used & rows["ci_lca"].notna().to_numpy()).any()
        notes.append(f"{100 * lca_gap_kwh / energy:.2f} % of the facility energy "
                     f"({lca_gap_kwh:.1f} kWh) has no life-cycle grid intensity (its source "
                     f"gives none: {', '.join(none_at)}): "
                     + ("the life-cycle total is not given (n/a)" if whole else
                        "the life-cycle total covers the rest only (a lower bound)"))
    fb15 = rows["unmatched_basis_2015"].astype(str).str.startswith("location factor")
    if fb15.any():
        sites_fb = sorted(rows.loc[fb15, "site"].unique())
        notes.append(f"no residual mix configured for {', '.join(sites_fb)}: their uncovered "
                     "energy uses the location factor (flagged in the sites sheet)")
    for k, v in counts.items():
        if v:
            notes.append({"no_workload_record": f"{v} placement(s) without a workload record in "
                          "their plan: tenant 'unknown', IT power from the GPU type's "
                          "datasheet figure",
                          "no_inference_power": f"{v} inference row(s) without a recorded IT "
                          "power: the GPU type's datasheet figure is used"}[k])
    no_surplus = {s: a.surplus_unknown for s, a in actuals.items() if a.surplus_unknown}
    if no_surplus:
        notes.append("actual green surplus unknown, counted as none (the surplus that occurred "
                     "and the plans' actual-signal figure are lower bounds there): "
                     + "; ".join(f"{s} {why}" for s, why in sorted(no_surplus.items())))
    read_from, read_to = (t0 - pd.Timedelta(days=HISTORY_DAYS)).date(), (t1 - HOUR).date()
    for sid, a in sorted(actuals.items()):
        if a.reader_notes:
            notes.append(f"actual signals of {sid} ({a.meta.get('source', '?')}, read "
                         f"{read_from} .. {read_to}: the "
                         f"period and the {HISTORY_DAYS} days before it, the green-surplus "
                         "reference): " + "; ".join(a.reader_notes[:5])
                         + (f"; and {len(a.reader_notes) - 5} more" if len(a.reader_notes) > 5
                            else ""))
    pue_floor = {s: a.pue_floor_hours for s, a in actuals.items() if a.pue_floor_hours}
    if pue_floor:
        notes.append("hours without actual weather, PUE at the model's free-cooling floor: "
                     + ", ".join(f"{s} {n} h" for s, n in sorted(pue_floor.items())))
    # resumed pieces of preemptible jobs restore a checkpoint first: energy the work needs only
    # because it was paused (planned overhead minutes x gpus x IT power per GPU)
    resumed = plan_iv[plan_iv["overhead_minutes"] > 0]
    overhead_kwh = float((resumed["gpus"] * resumed["power_per_gpu_kw"]
                          * resumed["overhead_minutes"] / 60.0).sum())
    if len(resumed):
        notes.append(f"{len(resumed)} resumed piece(s) of preemptible jobs spent "
                     f"{overhead_kwh:.1f} kWh of IT energy restoring checkpoints (the plans' "
                     "overhead minutes x GPUs x IT power per GPU); included in the totals")
    cfe = float(rows["cfe_matched_kwh"].sum())
    totals = {
        "checkpoint_overhead_it_kwh": overhead_kwh,
        "it_energy_kwh": float(rows["it_energy_kwh"].sum()),
        "facility_energy_kwh": energy,
        "location_based_kg": loc_total,
        "lifecycle_kg": float(rows.loc[used, "lifecycle_kg"].sum(min_count=1)),
        "lifecycle_gap_share": lca_gap_kwh / energy if energy else 0.0,
        "market_based_kg": float(rows["market_based_kg"].sum()),
        "market_based_hourly_kg": float(rows["market_based_hourly_kg"].sum()),
        "cfe_hourly_share": cfe / energy if energy else 0.0,
        "embodied_kg": float(rows["embodied_kg"].sum()),
        "gpu_h": float(rows["gpu_h"].sum()),
        "location_gap_energy_kwh": gap_kwh,
        "location_gap_share": gap_kwh / energy if energy else 0.0,
        "counterfactual_location_based_kg": counterfactual_kg,
        "counterfactual_gap_share": counterfactual_gap_share,
        "avoided_kg": counterfactual_kg - loc_with_baseline,
        "surplus_absorbed_mwh": fc_absorbed["absorbed_kwh"].sum() / 1000.0
        if len(fc_absorbed) else float("nan"),
        "surplus_absorbed_occurred_mwh": fc_occurred / 1000.0,
        "plan_estimate_kg": plan_estimate_kg,
        "plan_rule_actual_kg": plan_rule_actual_kg,
        "plan_estimate_error_kg": plan_estimate_kg - plan_rule_actual_kg,
        "plan_estimate_error_pct": (100 * (plan_estimate_kg - plan_rule_actual_kg)
                                    / plan_rule_actual_kg if plan_rule_actual_kg else np.nan),
    }
    market_note = no_instrument_note(cfg, totals)
    if market_note:
        # first, after a replayed report's REPLAYED warning (which must lead)
        notes.insert(sum(1 for n in notes[:1] if str(n).startswith("REPLAYED")), market_note)
    est_kwh = float(rows.loc[rows["estimated"], "facility_energy_kwh"].sum())
    meta = {
        "title": "carbonsched sustainability report",
        "period": {"from": t0.isoformat(), "to": t1.isoformat(), "to_exclusive": True},
        "catalog": cat.name,
        "plans": [d["plan_id"] for d in docs],
        "days_with_plans": len(docs),
        "units": UNITS,
        "rules": {
            "location_based": "GHG Protocol Scope 2 Guidance (2015): facility energy x the "
                              "hour's actual direct grid intensity; life-cycle shown beside",
            "market_based_kg": RULE_2015,
            "market_based_hourly_kg": RULE_HOURLY,
            "cfe_hourly_share": "consumption matched hour by hour by zero-emission instruments "
                                "/ consumption",
            "sci_g_per_unit": f"ISO/IEC 21031:2024 SCI = (E x I + M) / R, R = one "
                              f"{FUNCTIONAL_UNIT}, I = actual direct grid intensity, M = "
                              f"embodied per GPU amortised over {emb.lifetime_years:g} years",
            "avoided_kg": "counterfactual location-based minus the inventory's; shown "
                          "separately, never subtracted from the inventory",
            "surplus_absorbed_mwh": "min(forecast green surplus, planned facility energy) per "
                                    "site-hour; occurred: the part the actual surplus covered",
            "plan_estimate_error": "the plans' own forecast emissions (net of absorbed surplus) "
                                   "of the work counted, each row's pro rata to its planned "
                                   "hours inside the period, "
                                   "minus the same quantity on the actual signals",
        },
        "provenance": {
            "software": f"carbonsched {_software_version()}",
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "signals": {s: {"source": a.meta.get("source"), "zone": zones[s],
                            "signal_quality": str(a.meta.get("signal_quality")),
                            "files": [str(f) for f in a.meta.get("files", [])]}
                        for s, a in actuals.items()},
            "hours": {"planned_share": float((rows["hours_basis"] == "planned").mean()),
                      "actual_share": float((rows["hours_basis"] == "actual").mean())},
            "it_energy": {"modelled_share": float(
                rows.loc[rows["it_energy_basis"] == "modelled", "it_energy_kwh"].sum()
                / max(rows["it_energy_kwh"].sum(), 1e-12)),
                "zero_counter_hours": zero_counter_hours,
                "telemetry_rows_unused": telemetry_unused},
            "pue": "modelled from the actual weather through each site's PUE model "
                   "(carbonsched.forecasts.pue); free-cooling floor where weather is missing",
            "grid_intensity_estimated_energy_share": est_kwh / energy if energy else 0.0,
            "embodied": {g: {"g_per_gpu_h": v[0], "source": v[1]} for g, v in per_gpu_h.items()}
            | {"lifetime_years": emb.lifetime_years, "lifetime_source": emb.lifetime_source},
            "instruments_file": cfg.path or None,
            "counterfactual": counterfactual_basis,
        },
        "notes": notes,
        "market_based_note": market_note,
    }
    if replay is not None:
        meta["replay"] = {"shift_days": replay.shift_days, "source_dates": sorted(
            {d["replay"]["source_date"] for d in docs + earlier})}
    flex = flexibility_section(earlier + docs, t0, t1, force.hour)
    if flex is not None:   # the section exists only when a plan committed a grid event
        flex_frames, flex_totals, flex_notes = flex
        frames.update(flex_frames)
        totals.update(flex_totals)
        meta["rules"]["flexibility"] = FLEX_RULE
        notes.extend(flex_notes)
    fair = fairness_section(force.newest_of_each_date(docs))
    if fair is not None:   # the section exists only when a plan was planned with tenants
        fair_frames, fair_totals, fair_notes = fair
        frames.update(fair_frames)
        totals.update(fair_totals)
        meta["rules"]["fair_shares"] = FAIR_RULE
        notes.extend(fair_notes)
    return Report(frames, totals, meta)


def no_instrument_note(cfg: MarketConfig, totals: dict[str, float]) -> str | None:
    """The sentence a report carries when no contractual instrument is configured.

    Without instruments every kWh is uncovered: the market-based totals price it at each site's
    residual mix, or at the location factor where none is set (then both market-based totals
    equal the location-based one), and the hourly carbon-free-energy score is 0, since only
    energy matched hour by hour by zero-emission instruments counts as carbon-free (GHG Protocol
    Scope 2 Guidance 2015, ch. 6; Scope 2 consultation draft, October 2025). ``None`` when the
    configuration has an instrument.
    """
    if cfg.instruments:
        return None
    loc = totals["location_based_kg"]
    same = all(math.isclose(totals[k], loc, rel_tol=1e-9, abs_tol=1e-9)
               for k in ("market_based_kg", "market_based_hourly_kg"))
    cfe = ("the hourly carbon-free-energy score is 0 because only energy matched hour by hour "
           "by zero-emission instruments counts as carbon-free, and there are none")
    how = ("add contracts with --instruments FILE (format in docs/report.md, example in "
           "examples/instruments.toml)")
    where = "no --instruments file" if not cfg.path else f"{cfg.path} lists no [[instruments]]"
    if same:
        return (f"No contractual instrument is configured ({where}): market-based equals "
                f"location-based ({loc:,.1f} kg CO2e) because all the energy is uncovered and, "
                f"without a residual mix, priced at the location factor; {cfe}; {how}.")
    return (f"No contractual instrument is configured ({where}): the market-based totals price "
            "all the energy at each site's residual mix (the location factor where none is "
            f"set); {cfe}; {how}.")


def _replay_of(docs: list[dict[str, Any]]) -> ReplayShift | None:
    """The one shift of the period's replayed plans (``None``: no plan is replayed).

    Raises
    ------
    InputError
        The period mixes replayed plans with others, or replays by different shifts: one set
        of actual signals cannot score them all.
    """
    shifts = {(d.get("replay") or {}).get("shift_days") for d in docs}
    if shifts == {None}:
        return None
    if len(shifts) > 1:
        def name(d: dict[str, Any]) -> str:
            r = d.get("replay")
            return (f"{d['date']} (replaying {r['source_date']})" if r else
                    f"{d['date']} (not replayed)")

        raise InputError(
            "the period mixes plans that replay past signals with different shifts or with "
            f"plans that do not ({', '.join(sorted({name(d) for d in docs}))}): each is scored "
            "on its own day's actual signals; report them apart with --from/--to")
    first = next(d["replay"] for d in docs)
    return ReplayShift(day_start_utc(first["source_date"]), day_start_utc(first["target_date"]))


def _replay_note(docs: list[dict[str, Any]], replay: ReplayShift) -> str:
    """The report's sentence that states the replay (:mod:`carbonsched.pipeline.replayed`)."""
    sources = sorted({d["replay"]["source_date"] for d in docs})
    targets = sorted({d["replay"]["target_date"] for d in docs})
    src = sources[0] if len(sources) == 1 else f"{sources[0]}..{sources[-1]}"
    tgt = targets[0] if len(targets) == 1 else f"{targets[0]}..{targets[-1]}"
    return (f"REPLAYED: the {len(docs)} plan(s) of this report were made on the real signals of "
            f"{src}, moved {replay.shift_days} days forward onto {tgt}; the actual grid "
            "intensity, weather (PUE) and green surplus that score them are those days' actuals "
            f"moved the same way: the emissions are what this work emits on the grid of {src}, "
            f"not on the grid of {tgt}")


def _check_sites(docs: list[dict[str, Any]], catalog: Catalog) -> None:
    """Refuse plans that name a site the catalog no longer has (e.g. edited after planning)."""
    known = {s.id for s in catalog.sites}
    for d in docs:
        for part in (d, d.get("baseline") or {}):
            for p in part.get("placements", []) + part.get("inference", []):
                if p["site"] not in known:
                    raise UnknownSiteError(
                        f"plan {d['plan_id'][:12]} of {d['date']} places work at site "
                        f"{p['site']!r}, which catalog {catalog.name!r} does not define; report "
                        "with the catalog the plan was made with (--catalog PATH)")


def _surplus_forecast(store: Any, docs: list[dict[str, Any]], plan_iv: pd.DataFrame,
                      rows: pd.DataFrame, actuals: dict[str, _SiteActual], cat: Catalog,
                      t0: pd.Timestamp, t1: pd.Timestamp, notes: list[str],
                      force: PlansInForce) -> tuple[pd.DataFrame, float]:
    """Forecast green surplus absorbed per site-hour by the *planned* work, and what occurred.

    A site-hour's planned facility energy sums the counted rows of every plan (each row's IT
    energy times its own plan's PUE forecast); its forecast surplus is the plan in force's
    (else a contributing plan's); absorbed = min(surplus, facility energy), once per
    site-hour. [kWh]
    """
    max_kw = {s.id: s.green_surplus_max_kw for s in cat.sites}
    planned = plan_iv.assign(start=plan_iv["planned_start"], end=plan_iv["planned_end"])
    prow = _expand(planned, t0, t1)
    prow["it_kwh"] = prow["gpus"] * prow["power_per_gpu_kw"] * prow["hour_fraction"]
    fac_parts = []
    surplus: dict[str, pd.Series] = {}   # plan id -> forecast surplus per (site, ts) [kW]
    missing = 0
    for d in docs:
        mine = prow[prow["plan_id"] == d["plan_id"]]
        if mine.empty:    # none of its work is counted in the period (replaced, or outside)
            continue
        fc = stored_forecasts(store, d["plan_id"]) if store is not None else pd.DataFrame()
        if fc.empty:
            missing += 1
            continue
        fc = fc[fc["signal"].isin(["green_surplus_index", "pue"])]
        fc = fc.assign(ts=pd.to_datetime(fc["ts"], utc=True)).pivot_table(
            index=["site", "ts"], columns="signal", values="mean")
        surplus[d["plan_id"]] = fc["green_surplus_index"] * fc.index.get_level_values(
            "site").map(max_kw).to_numpy(float)
        g = mine.groupby(["site", "hour"])["it_kwh"].sum()
        pue = fc["pue"].reindex(pd.MultiIndex.from_tuples(list(g.index), names=["site", "ts"]))
        fac_parts.append(pd.DataFrame({"site": g.index.get_level_values(0),
                                       "hour": g.index.get_level_values(1),
                                       "plan_id": d["plan_id"],
                                       "fac_kwh": g.to_numpy() * pue.to_numpy()}))
    if missing:
        notes.append(f"{missing} plan(s) without stored forecasts: their forecast surplus "
                     "absorption is not in the report")
    if not fac_parts:
        return pd.DataFrame(columns=["site", "hour", "absorbed_kwh", "occurred_kwh"]), np.nan
    fac = pd.concat(fac_parts, ignore_index=True)
    out = fac.groupby(["site", "hour"], as_index=False).agg(
        fac_kwh=("fac_kwh", "sum"), plan_id=("plan_id", "first"))

    def forecast_surplus_kw(site: str, hour: pd.Timestamp, contributor: str) -> float:
        for pid in (force.hour.get(hour), contributor):
            if pid in surplus:
                v = surplus[pid].get((site, hour))
                if v is not None and np.isfinite(v):
                    return float(v)
        return 0.0

    sur = np.array([forecast_surplus_kw(s, h, p) for s, h, p in
                    zip(out["site"], out["hour"], out["plan_id"], strict=True)])
    out["absorbed_kwh"] = np.minimum(sur, np.nan_to_num(out["fac_kwh"].to_numpy()))
    out = out[["site", "hour", "absorbed_kwh"]]
    act = np.array([actuals[s].frame.at[h, "surplus_kw"] if s in actuals else 0.0
                    for s, h in zip(out["site"], out["hour"], strict=True)])
    out["occurred_kwh"] = np.minimum(out["absorbed_kwh"].to_numpy(), act)
    return out, float(out["occurred_kwh"].sum())


def _frames(rows: pd.DataFrame, cat: Catalog, cfg: MarketConfig, zones: dict[str, str],
            actuals: dict[str, _SiteActual], use15: pd.DataFrame, useh: pd.DataFrame,
            fc_absorbed: pd.DataFrame, fc_occurred: float,
            per_gpu_h: dict[str, tuple[float, str]], site_hour: pd.DataFrame
            ) -> dict[str, pd.DataFrame]:
    sums = {"gpu_h": "sum", "it_energy_kwh": "sum", "facility_energy_kwh": "sum",
            "location_based_kg": "sum", "lifecycle_kg": "sum", "market_based_kg": "sum",
            "market_based_hourly_kg": "sum", "cfe_matched_kwh": "sum", "embodied_kg": "sum"}
    r = rows.assign(gap_kwh=np.where(rows["gap"], rows["facility_energy_kwh"], 0.0),
                    est_kwh=np.where(rows["estimated"], rows["facility_energy_kwh"], 0.0),
                    day=rows["hour"].dt.strftime("%Y-%m-%d"),
                    pue_x_kwh=rows["pue"] * rows["it_energy_kwh"],
                    lca_rows=(rows["ci_lca"].notna()
                              & (rows["facility_energy_kwh"] > 0)).astype(int))
    agg = {**sums, "gap_kwh": "sum", "est_kwh": "sum", "pue_x_kwh": "sum", "lca_rows": "sum"}

    def finish(df: pd.DataFrame) -> pd.DataFrame:
        # a group with no life-cycle intensity in any hour it used energy is n/a, not 0 kg
        df["lifecycle_kg"] = df["lifecycle_kg"].where(df.pop("lca_rows") > 0)
        df["location_gap_share"] = np.where(df["facility_energy_kwh"] > 0,
                                            df.pop("gap_kwh") / df["facility_energy_kwh"], 0.0)
        df["grid_estimated_share"] = np.where(df["facility_energy_kwh"] > 0,
                                              df.pop("est_kwh") / df["facility_energy_kwh"], 0.0)
        df["pue_mean_ratio"] = df.pop("pue_x_kwh") / df["it_energy_kwh"]
        df["cfe_hourly_share"] = df["cfe_matched_kwh"] / df["facility_energy_kwh"]
        return df

    def every(s: pd.Series) -> str:
        # a job's pieces, or an area's inference, may run at several sites or on several types
        return ", ".join(dict.fromkeys(s))

    g = r.groupby(["plan_id", "job_id"], sort=False)
    jobs = g.agg(date=("date", "first"), tenant=("tenant", "first"), kind=("kind", "first"),
                 site=("site", every), gpu_type=("gpu_type", every), gpus=("gpus", "max"),
                 start=("start", "min"), end=("end", "max"), pieces=("piece", "nunique"),
                 hours_basis=("hours_basis", "first"),
                 it_energy_basis=("it_energy_basis",
                                  lambda s: s.iloc[0] if s.nunique() == 1 else "mixed"),
                 **{k: (k, v) for k, v in agg.items()}).reset_index()
    jobs = finish(jobs)
    m_g = jobs["embodied_kg"] * 1000.0
    jobs["sci_g_per_unit"] = (jobs["location_based_kg"] * 1000.0 + m_g) / jobs["gpu_h"]
    jobs.loc[jobs["location_gap_share"] > 0, "sci_g_per_unit"] = np.nan
    jobs["embodied_source"] = jobs["gpu_type"].map(
        lambda ts: "; ".join(dict.fromkeys(per_gpu_h[t][1] for t in ts.split(", "))))
    jobs["start"] = jobs["start"].map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
    jobs["end"] = jobs["end"].map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
    cols = ["job_id", "plan_id", "date", "tenant", "kind", "site", "gpu_type", "gpus", "start",
            "end", "pieces", "hours_basis", "gpu_h", "it_energy_kwh", "it_energy_basis",
            "pue_mean_ratio", "facility_energy_kwh", "location_based_kg", "lifecycle_kg",
            "market_based_kg", "market_based_hourly_kg", "cfe_matched_kwh", "cfe_hourly_share",
            "location_gap_share", "grid_estimated_share", "embodied_kg", "sci_g_per_unit",
            "embodied_source"]
    jobs = jobs[cols]

    sites = finish(r.groupby("site").agg(**{k: (k, v) for k, v in agg.items()}).reset_index())
    sites.insert(1, "zone", sites["site"].map(zones))
    sites.insert(2, "market", sites["site"].map(lambda s: cfg.site(s, zones[s]).market))
    sites["residual_mix_g_per_kwh"] = sites["site"].map(
        lambda s: cfg.site(s, zones[s]).residual_mix_g_per_kwh)
    sites["residual_mix_source"] = sites["site"].map(
        lambda s: cfg.site(s, zones[s]).residual_mix_source)

    def _basis(col: str) -> pd.Series:
        return r.groupby("site")[col].agg(
            lambda s: "; ".join(sorted({x for x in s.astype(str) if x != "covered"})) or
            "covered")

    sites["unmatched_basis_2015"] = sites["site"].map(_basis("unmatched_basis_2015"))
    sites["unmatched_basis_hourly"] = sites["site"].map(_basis("unmatched_basis_hourly"))
    sites["location_factor_flag"] = sites["unmatched_basis_2015"].str.contains(
        "location factor") | sites["unmatched_basis_hourly"].str.contains("location factor")
    if len(fc_absorbed):
        fs = fc_absorbed.groupby("site")[["absorbed_kwh", "occurred_kwh"]].sum() / 1000.0
        sites["surplus_absorbed_mwh"] = sites["site"].map(fs["absorbed_kwh"]).fillna(0.0)
        sites["surplus_absorbed_occurred_mwh"] = sites["site"].map(
            fs["occurred_kwh"]).fillna(0.0)
    else:
        sites["surplus_absorbed_mwh"] = np.nan
        sites["surplus_absorbed_occurred_mwh"] = np.nan
    sites["signal_source"] = sites["site"].map(lambda s: actuals[s].meta.get("source"))
    sites["pue_source"] = "modelled: actual weather x site PUE model"

    tenants = finish(r.groupby("tenant").agg(**{k: (k, v) for k, v in agg.items()})
                     .reset_index())
    days = finish(r.groupby("day").agg(**{k: (k, v) for k, v in agg.items()}).reset_index())

    # hourly intensity of every site used, with the GPU-hours placed there (the chart's data)
    sh = []
    for sid, a in actuals.items():
        f = a.frame
        placed = site_hour[site_hour["site"] == sid].set_index("hour")["gpu_h"]
        sh.append(pd.DataFrame({
            "site": sid, "hour": f.index.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "ci_direct_g_per_kwh": f["ci"].to_numpy(),
            "ci_lifecycle_g_per_kwh": f["ci_lca"].to_numpy(),
            "ci_estimated": f["estimated"].to_numpy(),
            "gpu_h": placed.reindex(f.index).fillna(0.0).to_numpy()}))
    site_hours = pd.concat(sh, ignore_index=True)
    instruments = pd.concat([use15.assign(method="market_based_kg (2015)"),
                             useh.assign(method="market_based_hourly_kg (hourly)")],
                            ignore_index=True)
    instruments = instruments.rename(columns={"rule": "rule_applied"})
    return {"jobs": jobs, "sites": sites, "tenants": tenants, "days": days,
            "site_hours": site_hours, "instruments": instruments}
