"""Replay a user's own workload with the rolling horizon and carry-over (``replay --jobs``).

Each job arrives at its ``earliest_start``, runs ``duration`` and may wait until its
``deadline`` (its waiting limit). Runs are issued every ``run_every_hours`` from 00:00 UTC of
the first arrival's day; each run learns of the jobs arriving before the next run (work is
submitted ahead, as the daily plan knows its day's jobs at its issue time,
:func:`carbonsched.plan.rolling.known_by`) and plans them over ``horizon_hours``
(:class:`carbonsched.plan.rolling.RollingPlanner`). Policies:

* ``agnostic`` — each job starts on arrival, at its first allowed site (first-fit when the GPUs
  are taken: :func:`carbonsched.plan.agnostic_plan` over the whole period);
* ``milp`` — the rolling planner on forecasts issued at each run
  (:func:`carbonsched.pipeline.daily.forecast_site`, intervals widening with lead);
* ``oracle`` — the same rolling planner on the *actual* signals, its horizon stretched at each
  run to the latest deadline of the work it knows, so that it sees every job's whole waiting
  window: a true bound for ``milp`` under the same information about arrivals;
* ``best-fixed`` — each job at the start (and allowed site) of least actual emissions in its
  window, ignoring capacity: the ideal for non-preemptive jobs when capacity is ample.

Every plan is scored as :mod:`carbonsched.evaluate.replay` scores a day: emissions on the actual
signals (:func:`carbonsched.plan.score_plan`, which recounts violations from the placements
alone), the IT energy of the work done, and unplaced work priced at the dirtiest site-hour of its
own window (:func:`carbonsched.evaluate.replay.dirtiest_kg_per_kwh`), so leaving work out never
looks like a saving. Fallbacks are named: hours of actual signal interpolated for scoring,
forecast fallbacks per run and site, runs whose solve stopped at its time limit, runs that fell
back to the greedy plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import Catalog, load_catalog
from carbonsched.domain import Job, SignalQuality, Workload
from carbonsched.errors import ForecastError, InputError, WorkloadError
from carbonsched.evaluate.replay import (
    actual_signals,
    forecast_error_summary,
    stack_site_frames,
    substitution_notes,
    tally_forecast_error,
    work_split_kwh,
)
from carbonsched.evaluate.site_backtest import EXOGENOUS_MODES, site_exogenous
from carbonsched.forecasts.exogenous import DAY_AHEAD_AUCTIONS
from carbonsched.pipeline.daily import (
    FORECAST_HISTORY_DAYS,
    MAX_HORIZON_HOURS,
    forecast_site,
    prune_model_cache,
)
from carbonsched.plan import PlanningProblem, PlanResult, PlanStatus, SolverRecord, score_plan
from carbonsched.plan.baselines import agnostic_plan
from carbonsched.plan.result import build_plan_result
from carbonsched.plan.rolling import (
    DEFAULT_HORIZON_HOURS,
    DEFAULT_RUN_EVERY_HOURS,
    RollingPlanner,
    known_by,
    latest_start,
    milp_planner,
    run_times,
)
from carbonsched.plan.sets import compile_sets, option_costs
from carbonsched.timeaxis import HOUR, check_run_every_hours, hourly_slots

JOB_POLICIES = ("agnostic", "milp", "oracle", "best-fixed")
MAX_ORACLE_HORIZON_HOURS = 24 * 31
"""Longest horizon the oracle stretches to (a month). [h]"""


def _quiet(_: str) -> None:
    return None


def read_jobs(path: str | Path) -> Workload:
    """A workload from a jobs file, or from every ``.json``/``.csv`` file of a folder.

    Raises
    ------
    WorkloadError
        A missing path, a folder without jobs files, a malformed file (the message names it),
        or one job id in two files.
    """
    from carbonsched.workload.files import read_workload

    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in (".json", ".csv"))
        if not files:
            raise WorkloadError(f"{p}: no .json or .csv jobs file in the folder; give a jobs "
                                "file or a folder of them (docs/workload.md)")
    elif p.exists():
        files = [p]
    else:
        raise WorkloadError(f"{p}: no such jobs file or folder")
    jobs: list[Job] = []
    inference = []
    seen: dict[str, Path] = {}
    for f in files:
        wl = read_workload(f)
        for j in wl.jobs:
            if j.id in seen:
                raise WorkloadError(f"{f}: job id {j.id!r} is also in {seen[j.id]}; give every "
                                    "job a unique id across the folder")
            seen[j.id] = f
        jobs.extend(wl.jobs)
        inference.extend(wl.inference)
    return Workload(jobs=jobs, inference=inference)


def best_fixed_plan(problem: PlanningProblem, signals: pd.DataFrame) -> PlanResult:
    """Each job at its start and allowed site of least emissions on ``signals``.

    Capacity is ignored (a bound when capacity is ample); status ``heuristic``.
    """
    t0 = time.perf_counter()
    sets = compile_sets(problem, signals)
    opts = sets.options
    chosen = np.zeros((0, 3), dtype=np.int64)
    if len(opts):
        cost = option_costs(sets, opts)
        order = np.lexsort((opts[:, 2], cost, opts[:, 0]))   # by job, then cost, then start
        o = opts[order]
        first = np.concatenate([[True], o[1:, 0] != o[:-1, 0]])
        chosen = o[first]
    rec = SolverRecord("best-fixed", PlanStatus.HEURISTIC, seconds=time.perf_counter() - t0,
                       method="best-fixed", note="capacity ignored")
    inf = np.zeros((len(problem.inference), len(problem.sites)), dtype=np.int64)
    return build_plan_result(sets, chosen, inf, PlanStatus.HEURISTIC, rec)


def _window_dirtiest(job: Job, rate: pd.Series) -> float:
    """Dirtiest site-hour of a job's window: max PUE × CI / 1000. [kg CO2e/kWh IT]"""
    slot = rate.index.get_level_values(1)
    inside = rate[(slot >= job.earliest_start.floor("h")) & (slot < job.deadline)]
    return float(inside.max()) if len(inside) else float(rate.max())


