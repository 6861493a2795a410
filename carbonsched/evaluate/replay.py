"""Replay a period day by day: plan on forecasts, then score every policy on the *actual* grid.

For each day D of ``[start, end]``:

1. the day's work is built from the real job traces
   (:func:`carbonsched.workload.files.workload_from_traces`, seeded
   with ``seed`` and the day's ordinal, so every policy sees the same jobs and capacities);
2. each site's carbon intensity, green surplus and PUE are forecast from data before D 00:00 UTC
   (:func:`carbonsched.pipeline.daily.forecast_site`, the same code as the daily plan);
3. the policies plan the day:

   * ``agnostic`` — each job at its earliest start at its first allowed site (carbon-unaware);
   * ``greedy`` — each job to its best forecast site and start window by the window's mean
     intensity (the Carbon Aware SDK's best-window query), then repaired to capacity;
   * ``milp`` — carbonsched's planner on the forecasts;
   * ``oracle`` — the same planner on the actual signals (perfect foresight: the bound);

4. every plan is scored with the actual hourly carbon intensity, PUE from the actual weather, and
   the actual green-surplus index (:func:`carbonsched.plan.score_plan`), which also recounts
   capacity, power-cap, SLO and deadline violations from the placements alone.

``reduction_pct`` is the reduction against ``agnostic``; ``oracle_share`` is a policy's reduction as
a share of the oracle's reduction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.config import get_settings
from carbonsched.domain import SignalQuality
from carbonsched.errors import ForecastError, InputError, require_extra
from carbonsched.evaluate.executor import map_in_order, parse_executor
from carbonsched.fileio import atomic_path
from carbonsched.forecasts.green_surplus import green_surplus_index
from carbonsched.forecasts.pue import pue_from_weather
from carbonsched.pipeline.daily import (
    FORECAST_HISTORY_DAYS,
    build_problem,
    forecast_site,
    prune_model_cache,
    surplus_reference,
)
from carbonsched.plan import PlanningProblem, agnostic_plan, greedy_plan, score_plan, solve_plan
from carbonsched.timeaxis import day_start_utc, hourly_slots

POLICIES = ("agnostic", "greedy", "milp", "oracle")
#: The oracle counts as a bound on a day only when its plan is proven within this gap. [-]
ORACLE_PROOF_GAP = 0.001
#: Highest ``target_load`` accepted (a fleet asked for 1.5× its GPU-hours is far past binding). [-]
MAX_TARGET_LOAD = 1.5
#: Days replayed when no end is given: a week from the start (a year takes hours; issue 34). [d]
DEFAULT_REPLAY_DAYS = 7
#: Label of the oracle where it is drawn or tabled: what it is, not a policy one could run.
ORACLE_LABEL = "oracle (bound, perfect foresight)"


def total_fleet_load(workload: Any, catalog: Any) -> float:
    """Share of the fleet's GPU-hours over the day that the workload asks for. [-]

    ``(Σ job gpus × duration + Σ inference gpus) / (Σ sites' GPUs × 24)`` over all GPU types
    together — the GPU-hour-weighted aggregate of :func:`carbonsched.workload.files.fleet_load`.
    """
    from carbonsched.workload.files import fleet_load

    per_type = fleet_load(workload, catalog)
    num = den = 0.0
    for t, share in per_type.items():
        cap = sum(s.gpu_count(t) for s in catalog.sites) * 24
        num += share * cap
        den += cap
    return num / den if den else 0.0


def _quiet(_: str) -> None:
    return None


def actual_signals(site: Any, frame: pd.DataFrame, slots: pd.DatetimeIndex,
                   reference: pd.Series | None = None) -> pd.DataFrame:
    """The realised signals of one site on ``slots`` (carbon intensity, PUE, green surplus).

    Missing hours of carbon intensity are filled by linear interpolation (then nearest); their
    number is in ``attrs["filled_hours"]`` so that the caller can report it, and a day without
    any actual carbon intensity is refused. A day with an hour of weather missing is scored at
    the PUE model's floor (``attrs["pue_floor_hours"]``: its hours), and a green-surplus hour
    without data as no surplus (``attrs["surplus_unknown_hours"]``, at sites that can absorb
    any), both for the caller to report. PUE comes from the actual weather through the site's
    model. ``reference`` is the renewable share the green-surplus index is scored against (the
    history the forecast used), so forecast and actual share one scale.

    Raises
    ------
    InputError
        No hour of ``slots`` has an actual carbon intensity (the day cannot be scored).
    """
    f = frame.reindex(slots)
    n_missing = int(f["carbon_intensity_g_per_kwh"].isna().sum())
    if n_missing == len(slots):
        raise InputError(f"site {site.id}: no actual carbon intensity on "
                         f"{slots[0].isoformat()} .. {slots[-1].isoformat()}; the day cannot be "
                         "scored for this site")
    ci = f["carbon_intensity_g_per_kwh"].interpolate(limit_direction="both")
    if "green_surplus_index" in f and f["green_surplus_index"].notna().any():
        gsi = f["green_surplus_index"]
    else:
        # scored against the same reference window as the forecast (the history before the
        # day), so forecast and actual index share one scale
        gsi = green_surplus_index(frame, reference=reference).reindex(slots)
    surplus_unknown = int(gsi.isna().sum()) if site.green_surplus_max_kw > 0 else 0
    gsi = gsi.fillna(0.0)
    w = f[["temperature_c", "relative_humidity_pct"]]
    if w.notna().all().all():
        pue = pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], site.pue)
        pue.index = slots
        pue_floor = 0
    else:
        pue = pd.Series(site.pue.pue_min, index=slots)
        pue_floor = len(slots)
    out = pd.DataFrame({"carbon_intensity_g_per_kwh": ci.to_numpy(float),
                        "pue": pue.to_numpy(float),
                        "green_surplus_kw": gsi.clip(0, 1).to_numpy(float)
                        * site.green_surplus_max_kw,
                        "green_surplus_index": gsi.clip(0, 1).to_numpy(float)}, index=slots)
    out.attrs["filled_hours"] = n_missing
    out.attrs["pue_floor_hours"] = pue_floor
    out.attrs["surplus_unknown_hours"] = surplus_unknown
    return out


def substitution_notes(actual: pd.DataFrame, where: str, span: str) -> list[str]:
    """The notes on what :func:`actual_signals` substituted for scoring (empty when nothing).

    ``where`` leads each note (``"2023-07-15: site gb-london"``); ``span`` names the hours
    scored (``"the day"``, ``"the period"``).
    """
    out = []
    if actual.attrs.get("pue_floor_hours"):
        out.append(f"{where}: actual weather incomplete, every hour of {span} scored at the PUE "
                   "model's floor (pue_min)")
    if actual.attrs.get("surplus_unknown_hours"):
        out.append(f"{where}: {actual.attrs['surplus_unknown_hours']} hour(s) of actual green "
                   "surplus unknown, scored as none")
    return out


def stack_site_frames(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One frame of per-site hourly frames, indexed by ``(site, slot)``."""
    out = []
    for sid, f in frames.items():
        g = f.copy()
        g.index = pd.MultiIndex.from_product([[sid], f.index], names=["site", "slot"])
        out.append(g)
    return pd.concat(out)


_COUNTS = ("deadline_misses", "slo_violations", "capacity_violations", "power_cap_violations",
           "facility_cap_violations", "gang_violations", "slice_violations", "domain_violations",
           "commitment_violations")


def _empty_totals(policies: tuple[str, ...]) -> dict[str, dict[str, float]]:
    return {p: {"emissions_kg": 0.0, "energy_kwh": 0.0, "surplus_absorbed_kwh": 0.0,
                **{k: 0 for k in _COUNTS}, "unplaced_gpu_hours": 0.0, "unplaced_jobs": 0,
                "seconds": 0.0,
                "not_optimal_days": 0, "fallback_days": 0, "work_it_kwh": 0.0,
                "unplaced_it_kwh": 0.0, "unplaced_priced_kg": 0.0} for p in policies}


def dirtiest_kg_per_kwh(signals: pd.DataFrame) -> float:
    """The dirtiest site-hour of a day: max of PUE × carbon intensity / 1000. [kg CO2e/kWh IT]

    Unplaced work is priced at this rate, so that leaving work out never looks like a saving
    (issue 13: policies compared on equal terms).
    """
    rate = signals["pue"] * signals["carbon_intensity_g_per_kwh"] / 1000.0
    return float(rate.max()) if len(rate) else 0.0


def work_split_kwh(problem: PlanningProblem, result: Any) -> tuple[float, float]:
    """IT energy of the work a plan does and of the jobs it leaves unplaced. [kWh]

    Work done is the placed jobs plus the inference served (the GPUs each inference placement
    allocates × the demand's power per GPU × 1 h), so that it covers what the plan's emissions
    cover.
    """
    placed = {pl.job_id for pl in result.placements}
    done = sum(j.energy_kwh for j in problem.jobs if j.id in placed)
    kw_per_gpu = {(d.area, d.hour, d.gpu_type): d.power_per_gpu_kw for d in problem.inference}
    done += sum(ip.gpus * kw_per_gpu.get((ip.area, ip.hour, ip.gpu_type), 0.0)
                for ip in result.inference)
    left = sum(j.energy_kwh for j in problem.jobs if j.id not in placed)
    return float(done), float(left)


def _replay_chunk(catalog: str | Path, data_dir: Path | None, days: list[str], first_k: int,
                  policies: tuple[str, ...], seed: int, time_limit_s: float,
                  mip_gap: float = 0.001, workload_scale: float = 1.0,
                  target_load: float | None = None, oracle_time_limit_s: float | None = None,
                  ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]], list[str]]:
    """Replay consecutive ``days`` (one worker's share); forecasters are fitted once per chunk."""
    from carbonsched.workload.files import workload_from_traces

    cat = load_catalog(catalog)
    ddir = data_dir if data_dir is not None else get_settings().data_dir
    d0, d1 = day_start_utc(days[0]), day_start_utc(days[-1])
    frames: dict[str, pd.DataFrame] = {}
    metas: dict[str, dict[str, Any]] = {}
    for s in cat.sites:
        frames[s.id], metas[s.id] = load_site_signals(
            s, data_dir, d0 - pd.Timedelta(days=FORECAST_HISTORY_DAYS),
            d1 + pd.Timedelta(days=1))
        if metas[s.id].get("signal_quality") == SignalQuality.MODELLED:
            raise InputError(f"catalog {cat.name} has modelled signals (site {s.id}); a replay "
                             "scores plans on actual measurements — use a measured catalog")
    models: dict[str, dict[str, Any]] = {s.id: {} for s in cat.sites}
    totals = _empty_totals(policies)
    rows: list[dict[str, Any]] = []
    # what the readers noted for this chunk's window (missing files, hours, quarantined rows)
    notes: list[str] = [f"{days[0]}..{days[-1]}: site {sid}: {n}"
                        for sid, m in metas.items() for n in m.get("notes", [])]
    for n, label in enumerate(days):
        k = first_k + n
        day = day_start_utc(label)
        slots = hourly_slots(day, 24)
        for cache in models.values():
            prune_model_cache(cache, day)
        wl = workload_from_traces(ddir, label, cat, seed=seed + k, scale=workload_scale)
        load0 = total_fleet_load(wl, cat)
        if target_load is not None and load0 > 0:
            wl = workload_from_traces(ddir, label, cat, seed=seed + k,
                                      scale=workload_scale * target_load / load0)
        forecasts = {}
        actual = {}
        fallbacks: dict[str, list[str]] = {}
        fc_error: dict[str, dict[str, Any]] = {}
        for s in cat.sites:
            hist = frames[s.id][(frames[s.id].index < day)
                                & (frames[s.id].index
                                   >= day - pd.Timedelta(days=FORECAST_HISTORY_DAYS))]
            try:
                act = actual_signals(s, frames[s.id], slots, surplus_reference(hist, day))
                fc = forecast_site(s, hist, day, 24, metas[s.id], models=models[s.id])
            except (ForecastError, InputError) as exc:
                notes.append(f"{label}: site {s.id} left out: {exc}")
                fallbacks[s.id] = [f"left out: {exc}"]
                continue
            if fc.notes:
                # every fallback the forecast took (model, weather, surplus, stale or damaged
                # history), per day and site (issue 7 item 11)
                fallbacks[s.id] = list(fc.notes)
            if act.attrs["filled_hours"]:
                notes.append(f"{label}: site {s.id}: {act.attrs['filled_hours']} hour(s) of "
                             "actual carbon intensity missing, interpolated for scoring")
            notes += substitution_notes(act, f"{label}: site {s.id}", "the day")
            forecasts[s.id], actual[s.id] = fc, act
            tally_forecast_error(fc_error, s.id, fc.signals["carbon_intensity_g_per_kwh"],
                                 act["carbon_intensity_g_per_kwh"],
                                 fc.models.get("carbon_intensity_g_per_kwh", {}).get("model"))
        problem = build_problem(cat.sites, wl, forecasts, slots)
        actual_sig = stack_site_frames({sid: actual[sid] for sid in forecasts})
        row: dict[str, Any] = {"date": label, "forecast_fallbacks": fallbacks,
                               "forecast_error": fc_error,
                               "fleet_load": round(total_fleet_load(wl, cat), 4)}
        for p in policies:
            t0 = time.perf_counter()
            fell_back = False
            if p == "agnostic":
                res = agnostic_plan(problem)
            elif p == "greedy":
                res = greedy_plan(problem)
            elif p == "milp":
                res = solve_plan(problem, time_limit_s=time_limit_s, mip_gap=mip_gap)
            else:
                oracle_problem = PlanningProblem(problem.sites, problem.jobs, problem.inference,
                                                 slots, actual_sig)
                res = solve_plan(oracle_problem, time_limit_s=(
                    time_limit_s if oracle_time_limit_s is None else oracle_time_limit_s),
                    mip_gap=mip_gap)
                gap = res.solver.mip_gap
                row["oracle_gap"] = None if gap is None else round(float(gap), 6)
                row["oracle_proven"] = bool(gap is not None and gap <= ORACLE_PROOF_GAP + 1e-12)
            if str(res.status) in ("infeasible", "no_solution", "error"):
                # a day the planner cannot plan still runs: fall back to greedy and count it
                notes.append(f"{label}: {p} {res.status} "
                             f"({res.solver.infeasible_family or res.solver.note}); "
                             "scored the greedy plan instead")
                totals[p]["fallback_days"] += 1
                res = greedy_plan(problem)
                fell_back = True
            secs = time.perf_counter() - t0
            sc = score_plan(problem, res, signals=actual_sig)
            t = totals[p]
            t["emissions_kg"] += sc.emissions_kg
            t["energy_kwh"] += sc.energy_kwh
            t["surplus_absorbed_kwh"] += sc.surplus_absorbed_kwh
            for key in _COUNTS:
                t[key] += int(getattr(sc, key))
            t["unplaced_gpu_hours"] += sc.unplaced_gpu_hours
            t["unplaced_jobs"] += len(res.unplaced)
            done_kwh, left_kwh = work_split_kwh(problem, res)
            t["work_it_kwh"] += done_kwh
            t["unplaced_it_kwh"] += left_kwh
            t["unplaced_priced_kg"] += left_kwh * dirtiest_kg_per_kwh(actual_sig)
            t["seconds"] += secs
            if p in ("milp", "oracle") and str(res.status) not in ("optimal", "heuristic"):
                t["not_optimal_days"] += 1
                notes.append(f"{label}: {p} {res.status} (gap {res.solver.mip_gap})")
            if p == "oracle":
                # the oracle's proven lower bound on the planner's objective on the actual
                # signals, to score every policy against; none for a day scored on the
                # greedy fallback
                bd = res.solver.bound
                row["oracle_bound_kg"] = None if fell_back or bd is None else round(bd, 3)
            # the planner's objective on the actual signals: emissions plus unplaced work at
            # its penalty (ten times the job's dirtiest GPU-hour), the oracle's own objective
            row[f"{p}_objective_kg"] = round(sc.objective, 3)
            row[p] = round(sc.emissions_kg, 3)
            row[f"{p}_work_mwh"] = round(done_kwh / 1000.0, 6)
            row[f"{p}_unplaced_priced_kg"] = round(left_kwh * dirtiest_kg_per_kwh(actual_sig), 3)
            row[f"{p}_unplaced_jobs"] = len(res.unplaced)
            row[f"{p}_unplaced_gpu_hours"] = round(sc.unplaced_gpu_hours, 3)
        rows.append(row)
    return rows, totals, notes


