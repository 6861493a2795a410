"""Sets of the planning model: the problem as given, and its compiled integer-indexed form.

:class:`PlanningProblem` is what callers hand the planner (domain objects plus the site signal
frame). :func:`compile_sets` turns it into :class:`PlanSets`: named pandas indexes (``site``,
``slot``, ``gpu_type``, ``job``) and numpy arrays over integer positions, the pre-check reason of
every job that cannot run at all, and the feasible ``(job, site, start)`` options (PyPSA's
``mask``: variables exist only where they can be non-zero).

Nothing downstream uses a user id as a solver name; ids only map positions back to the domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from carbonsched.domain import InferenceDemand, Job, ReasonCode, Site
from carbonsched.errors import InputError, TimeAxisError
from carbonsched.timeaxis import HOUR

SIGNAL_COLUMNS = ("carbon_intensity_g_per_kwh", "pue", "green_surplus_kw")
PUE_CAP_COLUMN = "pue_hi_95"
"""Optional signal column: the PUE a site's facility (grid-connection) power cap is planned
against, the upper bound of the PUE forecast's 95 % interval. [-] Without it the cap is planned
against ``pue`` itself (as when scoring a plan on actual signals)."""


@dataclass
class PlanningProblem:
    """One planning run: sites, work, the hourly slots and each site's forecast signals.

    Attributes
    ----------
    sites
        Site catalog entries (ids must be unique).
    jobs
        Batch/training jobs to place.
    inference
        Inference demand per user area and hour; every demand must be served.
    slots
        Hourly tz-aware UTC slot starts, named ``slot``, shape ``(T,)``.
    signals
        Frame on a ``(site, slot)`` MultiIndex with columns ``carbon_intensity_g_per_kwh``
        [g/kWh], ``pue`` [-] and ``green_surplus_kw`` [kW] (absorbable green power), and
        optionally ``pue_hi_95`` [-] (:data:`PUE_CAP_COLUMN`), the PUE a site's
        ``facility_power_cap_kw`` is planned against.
    """

    sites: list[Site]
    jobs: list[Job]
    inference: list[InferenceDemand]
    slots: pd.DatetimeIndex
    signals: pd.DataFrame


@dataclass
class PlanSets:
    """Integer-indexed form of a :class:`PlanningProblem` (see :func:`compile_sets`).

    Array shapes use ``S`` sites, ``T`` slots, ``G`` GPU types, ``J`` jobs, ``D`` inference
    demands and ``O`` feasible job options.
    """

    problem: PlanningProblem
    site: pd.Index
    slot: pd.DatetimeIndex
    gpu_type: pd.Index
    ci_g_per_kwh: np.ndarray
    """Carbon intensity, shape ``(S, T)``. [g/kWh]"""
    pue: np.ndarray
    """PUE, shape ``(S, T)``. [-]"""
    surplus_kw: np.ndarray
    """Absorbable green power, shape ``(S, T)``. [kW]"""
    gpu_count: np.ndarray
    """GPUs per site and type, shape ``(S, G)``. [-]"""
    power_cap_kw: np.ndarray
    """IT power allowed per site-hour, shape ``(S, T)``: the lower of the IT cap (PDU/UPS)
    and the facility (grid-connection) cap divided by the PUE it is planned against,
    ``min(it_power_cap_kw, facility_power_cap_kw / pue_cap)``. [kW]"""
    it_power_cap_kw: np.ndarray
    """IT power cap per site (PDU/UPS), shape ``(S,)``. [kW]"""
    facility_power_cap_kw: np.ndarray
    """Facility power cap per site (grid connection), ``inf`` where none, shape ``(S,)``. [kW]"""
    pue_cap: np.ndarray
    """PUE the facility cap is planned against (the forecast's upper 95 % bound), shape
    ``(S, T)``. [-]"""
    # jobs (all, including pre-check rejects)
    job_gpus: np.ndarray
    job_dur: np.ndarray
    job_kw: np.ndarray
    """IT power of the whole gang, shape ``(J,)``. [kW]"""
    job_gtype: np.ndarray
    """GPU type position, -1 if unknown, shape ``(J,)``."""
    job_first: np.ndarray
    """First allowed start slot position, shape ``(J,)``."""
    job_last: np.ndarray
    """Last allowed start slot position (may be < first: no slot), shape ``(J,)``."""
    job_sites: np.ndarray
    """Boolean ``(J, S)``: allowed site with the type, gang size and power cap."""
    reasons: dict[int, tuple[ReasonCode, str]]
    """Pre-check reason by job position, for jobs that can never run."""
    # inference
    inf_hour: np.ndarray
    inf_gtype: np.ndarray
    inf_gpus: np.ndarray
    inf_kw_per_gpu: np.ndarray
    inf_sites: np.ndarray
    """Boolean ``(D, S)``: site within the SLO that has the GPU type."""
    penalty_per_gpu_hour: float
    """Objective cost of one unplaced GPU-hour. [kg CO2e-equivalent]"""
    options: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    """Feasible ``(job, site, start)`` positions, shape ``(O, 3)``."""

    @property
    def placeable(self) -> np.ndarray:
        """Positions of jobs that passed the pre-check, shape ``(J',)``."""
        bad = np.zeros(len(self.job_gpus), dtype=bool)
        if self.reasons:
            bad[list(self.reasons)] = True
        return np.flatnonzero(~bad)

    @property
    def cost_per_kwh(self) -> np.ndarray:
        """Marginal kg CO2e per kWh of IT energy, PUE × CI / 1000, shape ``(S, T)``. [kg/kWh]"""
        return self.pue * self.ci_g_per_kwh / 1000.0


UNPLACED_PENALTY_FACTOR = 10.0
"""An unplaced GPU-hour costs this many times the dirtiest GPU-hour of the instance.

Placing a job therefore always beats leaving it out to save its own emissions, and the solver
only leaves work unplaced when capacity truly runs out (it can trade one unplaced GPU-hour for
at most ten GPU-hours moved from the dirtiest to a clean slot). A design choice of this project,
not a cited constant."""


def signal_arrays(
    problem: PlanningProblem, signals: pd.DataFrame | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Carbon intensity, PUE and green surplus as ``(S, T)`` arrays in site and slot order.

    Raises
    ------
    InputError
        A column is missing, or a (site, slot) value is missing or negative.
    """
    sig = problem.signals if signals is None else signals
    missing_cols = [c for c in SIGNAL_COLUMNS if c not in sig.columns]
    if missing_cols:
        raise InputError(
            f"signals frame lacks column(s) {missing_cols}; it needs {list(SIGNAL_COLUMNS)} "
            "on a (site, slot) MultiIndex"
        )
    if not isinstance(sig.index, pd.MultiIndex) or sig.index.nlevels != 2:
        raise InputError("signals frame must have a (site, slot) MultiIndex")
    site_ids = [s.id for s in problem.sites]
    slot_level = sig.index.levels[1]
    if isinstance(slot_level, pd.DatetimeIndex) and slot_level.tz is None:
        raise TimeAxisError("signals slot level is naive; localize it to UTC")
    full = pd.MultiIndex.from_product([site_ids, problem.slots], names=["site", "slot"])
    aligned = sig.reindex(full)
    out = []
    for col in SIGNAL_COLUMNS:
        arr = aligned[col].to_numpy(dtype=float).reshape(len(site_ids), len(problem.slots))
        if np.isnan(arr).any():
            s, t = np.argwhere(np.isnan(arr))[0]
            raise InputError(
                f"signals: {col} missing for site {site_ids[s]!r} at "
                f"{problem.slots[t].isoformat()}; forecast every site and slot of the horizon"
            )
        if (arr < 0).any():
            s, t = np.argwhere(arr < 0)[0]
            raise InputError(
                f"signals: {col} is negative for site {site_ids[s]!r} at "
                f"{problem.slots[t].isoformat()}"
            )
        out.append(arr)
    return out[0], out[1], out[2]


def pue_cap_array(problem: PlanningProblem, signals: pd.DataFrame | None = None) -> np.ndarray:
    """The PUE each site's facility cap is planned against, shape ``(S, T)``. [-]

    ``pue_hi_95`` where the signals carry it (the upper bound of the PUE forecast's 95 %
    interval, so that a warm hour does not break the grid connection), else ``pue``.

    Raises
    ------
    InputError
        ``pue_hi_95`` present but missing for a (site, slot), or below ``pue`` (an interval
        whose upper bound is below its point forecast).
    """
    sig = problem.signals if signals is None else signals
    _ci, pue, _sur = signal_arrays(problem, sig)
    if PUE_CAP_COLUMN not in sig.columns:
        return pue
    site_ids = [s.id for s in problem.sites]
    full = pd.MultiIndex.from_product([site_ids, problem.slots], names=["site", "slot"])
    arr = sig[PUE_CAP_COLUMN].reindex(full).to_numpy(dtype=float).reshape(pue.shape)
    bad = np.isnan(arr) | (arr < pue - 1e-9)
    if bad.any():
        i, t = np.argwhere(bad)[0]
        raise InputError(
            f"signals: {PUE_CAP_COLUMN} for site {site_ids[i]!r} at "
            f"{problem.slots[t].isoformat()} is {arr[i, t]}, below the PUE {pue[i, t]} or "
            "missing; give the upper bound of the PUE interval for every site and slot")
    return arr


def _check_slots(slots: pd.DatetimeIndex) -> None:
    if not isinstance(slots, pd.DatetimeIndex) or slots.tz is None:
        raise TimeAxisError("planning slots must be a tz-aware UTC DatetimeIndex")
    if len(slots) == 0:
        raise TimeAxisError("planning slots are empty; give at least one hour")
    if len(slots) > 1 and not ((slots[1:] - slots[:-1]) == HOUR).all():
        raise TimeAxisError("planning slots must be consecutive hours")
    if (slots != slots.floor("h")).any():
        raise TimeAxisError("planning slots must start on the hour")


def compile_sets(problem: PlanningProblem, signals: pd.DataFrame | None = None) -> PlanSets:
    """Compile a problem into integer-indexed sets, pre-check reasons and feasible options.

    Parameters
    ----------
    problem
        The planning problem.
    signals
        Signals to use instead of ``problem.signals`` (same layout), e.g. actuals for scoring.

    Returns
    -------
    PlanSets

    Raises
    ------
    InputError
        Duplicate site or job ids, or incomplete signals.
    TimeAxisError
        Slots that are not consecutive tz-aware hours.
    """
    _check_slots(problem.slots)
    site_ids = [s.id for s in problem.sites]
    if len(set(site_ids)) != len(site_ids):
        raise InputError("duplicate site ids in the planning problem; ids must be unique")
    job_ids = [j.id for j in problem.jobs]
    if len(set(job_ids)) != len(job_ids):
        dup = pd.Index(job_ids)[pd.Index(job_ids).duplicated()][0]
        raise InputError(f"duplicate job id {dup!r}; every job needs a unique id")
    ci, pue, sur = signal_arrays(problem, signals)
    gtypes = sorted({g for s in problem.sites for g in s.gpus} |
                    {d.gpu_type for d in problem.inference})
    gpos = {g: i for i, g in enumerate(gtypes)}
    spos = {s: i for i, s in enumerate(site_ids)}
    n_s, n_t, n_g = len(site_ids), len(problem.slots), len(gtypes)
    count = np.zeros((n_s, n_g), dtype=np.int64)
    for i, s in enumerate(problem.sites):
        for g, pool in s.gpus.items():
            count[i, gpos[g]] = pool.count
    it_cap = np.array([s.it_power_cap_kw for s in problem.sites], dtype=float)
    fac_cap = np.array([np.inf if s.facility_power_cap_kw is None else s.facility_power_cap_kw
                        for s in problem.sites], dtype=float)
    pue_cap = pue_cap_array(problem, signals)
    # a grid connection of F kW allows F / PUE kW of IT power in an hour (facility = IT × PUE)
    cap_st = np.minimum(it_cap[:, None], fac_cap[:, None] / pue_cap)
    cap = cap_st.max(axis=1) if n_t else it_cap  # the most a site allows in any hour

    n_j = len(problem.jobs)
    t0 = problem.slots[0]
    j_gpus = np.array([j.gpus for j in problem.jobs], dtype=np.int64)
    j_dur = np.array([j.duration_hours for j in problem.jobs], dtype=np.int64)
    j_kw = np.array([j.it_power_kw for j in problem.jobs], dtype=float)
    j_g = np.array([gpos.get(j.gpu_type, -1) for j in problem.jobs], dtype=np.int64)
    es = np.array([(j.earliest_start - t0) / HOUR for j in problem.jobs], dtype=float)
    dl = np.array([(j.deadline - t0) / HOUR for j in problem.jobs], dtype=float)
    first = np.maximum(np.ceil(es - 1e-9), 0).astype(np.int64) if n_j else es.astype(np.int64)
    last = (np.minimum(np.floor(dl + 1e-9), n_t) - j_dur).astype(np.int64) if n_j else first
    allowed = np.zeros((n_j, n_s), dtype=bool)
    reasons: dict[int, tuple[ReasonCode, str]] = {}
    known_types = {g for s in problem.sites for g in s.gpus}
    for k, job in enumerate(problem.jobs):
        if job.gpu_type not in known_types:
            reasons[k] = (ReasonCode.UNKNOWN_GPU_TYPE,
                          f"no site in the catalog has GPU type {job.gpu_type!r}")
            continue
        if job.allowed_sites:
            cand = [spos[s] for s in job.allowed_sites if s in spos]
            if not cand:
                reasons[k] = (ReasonCode.DATA_RESIDENCY,
                              f"none of the allowed sites {list(job.allowed_sites)} is in "
                              "the catalog")
                continue
        else:
            cand = list(range(n_s))
        g = j_g[k]
        typed = [s for s in cand if count[s, g] > 0]
        if not typed:
            reasons[k] = (ReasonCode.NO_FEASIBLE_SLOT,
                          f"no allowed site has GPU type {job.gpu_type!r}")
            continue
        fits = [s for s in typed if count[s, g] >= job.gpus]
        if not fits:
            reasons[k] = (ReasonCode.GANG_TOO_LARGE,
                          f"gang of {job.gpus} {job.gpu_type} exceeds every allowed site "
                          f"(largest {int(count[typed, g].max())})")
            continue
        # the most IT power each site allows in any hour the job could occupy
        lo, hi = max(int(first[k]), 0), min(int(last[k]) + int(j_dur[k]), n_t)
        cap_win = cap_st[:, lo:hi].max(axis=1) if hi > lo else cap
        powered = [s for s in fits if cap_win[s] >= j_kw[k] - 1e-9]
        if not powered:
            by_facility = any(cap_win[s] < it_cap[s] - 1e-9 for s in fits)
            reasons[k] = (ReasonCode.EXCEEDS_POWER_CAP,
                          f"job draws {j_kw[k]:.1f} kW IT power, above every allowed site's cap "
                          f"in its window (largest {cap_win[fits].max():.1f} kW"
                          + (", with facility power caps at the PUE's upper bound)"
                             if by_facility else ")"))
            continue
        if dl[k] <= 0:
            reasons[k] = (ReasonCode.DEADLINE_PASSED,
                          f"deadline {job.deadline.isoformat()} is before the horizon starts")
            continue
        if last[k] < first[k]:
            reasons[k] = (ReasonCode.NO_FEASIBLE_SLOT,
                          f"no start in [{job.earliest_start.isoformat()}, deadline - "
                          f"{job.duration_hours} h] inside the horizon")
            continue
        allowed[k, powered] = True

    n_d = len(problem.inference)
    inf_hour = np.zeros(n_d, dtype=np.int64)
    inf_g = np.zeros(n_d, dtype=np.int64)
    inf_gpus = np.zeros(n_d, dtype=np.int64)
    inf_kw = np.zeros(n_d, dtype=float)
    inf_sites = np.zeros((n_d, n_s), dtype=bool)
    slot_pos = {ts: i for i, ts in enumerate(problem.slots)}
    for d, dem in enumerate(problem.inference):
        if dem.hour not in slot_pos:
            raise InputError(
                f"inference demand of area {dem.area!r} at {dem.hour.isoformat()} is outside "
                "the planning slots; drop it or widen the horizon")
        inf_hour[d] = slot_pos[dem.hour]
        inf_g[d] = gpos[dem.gpu_type]
        inf_gpus[d] = dem.gpus
        inf_kw[d] = dem.power_per_gpu_kw
        for i, s in enumerate(problem.sites):
            lat = s.latency_ms.get(dem.area)
            if lat is not None and lat <= dem.slo_ms and count[i, inf_g[d]] > 0:
                inf_sites[d, i] = True

    cost = pue * ci / 1000.0
    kw_per_gpu = max([j.power_per_gpu_kw for j in problem.jobs] + [1e-3])
    penalty = UNPLACED_PENALTY_FACTOR * max(float(cost.max(initial=0.0)), 1e-3) * kw_per_gpu
    sets = PlanSets(
        problem=problem, site=pd.Index(site_ids, name="site"), slot=problem.slots,
        gpu_type=pd.Index(gtypes, name="gpu_type"), ci_g_per_kwh=ci, pue=pue, surplus_kw=sur,
        gpu_count=count, power_cap_kw=cap_st, it_power_cap_kw=it_cap,
        facility_power_cap_kw=fac_cap, pue_cap=pue_cap, job_gpus=j_gpus, job_dur=j_dur, job_kw=j_kw,
        job_gtype=j_g, job_first=first, job_last=last, job_sites=allowed, reasons=reasons,
        inf_hour=inf_hour, inf_gtype=inf_g, inf_gpus=inf_gpus, inf_kw_per_gpu=inf_kw,
        inf_sites=inf_sites, penalty_per_gpu_hour=penalty,
    )
    sets.options = enumerate_options(sets)
    return sets


def enumerate_options(sets: PlanSets, jobs: np.ndarray | None = None) -> np.ndarray:
    """All feasible ``(job, site, start)`` positions of the given jobs (default: all placeable).

    Returns
    -------
    numpy.ndarray
        Shape ``(O, 3)``, int64, sorted by job, then site, then start.
    """
    jobs = sets.placeable if jobs is None else np.asarray(jobs, dtype=np.int64)
    n_t = len(sets.slot)
    if len(jobs) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    starts = np.arange(n_t)
    in_win = ((starts[None, :] >= sets.job_first[jobs, None])
              & (starts[None, :] <= sets.job_last[jobs, None]))          # (J', T)
    mask = sets.job_sites[jobs][:, :, None] & in_win[:, None, :]          # (J', S, T)
    jj, ss, tt = np.nonzero(mask)
    return np.stack([jobs[jj], ss, tt], axis=1).astype(np.int64)


def option_costs(sets: PlanSets, options: np.ndarray) -> np.ndarray:
    """Grid-only emissions of each option (no surplus), Σ_t kW × PUE × CI / 1000. [kg]

    Parameters
    ----------
    options
        ``(O, 3)`` positions from :func:`enumerate_options`.
    """
    cum = np.concatenate([np.zeros((len(sets.site), 1)), np.cumsum(sets.cost_per_kwh, axis=1)],
                         axis=1)
    j, s, t = options[:, 0], options[:, 1], options[:, 2]
    d = sets.job_dur[j]
    return sets.job_kw[j] * (cum[s, t + d] - cum[s, t])