def run_jobs_replay(
    jobs: str | Path | Workload,
    catalog: str | Path | Catalog = "global",
    data_dir: Path | None = None,
    policies: tuple[str, ...] = JOB_POLICIES,
    horizon_hours: int = DEFAULT_HORIZON_HOURS,
    run_every_hours: int = DEFAULT_RUN_EVERY_HOURS,
    time_limit_s: float = 30.0,
    mip_gap: float = 0.001,
    progress: Callable[[str], None] = _quiet,
    advance: Callable[[int, int], None] | None = None,
    exogenous: str = "none",
) -> dict[str, Any]:
    """Replay a workload run by run with the rolling horizon; score each policy on actuals.

    Parameters
    ----------
    jobs
        A jobs file or folder (:func:`read_jobs`), or a :class:`~carbonsched.domain.Workload`.
    catalog
        Catalog with measured signals (name, path or object).
    data_dir
        Folder of the real public data; ``None`` uses the settings.
    policies
        Subset of :data:`JOB_POLICIES`.
    horizon_hours, run_every_hours
        Rolling horizon ``H`` and run interval, one of the service's cadences (1, 2, 3, 4, 6,
        8, 12 or 24, :func:`carbonsched.timeaxis.check_run_every_hours`). [h]
    time_limit_s, mip_gap
        Solver limits per run. [s], [-]
    progress
        Callable receiving status lines.
    advance
        ``advance(runs_done, runs_total)`` after every run (a progress bar's feed).
    exogenous
        Exogenous forecasts ``milp``'s forecasts read, one of
        :data:`carbonsched.evaluate.site_backtest.EXOGENOUS_MODES` (as the site backtest's
        ``--exogenous``; each run reads only the values published by its issue time); the
        sources reach ``exogenous`` in the result and the notes.

    Returns
    -------
    dict
        ``policies`` {name: emissions_kg, reduction_pct, oracle_share, work_it_mwh (IT
        energy of the jobs placed and the inference served,
        :func:`carbonsched.evaluate.replay.work_split_kwh`),
        unplaced_it_mwh, unplaced_priced_kg, emissions_with_unplaced_kg,
        reduction_with_unplaced_pct, deadline_misses, capacity_violations, slo_violations
        (inference demand not served within its SLO, per area-hour), jobs_placed,
        unplaced_reasons, jobs_split, pieces, overhead_kwh (checkpoint overhead of resumed
        pieces, facility energy, included in the emissions), fallback_runs, time_limited_runs,
        fallback_run_times and time_limited_run_times (the issue times of those runs, ISO
        8601), seconds, longest_run_s (the longest single run, planning included: the
        time limit kept or not) [s]}, ``runs`` (per run: issue time, and per rolling policy
        committed / deferred / ended counts, status and seconds),
        ``forecast_fallbacks`` (per run and site), ``filled_signal_hours`` (per site),
        ``forecast_error`` (the carbon-intensity forecast error ``milp`` acted on, per site:
        ``committed`` over each run's hours before the next run, ``horizon`` over all its
        leads; :func:`carbonsched.evaluate.replay.forecast_error_summary`),
        ``exogenous`` (``mode`` and, per site given any, ``sources``), ``notes``.

    Raises
    ------
    InputError
        Unknown policy, a run interval that does not divide a day, a horizon outside
        ``run_every_hours .. MAX_HORIZON_HOURS``, an empty
        workload, a catalog with modelled signals, a job naming a site the catalog lacks, an
        ``exogenous`` mode not in :data:`~carbonsched.evaluate.site_backtest.EXOGENOUS_MODES`.
    WorkloadError
        A malformed jobs file.
    """
    from carbonsched.config import get_settings
    from carbonsched.pipeline.daily import check_workload_fits_catalog

    unknown = [p for p in policies if p not in JOB_POLICIES]
    if unknown:
        raise InputError(f"unknown policies {unknown}; with --jobs choose from "
                         f"{', '.join(JOB_POLICIES)}")
    if not 1 <= horizon_hours <= MAX_HORIZON_HOURS:
        raise InputError(f"horizon of {horizon_hours} h is outside 1..{MAX_HORIZON_HOURS} h; "
                         "e.g. --horizon-hours 72")
    if exogenous not in EXOGENOUS_MODES:
        raise InputError(f"--exogenous must be one of {', '.join(EXOGENOUS_MODES)}, got "
                         f"{exogenous!r}")
    # the cadences the service runs (CARBONSCHED_ROLLING_RUN_EVERY_HOURS): a divisor of a day
    run_every_hours = check_run_every_hours(run_every_hours, "--every")
    wl = jobs if isinstance(jobs, Workload) else read_jobs(jobs)
    if not wl.jobs:
        raise InputError("the workload has no jobs; nothing to replay")
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    check_workload_fits_catalog(wl, cat)
    ddir = data_dir if data_dir is not None else get_settings().data_dir
    if all(j.allowed_sites for j in wl.jobs) and not wl.inference:
        # only the sites some job may use can change a plan: the others are not read
        used = {s for j in wl.jobs for s in j.allowed_sites}
        cat = replace(cat, sites=[s for s in cat.sites if s.id in used])
    all_jobs = sorted(wl.jobs, key=lambda j: (j.earliest_start, j.id))
    first = min(j.earliest_start for j in all_jobs).floor("D")
    last_start = max(latest_start(j) for j in all_jobs)
    end = max(j.deadline for j in all_jobs).ceil("h")
    if wl.inference:
        # the runs and the scoring cover every hour of inference demand too
        last_hour = max(d.hour for d in wl.inference)
        last_start = max(last_start, last_hour)
        end = max(end, last_hour + HOUR)
    times = run_times(first, max(last_start, first), run_every_hours)
    oracle_reach = min(MAX_ORACLE_HORIZON_HOURS,
                       int(np.ceil((end - first) / HOUR)) + run_every_hours)
    load_end = max(end, times[-1] + max(horizon_hours, oracle_reach) * HOUR) + pd.Timedelta(
        days=1)
    frames: dict[str, pd.DataFrame] = {}
    metas: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for s in cat.sites:
        frames[s.id], metas[s.id] = load_site_signals(
            s, ddir, first - pd.Timedelta(days=FORECAST_HISTORY_DAYS), load_end)
        if metas[s.id].get("signal_quality") == SignalQuality.MODELLED:
            raise InputError(f"catalog {cat.name} has modelled signals (site {s.id}); a replay "
                             "scores plans on actual measurements — use a measured catalog")
        notes.extend(f"site {s.id}: {n}" for n in metas[s.id].get("notes", []))
    # the actual signals of the whole scoring period, and as far as the oracle looks
    full_slots = hourly_slots(first, int(np.ceil((load_end - first) / HOUR)))
    actual: dict[str, pd.DataFrame] = {}
    filled: dict[str, int] = {}
    for s in cat.sites:
        hist = frames[s.id][frames[s.id].index < first]
        try:
            act = actual_signals(s, frames[s.id], full_slots,
                                 hist["renewable_pct"] if "renewable_pct" in hist else None)
        except InputError as exc:
            notes.append(f"site {s.id} left out: {exc}")
            continue
        actual[s.id] = act
        score_slots = full_slots[full_slots < end]
        filled[s.id] = int(frames[s.id]["carbon_intensity_g_per_kwh"].reindex(score_slots)
                           .isna().sum())
        if filled[s.id]:
            notes.append(f"site {s.id}: {filled[s.id]} hour(s) of actual carbon intensity "
                         "missing in the scoring period, interpolated for scoring")
        notes += substitution_notes(act, f"site {s.id}", "the period")
    if not actual:
        raise InputError("no site has actual signals for the workload's period; nothing can "
                         "be replayed")
    sites = [s for s in cat.sites if s.id in actual]
    exog = {s.id: site_exogenous(frames[s.id], exogenous, s.zone) for s in sites}
    exog_used: dict[str, str] = {}
    for sid, table in exog.items():
        if table is not None:
            exog_used[sid] = str(table.attrs.get("source"))
            caveat = table.attrs.get("caveat")
            notes.append(f"site {sid}: exogenous forecasts from {exog_used[sid]}"
                         + (f": {caveat}" if caveat else ""))
        elif exogenous != "none":
            notes.append(f"site {sid}: --exogenous {exogenous} offers this site nothing "
                         "(no weather file, or no day-ahead auction for its zone: "
                         f"{', '.join(DAY_AHEAD_AUCTIONS)} only); forecasts from history")
    actual_all = stack_site_frames(actual)
    score_slots = hourly_slots(first, int(np.ceil((end - first) / HOUR)))
    whole = PlanningProblem(sites=sites, jobs=all_jobs, inference=list(wl.inference),
                            slots=score_slots,
                            signals=actual_all[actual_all.index.get_level_values(1) < end])

    def actual_on(slots: pd.DatetimeIndex) -> pd.DataFrame:
        sl = actual_all.index.get_level_values(1)
        return actual_all[(sl >= slots[0]) & (sl <= slots[-1])]

    plans: dict[str, PlanResult] = {}
    stats: dict[str, dict[str, Any]] = {p: {"seconds": 0.0, "longest_run_s": 0.0,
                                            "fallback_runs": 0,
                                            "time_limited_runs": 0,
                                            "time_limited_run_times": [],
                                            "fallback_run_times": []} for p in policies}
    for p in ("agnostic", "best-fixed"):
        if p in policies:
            t0 = time.perf_counter()
            plans[p] = agnostic_plan(whole) if p == "agnostic" else best_fixed_plan(
                whole, whole.signals)
            stats[p]["seconds"] = stats[p]["longest_run_s"] = time.perf_counter() - t0
    rolling = [p for p in ("milp", "oracle") if p in policies]
    planners = {p: RollingPlanner(sites, milp_planner(time_limit_s, mip_gap),
                                  horizon_hours, run_every_hours) for p in rolling}
    runs: list[dict[str, Any]] = []
    fc_fallbacks: list[dict[str, Any]] = []
    fc_err: dict[str, dict[str, dict[str, Any]]] = {"committed": {}, "horizon": {}}
    models: dict[str, dict[str, Any]] = {s.id: {} for s in sites}
    for n, t in enumerate(times):
        nxt = t + run_every_hours * HOUR
        row: dict[str, Any] = {"issued_at": t.isoformat()}
        new = [j for j in known_by(all_jobs, nxt)]
        if "milp" in planners:
            for cache in models.values():
                prune_model_cache(cache, t)
            fcs = {}
            for s in sites:
                since = t - pd.Timedelta(days=FORECAST_HISTORY_DAYS)
                hist = frames[s.id][(frames[s.id].index < t) & (frames[s.id].index >= since)]
                try:
                    fc = forecast_site(s, hist, t, horizon_hours, metas[s.id], models=models[s.id],
                                       exogenous=exog[s.id])
                except (ForecastError, InputError) as exc:
                    fc_fallbacks.append({"issued_at": t.isoformat(), "site": s.id,
                                         "notes": [f"left out: {exc}"]})
                    continue
                if fc.notes:
                    fc_fallbacks.append({"issued_at": t.isoformat(), "site": s.id,
                                         "notes": list(fc.notes)})
                ci_fc = fc.signals["carbon_intensity_g_per_kwh"]
                ci_model = fc.models.get("carbon_intensity_g_per_kwh", {}).get("model")
                ci_act = actual_all["carbon_intensity_g_per_kwh"].xs(s.id, level=0)
                tally_forecast_error(fc_err["committed"], s.id, ci_fc[ci_fc.index < nxt],
                                     ci_act, ci_model)
                tally_forecast_error(fc_err["horizon"], s.id, ci_fc, ci_act, ci_model)
                fcs[s.id] = fc.signals[["carbon_intensity_g_per_kwh", "pue", "green_surplus_kw",
                                        "pue_hi_95"]]
            signal_for = {"milp": stack_site_frames(fcs) if fcs else None}
        else:
            signal_for = {}
        for p, rp in planners.items():
            rp.submit(new)
            if p == "milp" and signal_for["milp"] is None:
                notes.append(f"run {t.isoformat()}: milp: no site could be forecast; run skipped")
                continue
            h = horizon_hours
            if p == "oracle":
                reach = max([j.deadline for j in rp.state.pending.values()], default=nxt)
                h = int(min(MAX_ORACLE_HORIZON_HOURS,
                            max(horizon_hours, np.ceil((reach - t) / HOUR))))
            sig = signal_for["milp"] if p == "milp" else actual_on(hourly_slots(t, h))
            t0 = time.perf_counter()
            res = rp.step(t, sig, wl.inference, horizon_hours=h)
            step_s = time.perf_counter() - t0
            stats[p]["seconds"] += step_s
            stats[p]["longest_run_s"] = max(stats[p]["longest_run_s"], step_s)
            stats[p]["fallback_runs"] += int(res.fell_back)
            stats[p]["time_limited_runs"] += int(res.time_limited)
            if res.time_limited:   # named: the issue times, for the output a person reads
                stats[p]["time_limited_run_times"].append(t.isoformat())
            if res.fell_back:
                stats[p]["fallback_run_times"].append(t.isoformat())
            notes.extend(f"{p}: {x}" for x in res.notes)
            row[p] = {"committed": len(res.committed), "deferred": len(res.deferred),
                      "ended": len(res.ended), "pending": len(rp.state.pending),
                      "status": str(res.result.status), "seconds": round(step_s, 3)}
        runs.append(row)
        progress(f"{n + 1}/{len(times)} runs")
        if advance is not None:
            advance(n + 1, len(times))
    for p, rp in planners.items():
        leftover = list(rp.state.pending)
        if leftover:
            notes.append(f"{p}: {len(leftover)} job(s) still pending after the last run")
        plans[p] = rp.committed_plan()
    # --- score ------------------------------------------------------------------------------
    rate = actual_all["pue"] * actual_all["carbon_intensity_g_per_kwh"] / 1000.0
    rate = rate[rate.index.get_level_values(1) < end]
    by_id = {j.id: j for j in all_jobs}
    out_pol: dict[str, dict[str, Any]] = {}
    for p in policies:
        res = plans[p]
        sc = score_plan(whole, res, signals=whole.signals)
        placed = {pl.job_id for pl in res.placements}
        # work done: the jobs placed and the inference served, as the day-bounded replay
        # counts it (what the emissions cover), so kg per MWh compares across the two
        done, _ = work_split_kwh(whole, res)
        left = [by_id[j] for j in by_id if j not in placed]
        left_kwh = sum(j.energy_kwh for j in left)
        priced = sum(j.energy_kwh * _window_dirtiest(j, rate) for j in left)
        reasons: dict[str, int] = {}
        for u in res.unplaced:
            reasons[str(u.reason)] = reasons.get(str(u.reason), 0) + 1
        out_pol[p] = {"emissions_kg": sc.emissions_kg, "energy_mwh": sc.energy_kwh / 1000.0,
                      "work_it_mwh": done / 1000.0, "unplaced_it_mwh": left_kwh / 1000.0,
                      "unplaced_priced_kg": priced,
                      "emissions_with_unplaced_kg": sc.emissions_kg + priced,
                      "deadline_misses": int(sc.deadline_misses),
                      "capacity_violations": int(sc.capacity_violations),
                      "slo_violations": int(sc.slo_violations),
                      "power_cap_violations": int(sc.power_cap_violations),
                      "jobs_placed": len(placed), "unplaced_reasons": reasons,
                      # preemptible jobs run in pieces: how many, and their checkpoint overhead
                      "jobs_split": len({pl.job_id for pl in res.placements
                                         if getattr(pl, "pieces", 1) > 1}),
                      "pieces": len(res.placements),
                      "overhead_kwh": round(sum(getattr(pl, "overhead_kwh", 0.0)
                                                for pl in res.placements), 3),
                      **stats[p]}
    base = out_pol.get("agnostic")
    orc = out_pol.get("oracle")
    for v in out_pol.values():
        for key, suffix in (("emissions_kg", ""), ("emissions_with_unplaced_kg",
                                                    "_with_unplaced")):
            b = base[key] if base else None
            o = orc[key] if orc else None
            v[f"reduction{suffix}_pct"] = (None if not b else
                                           round(100.0 * (b - v[key]) / b, 3))
            v[f"oracle_share{suffix}"] = (None if b is None or o is None or b == o else
                                          round((b - v[key]) / (b - o), 4))
        for key in ("emissions_kg", "energy_mwh", "work_it_mwh", "unplaced_it_mwh",
                    "unplaced_priced_kg", "emissions_with_unplaced_kg", "seconds",
                    "longest_run_s"):
            v[key] = round(float(v[key]), 6 if key.endswith("_mwh") else 3)
    placements = {p: [{"job_id": pl.job_id, "site": pl.site, "start": pl.start.isoformat(),
                       "end": pl.end.isoformat()} for pl in plans[p].placements]
                  for p in policies}
    return {"catalog": cat.name, "jobs": len(all_jobs), "first_run": times[0].isoformat(),
            "last_run": times[-1].isoformat(), "runs_count": len(times),
            "horizon_hours": horizon_hours, "run_every_hours": run_every_hours,
            "time_limit_s": time_limit_s, "mip_gap": mip_gap,
            "policies": out_pol, "runs": runs, "forecast_fallbacks": fc_fallbacks,
            "forecast_error": {k: forecast_error_summary(v) for k, v in fc_err.items()},
            "filled_signal_hours": filled, "placements": placements,
            "exogenous": {"mode": exogenous, "sources": exog_used}, "notes": notes}