def replay_period(start: str, end: str | None) -> tuple[pd.Timestamp, pd.Timestamp]:
    """First and last day (00:00 UTC) of a replay of ``[start, end]``.

    ``end=None`` is :data:`DEFAULT_REPLAY_DAYS` days from ``start`` (a week), so a replay
    without an end never runs a whole year silently.

    Raises
    ------
    InputError
        ``end`` before ``start``.
    TimeAxisError
        A day that is not ``YYYY-MM-DD``.
    """
    d0 = day_start_utc(start)
    d1 = (d0 + pd.Timedelta(days=DEFAULT_REPLAY_DAYS - 1) if end is None
          else day_start_utc(end))
    if d1 < d0:
        raise InputError(f"--end {end} is before --start {start}")
    return d0, d1


def run_replay(
    catalog: str | Path = "global",
    data_dir: Path | None = None,
    start: str = "2023-01-01",
    end: str | None = None,
    policies: tuple[str, ...] = POLICIES,
    seed: int = 0,
    time_limit_s: float = 30.0,
    progress: Callable[[str], None] = _quiet,
    workers: int = 1,
    chunk_days: int = 7,
    mip_gap: float = 0.001,
    workload_scale: float = 1.0,
    executor: str = "local",
    scheduler_address: str | None = None,
    target_load: float | None = None,
    oracle_time_limit_s: float | None = None,
    every_days: int = 1,
    advance: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Replay ``[start, end]`` and score each policy on the actual grid.

    Parameters
    ----------
    catalog
        Catalog with measured signals (e.g. ``global``).
    data_dir
        Folder of the real public data; ``None`` uses the settings (``CARBONSCHED_DATA_DIR``).
    start, end
        First and last day, ``YYYY-MM-DD`` (inclusive); ``end=None`` replays
        ``DEFAULT_REPLAY_DAYS`` days from ``start`` (a week, never a whole year silently).
    policies
        Subset of ``agnostic, greedy, milp, oracle``.
    seed
        Workload seed (day ``k`` of the period uses ``seed + k``).
    time_limit_s
        Solver time limit per day and policy. [s]
    progress
        Callable receiving status lines.
    advance
        ``advance(days_done, days_total)``: called with 0 before the first day and after every
        chunk (a progress bar's feed).
    workers
        Processes replaying chunks of days in parallel (``local``, or a local Dask cluster).
    executor
        ``local`` (processes on this machine) or ``dask`` (a Dask cluster); see
        :mod:`carbonsched.evaluate.executor`. The results are the same day by day.
    scheduler_address
        Address of a running Dask scheduler (``executor="dask"``); ``None`` starts a local one.
    mip_gap
        Relative MIP gap at which ``milp`` and ``oracle`` stop (0.1 % by default, so the
        oracle's bound is tight enough to compare policies against). [-]
    workload_scale
        Multiplier on each day's trace job count (``workload_from_traces(scale=...)``). [-]
    target_load
        Scale each day's trace workload (after ``workload_scale``) so that its GPU-hours are
        this share of the fleet's GPU-hours (:func:`total_fleet_load`); the day's realised
        load is in ``daily[].fleet_load`` (job counts are whole, so it is near, not exact).
        ``None`` keeps ``workload_scale`` alone. (0, ``MAX_TARGET_LOAD``]. [-]
    oracle_time_limit_s
        The oracle's own time limit per day (``None``: ``time_limit_s``); give it enough to
        prove ``ORACLE_PROOF_GAP``. Days where its proven gap is larger (or unknown) are named
        in ``oracle_unproven_days``. [s]
    every_days
        Replay every ``every_days``-th day of ``[start, end]`` (a sample). [-]
    chunk_days
        Days per chunk of work. The forecasters are chosen and refitted once per refit period
        (:class:`carbonsched.forecasts.registry.ModelSchedule`, on up to a year before its
        start; cached) and conditioned on the latest history every day.

    Returns
    -------
    dict
        ``policies`` {name: {emissions_kg, reduction_pct, oracle_share, surplus_absorbed_mwh,
        deadline_misses, slo_violations, capacity_violations, power_cap_violations,
        facility_cap_violations, unplaced_gpu_hours, unplaced_jobs, seconds, and on equal
        terms:
        work_it_mwh (IT energy of the work placed), unplaced_it_mwh, kg_per_mwh_work,
        unplaced_priced_kg (unplaced IT energy at each day's dirtiest site-hour,
        :func:`dirtiest_kg_per_kwh`), emissions_with_unplaced_kg, reduction_with_unplaced_pct,
        oracle_share_with_unplaced}}, ``daily`` (per day: policy emissions [kg], work done
        ``<policy>_work_mwh``, unplaced work ``<policy>_unplaced_jobs`` and
        ``<policy>_unplaced_gpu_hours`` [GPU·h], the planner's objective on the actual signals
        ``<policy>_objective_kg``, the oracle's proven bound on it ``oracle_bound_kg`` and
        ``forecast_fallbacks`` {site: [every fallback note of that day's forecast]}),
        ``forecast_fallback_site_days`` {site: days with at least one fallback},
        ``margins`` (:func:`_margins_per_mwh`), ``forecast_error`` (per site:
        the carbon-intensity forecast error the ``milp`` plans acted on, MAPE [%] and MAE
        [g/kWh] over the days' 24 hourly leads, and the models that made them;
        :func:`forecast_error_summary`), ``notes``; with the oracle, the day lists and shares
        of :func:`_oracle_accounting` (days not proven, scored against the proven bound).

    Raises
    ------
    InputError
        Unknown policy or executor, ``end`` before ``start``, a catalog without measured
        signals.
    BackendUnavailableError
        The Dask scheduler at ``scheduler_address`` cannot be reached.
    """
    kind = parse_executor(executor)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise InputError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
    if data_dir is None:
        data_dir = get_settings().data_dir
    d0, d1 = replay_period(start, end)
    if target_load is not None and not 0.0 < target_load <= MAX_TARGET_LOAD:
        raise InputError(f"--target-load {target_load} is outside (0, {MAX_TARGET_LOAD}]: it is "
                         "the share of the fleet's GPU-hours the day's work asks for")
    if every_days < 1:
        raise InputError(f"--every-days {every_days} must be at least 1")
    cat = load_catalog(catalog)
    days = [d.strftime("%Y-%m-%d") for d in pd.date_range(d0, d1, freq="D")][::every_days]
    chunks = [(days[i:i + chunk_days], i) for i in range(0, len(days), chunk_days)]
    totals = _empty_totals(policies)
    daily: list[dict[str, Any]] = []
    notes: list[str] = []

    def merge(part: tuple[list[dict[str, Any]], dict[str, dict[str, float]], list[str]]) -> None:
        rows, tot, nts = part
        daily.extend(rows)
        notes.extend(nts)
        for p, t in tot.items():
            for key, v in t.items():
                totals[p][key] += v
        progress(f"{len(daily)}/{len(days)} days")
        if advance is not None:
            advance(len(daily), len(days))

    args = [(catalog, data_dir, c, k, policies, seed, time_limit_s, mip_gap, workload_scale,
             target_load, oracle_time_limit_s) for c, k in chunks]
    if advance is not None:
        advance(0, len(days))
    for part in map_in_order(_replay_chunk, args, executor=kind, workers=workers,
                             scheduler_address=scheduler_address):
        merge(part)
    daily.sort(key=lambda r: r["date"])
    out_pol: dict[str, Any] = {}
    base = totals.get("agnostic", {}).get("emissions_kg")
    oracle = totals.get("oracle", {}).get("emissions_kg")
    # on equal terms: unplaced work priced at the day's dirtiest site-hour
    adj = {p: t["emissions_kg"] + t["unplaced_priced_kg"] for p, t in totals.items()}
    base_adj, oracle_adj = adj.get("agnostic"), adj.get("oracle")
    for p, t in totals.items():
        red = None if not base else 100.0 * (base - t["emissions_kg"]) / base
        share = (None if base is None or oracle is None or base == oracle
                 else (base - t["emissions_kg"]) / (base - oracle))
        red_adj = None if not base_adj else 100.0 * (base_adj - adj[p]) / base_adj
        share_adj = (None if base_adj is None or oracle_adj is None or base_adj == oracle_adj
                     else (base_adj - adj[p]) / (base_adj - oracle_adj))
        work_mwh = t["work_it_kwh"] / 1000.0
        out_pol[p] = {
            "emissions_kg": round(t["emissions_kg"], 3),
            "reduction_pct": None if red is None else round(red, 3),
            "oracle_share": None if share is None else round(share, 4),
            "surplus_absorbed_mwh": round(t["surplus_absorbed_kwh"] / 1000.0, 3),
            "energy_mwh": round(t["energy_kwh"] / 1000.0, 3),
            **{k: int(t[k]) for k in _COUNTS},
            "unplaced_gpu_hours": round(t["unplaced_gpu_hours"], 1),
            "unplaced_jobs": int(t["unplaced_jobs"]),
            "not_optimal_days": int(t["not_optimal_days"]),
            "fallback_days": int(t["fallback_days"]),
            "work_it_mwh": round(work_mwh, 3),
            "unplaced_it_mwh": round(t["unplaced_it_kwh"] / 1000.0, 3),
            "kg_per_mwh_work": None if work_mwh <= 0 else round(t["emissions_kg"] / work_mwh, 3),
            "unplaced_priced_kg": round(t["unplaced_priced_kg"], 3),
            "emissions_with_unplaced_kg": round(adj[p], 3),
            "reduction_with_unplaced_pct": None if red_adj is None else round(red_adj, 3),
            "oracle_share_with_unplaced": None if share_adj is None else round(share_adj, 4),
            "seconds": round(t["seconds"], 2),
        }
    return {"catalog": cat.name, "start": days[0], "end": days[-1], "days": len(days),
            "seed": seed, "workload_scale": workload_scale, "target_load": target_load,
            "oracle_time_limit_s": oracle_time_limit_s, "every_days": every_days,
            "fleet_load_mean": (None if not daily else
                                round(float(np.mean([r["fleet_load"] for r in daily])), 4)),
            **_oracle_accounting(daily, policies),
            "time_limit_s": time_limit_s, "mip_gap": mip_gap,
            "chunk_days": chunk_days, "executor": str(kind),
            "policies": out_pol, "daily": daily,
            "margins": _margins_per_mwh(daily, policies),
            "forecast_fallback_site_days": _fallback_site_days(daily),
            "forecast_error": _daily_forecast_error(daily), "notes": notes}


def _daily_forecast_error(daily: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The carbon-intensity forecast error the plans acted on, per site, over the days.

    :func:`forecast_error_summary` of the days' tallies.
    """
    acc: dict[str, dict[str, Any]] = {}
    for r in daily:
        merge_forecast_error(acc, r.get("forecast_error", {}))
    return forecast_error_summary(acc)


def _margins_per_mwh(daily: list[dict[str, Any]], policies: tuple[str, ...],
                     ) -> dict[str, dict[str, float | int | None]]:
    """Day-by-day margin of ``milp`` over ``greedy`` (and ``agnostic``) per MWh of work done.

    For each day with work under both policies: ``kg/MWh(other) − kg/MWh(milp)``; the mean
    with a 95 % confidence interval over days from Student's t with n − 1 degrees of freedom
    (mean ± t₀.₉₇₅,ₙ₋₁ · s / √n). Days are treated as independent; serial correlation of the
    grid from day to day makes the interval somewhat optimistic. [kg CO2e/MWh IT]
    """
    from scipy import stats

    out: dict[str, dict[str, float | int | None]] = {}
    if "milp" not in policies:
        return out
    for other in ("greedy", "agnostic"):
        if other not in policies:
            continue
        diffs = [r[other] / r[f"{other}_work_mwh"] - r["milp"] / r["milp_work_mwh"]
                 for r in daily if r.get(f"{other}_work_mwh") and r.get("milp_work_mwh")]
        if not diffs:
            continue
        arr = np.asarray(diffs, dtype=float)
        mean = float(arr.mean())
        half = (float(stats.t.ppf(0.975, len(arr) - 1)) * float(arr.std(ddof=1))
                / np.sqrt(len(arr))) if len(arr) > 1 else None
        out[f"milp_vs_{other}_kg_per_mwh"] = {
            "mean": round(mean, 3),
            "ci95_lo": None if half is None else round(mean - half, 3),
            "ci95_hi": None if half is None else round(mean + half, 3), "days": int(len(arr)),
            "interval": "Student's t over days"}
    return out


def _oracle_accounting(daily: list[dict[str, Any]], policies: tuple[str, ...],
                       ) -> dict[str, Any]:
    """Days the oracle is not a bound, and the MILP's share over the days where it is.

    ``oracle_unproven_days``: dates where the oracle's proven gap is above
    ``ORACLE_PROOF_GAP`` or unknown (a time-limited incumbent). ``oracle_less_work_days``:
    dates where the oracle placed less work than the MILP (its emissions are then not
    comparable). ``milp_oracle_share_proven`` is ``(agnostic − milp) / (agnostic − oracle)``
    with unplaced work priced at the day's dirtiest hour, summed over the days in neither
    list only (``proven_days`` of them) — no such day counts silently.

    ``milp_share_of_oracle_bound`` scores against the oracle's proven bound instead, over every
    day with one (``oracle_bound_days``; the others are named in ``oracle_no_bound_days``), in
    the oracle's own terms: the planner's objective on the actual signals (emissions plus
    unplaced work at ten times the job's dirtiest GPU-hour, ``<policy>_objective_kg``), as
    ``Σ (agnostic − milp) / Σ (agnostic − bound)``. The bound (``oracle_bound_kg``) is a lower
    bound on that objective for every plan of the day, so the denominator is at least the
    best reduction any plan could reach and, where the MILP reduces at all, the share is a
    proven lower bound on the MILP's share of it, with no day left out;
    ``greedy_share_of_oracle_bound`` likewise.
    """
    if "oracle" not in policies:
        return {}
    unproven = [r["date"] for r in daily if not r.get("oracle_proven")]
    less = [r["date"] for r in daily if "milp" in policies
            and r["oracle_work_mwh"] < r["milp_work_mwh"] - 1e-6]
    out: dict[str, Any] = {"oracle_unproven_days": unproven, "oracle_less_work_days": less}
    if "milp" in policies and "agnostic" in policies:
        keep = [r for r in daily if r["date"] not in set(unproven) | set(less)]

        def adj(r: dict[str, Any], p: str) -> float:
            return r[p] + r[f"{p}_unplaced_priced_kg"]

        base = sum(adj(r, "agnostic") for r in keep)
        orc = sum(adj(r, "oracle") for r in keep)
        mlp = sum(adj(r, "milp") for r in keep)
        out["proven_days"] = len(keep)
        out["milp_oracle_share_proven"] = (None if not keep or base == orc
                                           else round((base - mlp) / (base - orc), 4))
        if "greedy" in policies:
            grd = sum(adj(r, "greedy") for r in keep)
            out["greedy_oracle_share_proven"] = (None if not keep or base == orc
                                                 else round((base - grd) / (base - orc), 4))
        with_b = [r for r in daily if r.get("oracle_bound_kg") is not None]
        out["oracle_no_bound_days"] = [r["date"] for r in daily
                                       if r.get("oracle_bound_kg") is None]
        out["oracle_bound_days"] = len(with_b)
        base = sum(r["agnostic_objective_kg"] for r in with_b)
        low = sum(r["oracle_bound_kg"] for r in with_b)
        for p in ("milp", "greedy"):
            if p in policies:
                got = sum(r[f"{p}_objective_kg"] for r in with_b)
                out[f"{p}_share_of_oracle_bound"] = (None if not with_b or base <= low
                                                     else round((base - got) / (base - low), 4))
    return out


def tally_forecast_error(acc: dict[str, dict[str, Any]], site_id: str, forecast: pd.Series,
                         actual: pd.Series, model: str | None) -> None:
    """Add one issue's carbon-intensity forecast error at a site to ``acc`` (in place).

    The forecast the plan acted on against the realised values, hour by hour on the forecast's
    index (hours without a finite actual are skipped). ``acc[site_id]`` holds sums, so tallies of
    days, runs or worker chunks merge by addition (:func:`merge_forecast_error`):
    ``hours``, ``abs_err_sum`` [g/kWh·h], ``ape_hours`` and ``ape_sum`` [%·h] over hours with a
    non-zero actual (the MAPE of the DACF paper and of the site backtest), and ``models``
    (model name -> hours it forecast).

    Parameters
    ----------
    forecast, actual
        Hourly series, tz-aware UTC index. [g CO2e/kWh]
    """
    a = actual.reindex(forecast.index).to_numpy(float)
    f = forecast.to_numpy(float)
    ok = np.isfinite(a) & np.isfinite(f)
    nz = ok & (a != 0)
    t = acc.setdefault(site_id, {"hours": 0, "abs_err_sum": 0.0, "ape_hours": 0,
                                 "ape_sum": 0.0, "models": {}})
    t["hours"] += int(ok.sum())
    t["abs_err_sum"] += float(np.abs(f[ok] - a[ok]).sum())
    t["ape_hours"] += int(nz.sum())
    t["ape_sum"] += float((100.0 * np.abs(f[nz] - a[nz]) / np.abs(a[nz])).sum())
    name = model or "unknown"
    t["models"][name] = t["models"].get(name, 0) + int(ok.sum())


def merge_forecast_error(into: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]]
                         ) -> None:
    """Add the tallies of ``other`` to ``into`` (in place); see :func:`tally_forecast_error`."""
    for sid, t in other.items():
        d = into.setdefault(sid, {"hours": 0, "abs_err_sum": 0.0, "ape_hours": 0,
                                  "ape_sum": 0.0, "models": {}})
        for key in ("hours", "abs_err_sum", "ape_hours", "ape_sum"):
            d[key] += t[key]
        for m, h in t["models"].items():
            d["models"][m] = d["models"].get(m, 0) + h


def forecast_error_summary(acc: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The tallies of :func:`tally_forecast_error` as errors, per site.

    ``ci_mape_pct`` [%], ``ci_mae_g_per_kwh`` [g/kWh], ``hours`` scored, and the models that
    made the forecasts (name -> hours, most used first); ``None`` where no hour could be scored.
    """
    out: dict[str, dict[str, Any]] = {}
    for sid in sorted(acc):
        t = acc[sid]
        out[sid] = {
            "ci_mape_pct": round(t["ape_sum"] / t["ape_hours"], 3) if t["ape_hours"] else None,
            "ci_mae_g_per_kwh": round(t["abs_err_sum"] / t["hours"], 3) if t["hours"] else None,
            "hours": int(t["hours"]),
            "models": dict(sorted(t["models"].items(), key=lambda kv: (-kv[1], kv[0])))}
    return out


def _fallback_site_days(daily: list[dict[str, Any]]) -> dict[str, int]:
    """Days on which each site's forecast took at least one fallback."""
    counts: dict[str, int] = {}
    for row in daily:
        for site in row.get("forecast_fallbacks", {}):
            counts[site] = counts.get(site, 0) + 1
    return dict(sorted(counts.items()))


def daily_plot_frames(result: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What :func:`plot_daily` draws, per day and policy: emissions and unplaced work.

    Returns
    -------
    emissions
        Per day (``DatetimeIndex``) and policy: the emissions on the actual grid plus the
        unplaced work priced at the day's dirtiest site-hour (:func:`dirtiest_kg_per_kwh`), so a
        policy that leaves work out does not look cleaner than one that runs it. [t CO2e/day]
    unplaced
        Per day and policy: GPU-hours of the jobs left unplaced. [GPU·h]
    """
    df = pd.DataFrame(result["daily"])
    pols = [p for p in POLICIES if p in df.columns]
    idx = pd.to_datetime(df["date"]) if len(df) else pd.DatetimeIndex([])
    em = pd.DataFrame({p: (df[p] + df.get(f"{p}_unplaced_priced_kg", 0.0)).to_numpy(float)
                       / 1000.0 for p in pols}, index=idx)
    un = pd.DataFrame({p: df.get(f"{p}_unplaced_gpu_hours", pd.Series(0.0, index=df.index))
                       .to_numpy(float) for p in pols}, index=idx)
    return em, un


def replay_figure(result: dict[str, Any]) -> Any:
    """The replay's figure: daily emissions per policy above, unplaced work per policy below.

    Emissions include the unplaced work priced at the day's dirtiest site-hour
    (:func:`daily_plot_frames`). The oracle is drawn as what it is, a bound with perfect
    foresight (dashed, labelled :data:`ORACLE_LABEL`), not as one more policy; days where it is
    not a bound (its MIP gap not proven within ``ORACLE_PROOF_GAP``, or it placed less work
    than ``milp``) are marked with open circles and counted in the legend.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes sharing the date axis: ``[emissions, unplaced]``.

    Raises
    ------
    MissingExtraError
        matplotlib is not installed (the ``report`` extra).
    """
    matplotlib = require_extra("matplotlib", "replay --plot", "report")
    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    em, un = daily_plot_frames(result)
    fig, (ax, ax_u) = plt.subplots(2, 1, figsize=(11, 6.5), dpi=110, sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1.2]})
    colours = {"agnostic": "tab:gray", "greedy": "tab:orange", "milp": "tab:blue",
               "oracle": "black"}
    for p in em.columns:
        if p == "oracle":
            ax.plot(em.index, em[p], label=ORACLE_LABEL, color="black", linestyle="--",
                    linewidth=1.4)
            not_bound = sorted(set(result.get("oracle_unproven_days", []))
                               | set(result.get("oracle_less_work_days", [])))
            if not_bound:
                at = pd.to_datetime(not_bound)
                ax.plot(at, em.loc[at, p], linestyle="none", marker="o", markerfacecolor="none",
                        color="black", label=f"oracle not a bound ({len(not_bound)} day(s))")
        else:
            ax.plot(em.index, em[p], label=p, color=colours.get(p), linewidth=1.1)
    ax.set_ylabel("t CO2e / day (actual grid;\nunplaced work at the day's dirtiest hour)")
    ax.set_title(f"Daily emissions by policy — catalog {result['catalog']}, "
                 f"{result['start']} .. {result['end']}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    width = 0.8 / max(len(un.columns), 1)
    for i, p in enumerate(un.columns):
        shift = pd.Timedelta(days=(i - (len(un.columns) - 1) / 2) * width)
        ax_u.bar(un.index + shift, un[p], width=width,
                 label=ORACLE_LABEL if p == "oracle" else p, color=colours.get(p),
                 hatch="//" if p == "oracle" else None,
                 fill=p != "oracle", edgecolor=colours.get(p))
    ax_u.set_ylabel("unplaced GPU-h / day")
    ax_u.grid(alpha=0.3)
    loc = mdates.AutoDateLocator()
    ax_u.xaxis.set_major_locator(loc)
    ax_u.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    fig.tight_layout()
    return fig


def plot_daily(result: dict[str, Any], path: Path) -> None:
    """Write the replay's figure (:func:`replay_figure`) as PNG (or the suffix's format).

    Raises
    ------
    MissingExtraError
        matplotlib is not installed (the ``report`` extra).
    """
    fig = replay_figure(result)
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(fig)
