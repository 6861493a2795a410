"""Sets of the planning model: the problem as given, and its compiled integer-indexed form.

:class:`PlanningProblem` is what callers hand the planner (domain objects plus the site signal
frame). :func:`compile_sets` turns it into :class:`PlanSets`: named pandas indexes (``site``,
``slot``, ``gpu_type``, ``job``) and numpy arrays over integer positions, the pre-check reason of
every job that cannot run at all, and the feasible ``(job, site, start)`` options (PyPSA's
``mask``: variables exist only where they can be non-zero).

Nothing downstream uses a user id as a solver name; ids only map positions back to the domain.

Time axis. Decisions (starts) are made only in the problem's slots, the *horizon*
``[slots[0], slots[-1] + L)``, on a grid of ``L`` = :attr:`PlanningProblem.slot_minutes`
(1 hour by default, :data:`SLOT_MINUTES`; 30 or 15 minutes allowed,
:data:`ALLOWED_SLOT_MINUTES`). Jobs are in minutes: a job starts at a slot boundary (its
``earliest_start`` rounded *up* to the grid), occupies ``ceil(duration_minutes / L)`` slots in
which GPU capacity and the power caps see its whole gang (conservative), and is charged energy
and emissions only for the minutes it runs (the last slot is charged its fraction; a slot's
energy is kW × ``L / 60`` h). It must *end* (``start + duration_minutes``) by its deadline; a
deadline is never cut to the horizon. Signals are hourly: on a sub-hour grid every slot takes
its hour's carbon intensity, PUE and surplus (forward fill), and an inference demand (given per
hour) holds in every slot of its hour. Piece patterns of preemptible jobs are built on the
hourly grid only (a sub-hour grid plans them in one piece, with a plan note).

Past the horizon. A job may start inside the horizon and run past its end (a 5-day training
run in one piece over a 72-hour horizon). The compiled arrays therefore cover an *extended*
axis ``slot`` of ``T_ext >= T`` hours: the horizon plus the tail the latest-ending option
needs. Signals exist only over the horizon; past it they follow the **continuation rule**
(:data:`CONTINUATION_RULE`): each site's last forecast day (its last 24 slots, or every slot
when the horizon is shorter) repeats, for carbon intensity, PUE (and its upper bound) and green
surplus alike. Capacity and power rows cover the tail slots too.

Terminal value (deferral). A job whose deadline allows a start at or after the horizon end
may be *deferred*: not started in this run, left ``Pending`` with reason
``DeferredPastHorizon`` for a later run. Deferring costs the job's **terminal value**
(:data:`TERMINAL_VALUE_RULE`): the emissions of its best start at or after the horizon end that
still ends by its deadline, on the continuation signals, with capacity ignored (a later run
re-plans it on fresher forecasts), times ``1 + DEFER_MARGIN`` (deferring is a bet on
continued signals, not on a forecast: it must save more than that margin to win). A
deferrable job is therefore never "unplaced for capacity": with no room in the horizon it is
deferred. A job whose deadline is before the horizon start (or that cannot
end by it from the horizon start) is ``DeadlinePassed``.

Running work. :attr:`PlanningProblem.running` lists work already running (pinned by the
rolling runner): its GPUs and IT power are taken off the capacity and power caps of every
slot it still occupies, and its facility power off the absorbable green surplus.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.domain import (
    InferenceDemand,
    Job,
    ReasonCode,
    RunningWork,
    Site,
    Tenant,
)
from carbonsched.errors import InputError, TimeAxisError, UnknownSiteError
from carbonsched.flex import Commitment
from carbonsched.plan.precheck import site_precheck, window_precheck
from carbonsched.timeaxis import HOUR

SIGNAL_COLUMNS = ("carbon_intensity_g_per_kwh", "pue", "green_surplus_kw")
PUE_CAP_COLUMN = "pue_hi_95"
"""Optional signal column: the PUE a site's facility (grid-connection) power cap is planned
against, the upper bound of the PUE forecast's 95 % interval. [-] Without it the cap is planned
against ``pue`` itself (as when scoring a plan on actual signals)."""
SLOT_MINUTES = 60
"""Default length of a planning slot. [min] (Minutes live inside the jobs.)"""
SLOT = pd.Timedelta(minutes=SLOT_MINUTES)
ALLOWED_SLOT_MINUTES = (60, 30, 15)
"""Slot lengths the planner accepts (:attr:`PlanningProblem.slot_minutes`): divisors of an
hour, so that every hourly signal covers whole slots. [min]"""
CONTINUATION_PERIOD_SLOTS = 24
"""Slots of the profile repeated past the horizon (the last forecast day). [-]"""
CONTINUATION_RULE = (
    "past the horizon end, each site's signals repeat its last forecast day (the last 24 "
    "hourly slots of the horizon, or all of them when the horizon is shorter)")
"""The continuation rule in one sentence (plan notes, README)."""
TERMINAL_VALUE_RULE = (
    "a job whose deadline lies beyond the horizon may be deferred (not started in this run); "
    "deferring costs its best start at or after the horizon end that still ends by its "
    "deadline, on the continuation signals, capacity ignored, times 1.05 (deferring must save "
    "more than 5 % over the best start with room inside the horizon)")
"""The end-of-horizon (terminal value) rule in one sentence (plan notes, README)."""
DEFER_MARGIN = 0.05
"""Relative premium on the terminal value: deferring past the horizon is a bet on continued
signals (a repeated day, not a forecast), so it must save more than this share; it also keeps
an equally clean start now ahead of deferral within the solver's gap tolerance. A design
choice of this project, not a cited constant. [-]"""


def check_slot_minutes(slot_minutes: object) -> int:
    """Return ``slot_minutes`` as an int, or raise if it is not an allowed slot length.

    Raises
    ------
    InputError
        Not one of :data:`ALLOWED_SLOT_MINUTES` (60, 30, 15).
    """
    ok = (not isinstance(slot_minutes, bool) and isinstance(slot_minutes, (int, np.integer))
          and int(slot_minutes) in ALLOWED_SLOT_MINUTES)
    if not ok:
        allowed = ", ".join(str(m) for m in ALLOWED_SLOT_MINUTES)
        raise InputError(f"slot length {slot_minutes!r} min is not allowed; choose one of "
                         f"{allowed} minutes (a slot must divide the hour)")
    return int(slot_minutes)


@dataclass
class PlanningProblem:
    """One planning run: sites, work, the slot grid and each site's forecast signals.

    Attributes
    ----------
    sites
        Site catalog entries (ids must be unique).
    jobs
        Batch/training jobs to place.
    inference
        Inference demand per user area and hour; every demand must be served.
    slots
        Tz-aware UTC slot starts, named ``slot``, shape ``(T,)``, ``slot_minutes`` apart: the
        horizon, where starts are decided (jobs may run past its end, see the module
        docstring).
    signals
        Frame on a ``(site, slot)`` MultiIndex with columns ``carbon_intensity_g_per_kwh``
        [g/kWh], ``pue`` [-] and ``green_surplus_kw`` [kW] (absorbable green power), and
        optionally ``pue_hi_95`` [-] (:data:`PUE_CAP_COLUMN`), the PUE a site's
        ``facility_power_cap_kw`` is planned against. Signals are hourly (``slot`` on the
        hour); on a sub-hour grid each slot takes the value of its hour (forward fill).
    running
        Work already running that holds GPUs and IT power in the slots it still occupies
        (:class:`~carbonsched.domain.RunningWork`: site, gpu_type, gpus, it_power_kw, end).
    """

    sites: list[Site]
    jobs: list[Job]
    inference: list[InferenceDemand]
    slots: pd.DatetimeIndex
    signals: pd.DataFrame
    running: list[RunningWork] = field(default_factory=list)
    slot_minutes: int = SLOT_MINUTES
    """Length of a slot, one of :data:`ALLOWED_SLOT_MINUTES` (60 default, 30, 15). [min]
    Starts are decided on this grid; GPU capacity and the power caps hold in every slot;
    energy and emissions count the minutes run. Hourly signals (carbon intensity, PUE,
    surplus) and hourly inference demand hold in every slot of their hour."""
    commitments: list[Commitment] = field(default_factory=list)
    """Grid-flexibility commitments (:class:`carbonsched.flex.Commitment`): in every slot of a
    commitment's window the site's facility power, IT × the PUE the caps are planned against
    (``pue_hi_95`` where given), stays at or below ``baseline_kw - reduction_kw``; the
    reduction is reserved when work is placed (:attr:`PlanSets.commit_limit_kw`)."""

    tenants: dict[str, Tenant] = field(default_factory=dict)
    """Tenants by name with weights and guaranteed quotas (the catalog's ``[tenants.NAME]``);
    empty: no fair sharing (:mod:`carbonsched.plan.fairness`)."""
    fairness: float = 0.0
    """Trade between carbon and fair shares when capacity binds: 0 carbon only, 1 strict
    weighted DRF (:mod:`carbonsched.plan.fairness`). [-]"""
    fair_targets: Any = None
    """Set by the planner for the fair solve (:class:`carbonsched.plan.fairness.FairTargets`);
    None otherwise."""

    def __post_init__(self) -> None:
        self.slot_minutes = check_slot_minutes(self.slot_minutes)
        f = self.fairness
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 <= f <= 1.0:
            raise InputError(f"fairness {f!r} is not a number in 0..1; give 0 (carbon only) "
                             "up to 1 (strict weighted DRF)")

    @property
    def slot_length(self) -> pd.Timedelta:
        """Length of a slot as a timedelta."""
        return pd.Timedelta(minutes=self.slot_minutes)


@dataclass
class PlanSets:
    """Integer-indexed form of a :class:`PlanningProblem` (see :func:`compile_sets`).

    Array shapes use ``S`` sites, ``T`` slots, ``G`` GPU types, ``J`` jobs, ``D`` inference
    demands and ``O`` feasible job options.
    """

    problem: PlanningProblem
    site: pd.Index
    slot: pd.DatetimeIndex
    """The extended time axis, shape ``(T_ext,)``: the horizon's ``T`` slots, then the tail
    slots options may run into (signals there follow :data:`CONTINUATION_RULE`). Every
    ``(S, T)`` array below is over this axis."""
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
    """Slots occupied by a one-piece run, ``ceil(duration_minutes / slot_minutes)``, shape
    ``(J,)``."""
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
    """First slot of each demand's hour, shape ``(D,)`` (it holds in :meth:`inf_slots`)."""
    inf_gtype: np.ndarray
    inf_gpus: np.ndarray
    inf_kw_per_gpu: np.ndarray
    inf_sites: np.ndarray
    """Boolean ``(D, S)``: site within the SLO that has the GPU type."""
    penalty_per_gpu_hour: float
    """Objective cost of one unplaced GPU-hour. [kg CO2e-equivalent]"""
    options: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    """Feasible ``(job, site, start)`` positions, shape ``(O, 3)``."""
    n_horizon: int = 0
    """Slots of the horizon ``T`` (starts are decided in ``slot[:T]``). [-]"""
    job_minutes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Run time, shape ``(J,)``. [min]"""
    job_last_frac: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Share of its last occupied slot a one-piece run uses (energy), in (0, 1], ``(J,)``."""
    unplaced_cost: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Objective cost of leaving each job out of this run, shape ``(J,)``: the unplaced
    penalty × GPU-hours, or the terminal value where the job is deferrable. [kg]"""
    deferrable: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Jobs whose deadline allows a start at or after the horizon end, shape ``(J,)``."""
    gpu_cap: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), dtype=np.int64))
    """GPUs free per site, slot and type after running work, shape ``(S, T, G)``. [-]"""
    running_kw: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    """IT power of running work per site-slot, shape ``(S, T)``. [kW]"""
    running_gpus: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), dtype=np.int64))
    """GPUs held by running work, shape ``(S, T, G)``; a GPU carrying running slices counts
    once, however many slices it holds. [-]"""
    running_sliced_gpus: np.ndarray = field(
        default_factory=lambda: np.zeros((0, 0, 0), dtype=np.int64))
    """Of :attr:`running_gpus`, the GPUs carrying running slices
    (:attr:`~carbonsched.domain.RunningWork.gpu_index`), shape ``(S, T, G)``; new slices may
    share them (:func:`carbonsched.plan.slices.assign_runs`). [-]"""
    notes: list[str] = field(default_factory=list)
    """What the compilation assumed or dropped, for the plan's notes."""
    patterns: PiecePatterns | None = None
    """Piece patterns of preemptible jobs (:func:`enumerate_patterns`), beside ``options``;
    column generation appends the patterns it prices (:mod:`carbonsched.plan.colgen.pieces`),
    keeping every earlier position."""
    slot_minutes: int = SLOT_MINUTES
    """Length of a slot (:attr:`PlanningProblem.slot_minutes`). [min]"""
    commit_limit_kw: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    """Facility power allowed by grid-flexibility commitments per site-slot, ``inf`` outside
    every commitment window, shape ``(S, T)`` (:attr:`PlanningProblem.commitments`). [kW]"""

    @property
    def slot_hours(self) -> float:
        """Length of a slot in hours: kWh per kW of a whole slot. [h]"""
        return self.slot_minutes / 60.0

    @property
    def slots_per_hour(self) -> int:
        """Slots in an hour (1, 2 or 4); an inference demand covers this many. [-]"""
        return 60 // self.slot_minutes

    def inf_slots(self, d: int) -> range:
        """Slot positions inference demand ``d`` covers: every slot of its hour."""
        t = int(self.inf_hour[d])
        return range(t, t + self.slots_per_hour)

    @property
    def n_ext(self) -> int:
        """Slots of the extended axis ``T_ext`` (horizon plus tail). [-]"""
        return len(self.slot)

    @functools.cached_property
    def power_rhs_kw(self) -> np.ndarray:
        """Right-hand side of the planner's power rows, shape ``(S, T)``. [kW]

        :attr:`power_cap_kw` rounded down to a multiple of the site's *power unit*: the
        largest power, in whole milliwatts, that divides the IT draw of every job gang and of
        one inference GPU that may run at the site in any hour. Placements are whole gangs
        and whole GPUs, so whatever runs there draws a multiple of the unit and no plan is
        lost, while the LP relaxation no longer fills the fraction of a gang that the cap
        leaves over: with 0.4 kW per GPU and a 4.76 kW cap, 11 GPUs and not 11.9 (measured:
        the LP bound of 1k jobs × 16 sites × 48 h at load 0.6, seed 3, rises from 185.1 to
        190.1 kg against an optimum of 190.2; docs/benchmarks/planner-log.md#planner-3-11). The
        cap is kept as it is at a site where a draw is negative or not a whole number of
        milliwatts. The rounding is the GCD-based tightening of a row over integer variables
        (Achterberg, Bixby, Gu, Rothberg & Weninger, "Presolve reductions in mixed integer
        programming", INFORMS J. Comput. 32(2), 2020, doi:10.1287/ijoc.2018.0857).

        Computed once: the sets are not changed after :func:`compile_sets`. A multiple within
        a millionth of a unit above the cap (floating point: 0.3 / 0.1 = 2.9999999999999996)
        counts as fitting, never by more than 1e-9 kW.
        """
        cap = np.asarray(self.power_cap_kw, dtype=float)
        if cap.size == 0:
            return cap
        out = cap.copy()
        j = self.placeable
        for s in range(cap.shape[0]):
            kw = np.concatenate([self.job_kw[j[self.job_sites[j, s]]],
                                 self.inf_kw_per_gpu[self.inf_sites[:, s]]])
            if len(kw) == 0 or (kw < 0).any():
                continue
            milliwatts = kw[kw > 0] * 1e6
            whole = np.round(milliwatts)
            if len(whole) == 0 or np.abs(milliwatts - whole).max() > 1e-6 \
                    or whole.max() > 2 ** 53:
                continue
            unit_kw = float(np.gcd.reduce(whole.astype(np.int64))) / 1e6
            row = cap[s]
            fin = np.isfinite(row)
            k = np.floor(row[fin] / unit_kw + 1e-6)
            k = np.where(k * unit_kw <= row[fin] + 1e-9, k, k - 1)
            out[s, fin] = np.maximum(k, 0.0) * unit_kw
        return out

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
    full = pd.MultiIndex.from_product([site_ids, _signal_keys(problem, slot_level)],
                                      names=["site", "slot"])
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


def _signal_keys(problem: PlanningProblem, slot_level: pd.Index) -> pd.DatetimeIndex:
    """The signal timestamps each slot reads: the slot itself, or on a sub-hour grid its hour.

    Signals are hourly; on a 30- or 15-minute grid every slot takes its hour's value (forward
    fill). A signal frame with timestamps off the hour is refused there: it would be read at
    its hours only, silently dropping the rest.

    Raises
    ------
    InputError
        A sub-hour grid with signals not on the hour.
    """
    if getattr(problem, "slot_minutes", SLOT_MINUTES) == SLOT_MINUTES:
        return problem.slots
    if isinstance(slot_level, pd.DatetimeIndex) and len(slot_level):
        off = slot_level[slot_level != slot_level.floor("h")]
        if len(off):
            raise InputError(
                f"signals: timestamp {off[0].isoformat()} is not on the hour; on a "
                f"{problem.slot_minutes}-minute slot grid signals are hourly and each slot "
                "takes its hour's value")
    return problem.slots.floor("h")


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
    full = pd.MultiIndex.from_product([site_ids, _signal_keys(problem, sig.index.levels[1])],
                                      names=["site", "slot"])
    arr = sig[PUE_CAP_COLUMN].reindex(full).to_numpy(dtype=float).reshape(pue.shape)
    bad = np.isnan(arr) | (arr < pue - 1e-9)
    if bad.any():
        i, t = np.argwhere(bad)[0]
        raise InputError(
            f"signals: {PUE_CAP_COLUMN} for site {site_ids[i]!r} at "
            f"{problem.slots[t].isoformat()} is {arr[i, t]}, below the PUE {pue[i, t]} or "
            "missing; give the upper bound of the PUE interval for every site and slot")
    return arr


def commitment_limits(problem: PlanningProblem, site_ids: list[str],
                      slots: pd.DatetimeIndex) -> np.ndarray:
    """Facility power allowed per site-slot by the problem's commitments.

    Parameters
    ----------
    problem
        The problem; its ``commitments`` (:class:`carbonsched.flex.Commitment`).
    site_ids
        Site ids in the sets' order, length ``S``.
    slots
        The slot axis (hour starts, or sub-hour slots: each slot inside a commitment's hour
        window is limited), length ``T``.

    Returns
    -------
    numpy.ndarray
        ``(S, T)``: the lowest ``limit_kw`` of the commitments covering each cell, ``inf``
        elsewhere. [kW]

    Raises
    ------
    UnknownSiteError
        A commitment names a site that is not in the problem.
    """
    out = np.full((len(site_ids), len(slots)), np.inf)
    spos = {s: i for i, s in enumerate(site_ids)}
    for c in getattr(problem, "commitments", None) or []:
        if c.site not in spos:
            raise UnknownSiteError(c.site, site_ids)
        inside = (slots >= c.start) & (slots < c.end)
        row = out[spos[c.site]]
        row[inside] = np.minimum(row[inside], c.limit_kw)
    return out


def _check_slots(slots: pd.DatetimeIndex, slot_minutes: int = SLOT_MINUTES) -> None:
    slot_minutes = check_slot_minutes(slot_minutes)
    if not isinstance(slots, pd.DatetimeIndex) or slots.tz is None:
        raise TimeAxisError("planning slots must be a tz-aware UTC DatetimeIndex")
    if len(slots) == 0:
        raise TimeAxisError("planning slots are empty; give at least one hour")
    if slot_minutes == SLOT_MINUTES:
        if len(slots) > 1 and not ((slots[1:] - slots[:-1]) == HOUR).all():
            raise TimeAxisError("planning slots must be consecutive hours")
        if (slots != slots.floor("h")).any():
            raise TimeAxisError("planning slots must start on the hour")
        return
    step = pd.Timedelta(minutes=slot_minutes)
    if len(slots) > 1:
        gaps = slots[1:] - slots[:-1]
        bad = np.flatnonzero(gaps != step)
        if len(bad):
            raise TimeAxisError(
                f"planning slots must be consecutive {slot_minutes}-minute steps (the "
                f"problem's slot_minutes); {slots[bad[0]].isoformat()} to "
                f"{slots[bad[0] + 1].isoformat()} is {gaps[bad[0]]}")
    grid = f"{slot_minutes}min"
    if (slots != slots.floor(grid)).any():
        off = slots[slots != slots.floor(grid)][0]
        raise TimeAxisError(f"planning slot {off.isoformat()} is not on the "
                            f"{slot_minutes}-minute grid (minute a multiple of {slot_minutes})")


def continue_signal(arr: np.ndarray, n_ext: int, slots_per_hour: int = 1) -> np.ndarray:
    """Extend ``(S, T)`` horizon values to ``(S, n_ext)`` by :data:`CONTINUATION_RULE`.

    Slot ``T + k`` takes the value of slot ``T - P + (k mod P)``, ``P = min(24 h, T)`` in
    slots (24 × ``slots_per_hour``): each site's last forecast day repeats (a persistence
    forecast of the daily profile; a design choice of this project for the hours no forecast
    covers, named in the plan's notes).
    """
    n_t = arr.shape[1]
    if n_ext <= n_t:
        return arr[:, :n_ext]
    period = min(CONTINUATION_PERIOD_SLOTS * slots_per_hour, n_t)
    idx = np.arange(n_ext)
    src = np.where(idx < n_t, idx, n_t - period + (idx - n_t) % period)
    return arr[:, src]


def slot_fraction(minutes: np.ndarray, slot_minutes: int = SLOT_MINUTES
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Slots occupied and the used share of the last one for runs of ``minutes``.

    Returns
    -------
    n_slots, last_frac
        ``ceil(minutes / L)`` [-] and ``(minutes - L (n - 1)) / L`` in (0, 1] [-], ``L`` the
        slot length ``slot_minutes`` (60 by default).
    """
    minutes = np.asarray(minutes, dtype=np.int64)
    n = -(-minutes // slot_minutes)
    frac = (minutes - slot_minutes * (n - 1)) / slot_minutes
    return n.astype(np.int64), frac.astype(float)


def window_cost(rate: np.ndarray, n: int, frac: float) -> np.ndarray:
    """Cost of a run of ``n`` slots from each start: Σ rate, the last slot × ``frac``.

    The shared cost function of the planner: option costs, the greedy baselines and the
    terminal value all use it (column generation prices with the same weights).

    Parameters
    ----------
    rate
        Cost per slot of running, shape ``(S, T)`` (e.g. kg per kWh of IT energy).
    n, frac
        Slots occupied and the used share of the last one.

    Returns
    -------
    numpy.ndarray
        Shape ``(S, T)``; ``inf`` for starts whose run would pass the axis end.
    """
    n_s, n_t = rate.shape
    out = np.full((n_s, n_t), np.inf)
    if n > n_t or n < 1:
        return out
    cum = np.concatenate([np.zeros((n_s, 1)), np.cumsum(rate, axis=1)], axis=1)
    m = n_t - n + 1
    out[:, :m] = cum[:, n - 1: n - 1 + m] - cum[:, :m] + frac * rate[:, n - 1: n - 1 + m]
    return out


def _running_usage(problem: PlanningProblem, site_ids: list[str], gpos: dict[str, int],
                   slot_axis: pd.DatetimeIndex, n_g: int, slot: pd.Timedelta = SLOT
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPUs ``(S, T, G)``, IT kW ``(S, T)`` and sliced GPUs ``(S, T, G)`` held by running work.

    A running slice (``gpu_index`` set) holds its GPU once per slot, however many running
    slices share that GPU (:attr:`PlanningProblem.running`).

    Raises
    ------
    UnknownSiteError
        Running work at a site the problem lacks.
    InputError
        Running work of a GPU type its site lacks, or not a RunningWork.
    """
    n_s, n_t = len(site_ids), len(slot_axis)
    gpus = np.zeros((n_s, n_t, max(n_g, 0)), dtype=np.int64)
    sliced = np.zeros_like(gpus)
    kw = np.zeros((n_s, n_t))
    spos = {s: i for i, s in enumerate(site_ids)}
    seen: set[tuple[int, int, int, int]] = set()
    t0 = slot_axis[0]
    for r in problem.running:
        if not isinstance(r, RunningWork):
            raise InputError(f"running work must be RunningWork entries, got {type(r).__name__}")
        if r.site not in spos:
            raise UnknownSiteError(r.site, site_ids)
        site = problem.sites[spos[r.site]]
        if r.gpus > 0 and site.gpu_count(r.gpu_type) == 0:
            raise InputError(f"running work {r.job_id or ''!r} at site {r.site!r} uses GPU type "
                             f"{r.gpu_type!r}, which the site does not have")
        a = 0 if r.start is None else max(int(math.floor((r.start - t0) / slot)), 0)
        b = min(int(math.ceil((r.end - t0) / slot - 1e-9)), n_t)
        if b <= a:
            continue
        s = spos[r.site]
        if r.gpus > 0 and r.gpu_index is not None:
            g = gpos[r.gpu_type]
            for t in range(a, b):
                if (s, g, r.gpu_index, t) not in seen:
                    seen.add((s, g, r.gpu_index, t))
                    gpus[s, t, g] += 1
                    sliced[s, t, g] += 1
        elif r.gpus > 0:
            gpus[s, a:b, gpos[r.gpu_type]] += r.gpus
        kw[s, a:b] += r.it_power_kw
    return gpus, kw, sliced


def compile_sets(problem: PlanningProblem, signals: pd.DataFrame | None = None, *,
                 columns: bool = True) -> PlanSets:
    """Compile a problem into integer-indexed sets, pre-check reasons and feasible options.

    Parameters
    ----------
    problem
        The planning problem.
    signals
        Signals to use instead of ``problem.signals`` (same layout), e.g. actuals for scoring.
    columns
        Enumerate the model's columns (one-piece options and piece patterns); ``False`` for
        callers that only read the arrays (scoring, the power report).

    Returns
    -------
    PlanSets
        Over the extended time axis (horizon plus the tail options may run into).

    Raises
    ------
    InputError
        Duplicate site or job ids, incomplete signals, an inference demand outside the slots
        or running past the horizon's end, or inference demands of one area, hour and GPU
        type at different powers per GPU.
    UnknownSiteError
        Running work at a site the problem lacks.
    TimeAxisError
        Slots that are not consecutive tz-aware hours.
    """
    sm = check_slot_minutes(getattr(problem, "slot_minutes", SLOT_MINUTES))
    _check_slots(problem.slots, sm)
    slot = pd.Timedelta(minutes=sm)
    sph = 60 // sm                      # slots per hour
    site_ids = [s.id for s in problem.sites]
    if len(set(site_ids)) != len(site_ids):
        raise InputError("duplicate site ids in the planning problem; ids must be unique")
    job_ids = [j.id for j in problem.jobs]
    if len(set(job_ids)) != len(job_ids):
        dup = pd.Index(job_ids)[pd.Index(job_ids).duplicated()][0]
        raise InputError(f"duplicate job id {dup!r}; every job needs a unique id")
    ci_h, pue_h, sur_h = signal_arrays(problem, signals)
    pue_cap_h = pue_cap_array(problem, signals)
    gtypes = sorted({g for s in problem.sites for g in s.gpus} |
                    {d.gpu_type for d in problem.inference})
    gpos = {g: i for i, g in enumerate(gtypes)}
    spos = {s: i for i, s in enumerate(site_ids)}
    n_s, n_t, n_g = len(site_ids), len(problem.slots), len(gtypes)
    count = np.zeros((n_s, n_g), dtype=np.int64)
    node = np.zeros((n_s, n_g), dtype=np.int64)     # GPUs per node (the node shape)
    for i, s in enumerate(problem.sites):
        for g, pool in s.gpus.items():
            count[i, gpos[g]] = pool.count
            node[i, gpos[g]] = pool.node_gpus
    # a gang of at most the smallest node of its type fits one node everywhere (no shape check)
    one_node_max = np.where(count > 0, node, np.iinfo(np.int64).max).min(axis=0) if n_s else \
        np.zeros(n_g, dtype=np.int64)
    it_cap = np.array([s.it_power_cap_kw for s in problem.sites], dtype=float)
    fac_cap = np.array([np.inf if s.facility_power_cap_kw is None else s.facility_power_cap_kw
                        for s in problem.sites], dtype=float)

    n_j = len(problem.jobs)
    t0 = problem.slots[0]
    j_gpus = np.array([j.gpus for j in problem.jobs], dtype=np.int64)
    j_min = np.array([j.duration_minutes for j in problem.jobs], dtype=np.int64)
    j_dur, j_frac = slot_fraction(j_min, sm)
    j_kw = np.array([j.it_power_kw for j in problem.jobs], dtype=float)
    j_g = np.array([gpos.get(j.gpu_type, -1) for j in problem.jobs], dtype=np.int64)
    # UTC nanoseconds → slots from the horizon start (integer arithmetic until the division)
    slot_ns = slot.value
    es = (np.array([j.earliest_start.value for j in problem.jobs], dtype=np.int64)
          - t0.value) / slot_ns
    dl_ns = np.array([j.deadline.value for j in problem.jobs], dtype=np.int64) - t0.value
    dl = dl_ns / slot_ns
    # latest start (in slots) that still ends by the deadline: never cut to the horizon
    end_by = (dl_ns - j_min * 60_000_000_000) / slot_ns
    first = np.maximum(np.ceil(es - 1e-9), 0).astype(np.int64) if n_j else \
        np.zeros(0, np.int64)
    last_any = np.floor(end_by + 1e-9).astype(np.int64) if n_j else np.zeros(0, np.int64)
    last = np.minimum(last_any, n_t - 1)
    deferrable = last_any >= np.maximum(first, n_t)
    # the extended axis: as far as the latest-ending in-horizon start needs
    ends = np.where(last >= first, last + j_dur, 0)
    ends = np.append(ends[j_g >= 0], n_t)
    # piece patterns are built on the hourly grid only (see enumerate_patterns)
    extra = _pattern_reach(problem, first, last, n_t) if n_j and sm == SLOT_MINUTES else 0
    n_ext = int(max(ends.max(), extra, n_t))
    ext = pd.date_range(t0, periods=n_ext, freq="h" if sm == SLOT_MINUTES else f"{sm}min",
                        name="slot")
    ci, pue, sur, pue_cap = (continue_signal(a, n_ext, sph)
                             for a in (ci_h, pue_h, sur_h, pue_cap_h))
    run_gpus, run_kw, run_sliced = _running_usage(problem, site_ids, gpos, ext, n_g, slot)
    # a grid connection of F kW allows F / PUE kW of IT power in an hour (facility = IT × PUE)
    cap_phys = np.minimum(it_cap[:, None], fac_cap[:, None] / pue_cap)
    cap = cap_phys.max(axis=1)  # the most a site allows in any hour
    # a commitment reserves its reduction: facility power <= baseline - reduction
    commit = commitment_limits(problem, site_ids, ext)
    cap_phys = np.minimum(cap_phys, commit / pue_cap)
    cap_st = np.maximum(cap_phys - run_kw, 0.0)
    sur = np.maximum(sur - run_kw * pue, 0.0)
    gpu_cap = np.maximum(count[:, None, :] - run_gpus, 0)

    allowed = np.zeros((n_j, n_s), dtype=bool)
    reasons: dict[int, tuple[ReasonCode, str]] = {}
    known_types = {g for s in problem.sites for g in s.gpus}
    horizon_end = t0 + n_t * slot
    grid_word = "the hour" if sm == SLOT_MINUTES else f"the {sm}-minute grid"
    everywhere = lambda s: True  # noqa: E731 - a gang within one node at every site
    for k, job in enumerate(problem.jobs):
        g = j_g[k]
        lo, hi = max(int(first[k]), 0), min(int(last[k]) + int(j_dur[k]), n_ext)
        reason, powered = site_precheck(
            job, problem.sites, spos, known_types,
            count[:, g] if g >= 0 else count[:, :0].sum(axis=1),
            everywhere if g < 0 or job.gpus <= one_node_max[g] else
            (lambda s, g=g, n=job.gpus: n <= node[s, g] or n % node[s, g] == 0),
            # the most IT power each site allows in any hour the job could occupy
            lambda lo=lo, hi=hi: cap_phys[:, lo:hi].max(axis=1) if hi > lo else cap,
            it_cap)
        if reason is None:
            reason = window_precheck(job, dl[k], int(first[k]), int(last_any[k]),
                                     int(last[k]), t0, horizon_end, grid_word)
        if reason is not None:
            reasons[k] = reason
            continue
        allowed[k, powered] = True

    n_d = len(problem.inference)
    inf_hour = np.zeros(n_d, dtype=np.int64)
    inf_g = np.zeros(n_d, dtype=np.int64)
    inf_gpus = np.zeros(n_d, dtype=np.int64)
    inf_kw = np.zeros(n_d, dtype=float)
    inf_sites = np.zeros((n_d, n_s), dtype=bool)
    slot_pos = {ts: i for i, ts in enumerate(problem.slots)}
    kw_of_key: dict[tuple, float] = {}
    for d, dem in enumerate(problem.inference):
        kw_key = kw_of_key.setdefault((dem.area, dem.hour, dem.gpu_type), dem.power_per_gpu_kw)
        if kw_key != dem.power_per_gpu_kw:
            # a plan's placements merge the demands of one (area, hour, GPU type) per site,
            # and the recount prices them at one power per GPU
            raise InputError(
                f"inference demands of area {dem.area!r} at {dem.hour.isoformat()} "
                f"({dem.gpu_type}) give {kw_key!r} and {dem.power_per_gpu_kw!r} kW per GPU; "
                "demands of one area, hour and GPU type are served by GPUs of one power: give "
                "them the same power_per_gpu_kw")
        if dem.hour not in slot_pos:
            raise InputError(
                f"inference demand of area {dem.area!r} at {dem.hour.isoformat()} is outside "
                "the planning slots; drop it or widen the horizon")
        inf_hour[d] = slot_pos[dem.hour]
        if inf_hour[d] + sph > n_t:
            raise InputError(
                f"inference demand of area {dem.area!r} at {dem.hour.isoformat()} holds for "
                f"its whole hour, but the horizon ends at {horizon_end.isoformat()}; drop it "
                "or end the horizon on the hour")
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
    # a fractional job asks for its share of one GPU (gpu_milli / 1000, MIG compute slices / 7):
    # leaving it out costs that share of a GPU-hour, so the plan places the most GPU work
    j_share = np.array([j.gpu_share for j in problem.jobs], dtype=float)
    unplaced_cost = penalty * j_gpus * j_share * j_min / 60.0
    sets = PlanSets(
        problem=problem, site=pd.Index(site_ids, name="site"), slot=ext,
        gpu_type=pd.Index(gtypes, name="gpu_type"), ci_g_per_kwh=ci, pue=pue, surplus_kw=sur,
        gpu_count=count, power_cap_kw=cap_st, it_power_cap_kw=it_cap,
        facility_power_cap_kw=fac_cap, pue_cap=pue_cap, job_gpus=j_gpus, job_dur=j_dur,
        job_kw=j_kw, job_gtype=j_g, job_first=first, job_last=last, job_sites=allowed,
        reasons=reasons, inf_hour=inf_hour, inf_gtype=inf_g, inf_gpus=inf_gpus,
        inf_kw_per_gpu=inf_kw, inf_sites=inf_sites, penalty_per_gpu_hour=penalty,
        n_horizon=n_t, job_minutes=j_min, job_last_frac=j_frac, unplaced_cost=unplaced_cost,
        deferrable=deferrable & allowed.any(axis=1), gpu_cap=gpu_cap, running_kw=run_kw,
        running_gpus=run_gpus, running_sliced_gpus=run_sliced, slot_minutes=sm,
        commit_limit_kw=commit,
    )
    sets.unplaced_cost = terminal_values(sets, last_any, unplaced_cost)
    if (run_gpus > count[:, None, :]).any() or (run_kw > cap_phys + 1e-9).any():
        sets.notes.append("running work already exceeds a site's GPUs or power cap in some "
                          "hour; no new work is planned there")
    if columns:
        sets.options = enumerate_options(sets)
        sets.patterns = enumerate_patterns(sets)
        if sm != SLOT_MINUTES:
            n_pre = sum(1 for k in sets.placeable if problem.jobs[k].max_pieces >= 2)
            if n_pre:
                sets.notes.append(
                    f"slots: {n_pre} preemptible job(s) planned in one piece: piece patterns "
                    f"are built on the hourly grid only, not on this {sm}-minute grid")
    return sets


def _pattern_reach(problem: PlanningProblem, first: np.ndarray, last: np.ndarray,
                   n_t: int) -> int:
    """Extended-axis length that piece patterns of preemptible jobs may need (0 if none)."""
    reach = 0
    t0 = problem.slots[0]
    for k, job in enumerate(problem.jobs):
        if job.max_pieces < 2 or last[k] < first[k]:
            continue
        minutes = job.duration_minutes + (job.max_pieces - 1) * job.checkpoint_overhead_minutes
        n_max = -(-minutes // SLOT_MINUTES)
        dl_slot = int(math.ceil((job.deadline - t0) / SLOT - 1e-9))
        reach = max(reach, min(dl_slot, n_t - 1 + int(n_max)))
    return reach


def terminal_values(sets: PlanSets, last_any: np.ndarray, unplaced_cost: np.ndarray
                    ) -> np.ndarray:
    """Cost of leaving each job out of this run: the terminal value where deferrable.

    For a deferrable job (:attr:`PlanSets.deferrable`), the grid emissions of its best start
    at or after the horizon end that ends by its deadline, at the cheapest allowed site, on
    the continuation signals (:data:`TERMINAL_VALUE_RULE`), × ``1 + DEFER_MARGIN``; the
    unplaced penalty for every other job. [kg]
    """
    out = unplaced_cost.copy()
    idx = np.flatnonzero(sets.deferrable)
    if len(idx) == 0:
        return out
    n_t = sets.n_horizon
    sph = sets.slots_per_hour
    period = min(CONTINUATION_PERIOD_SLOTS * sph, n_t)
    rate_h = sets.pue[:, :n_t] * sets.ci_g_per_kwh[:, :n_t] / 1000.0
    cache: dict[tuple[int, float], np.ndarray] = {}
    for k in idx:
        n, f = int(sets.job_dur[k]), float(sets.job_last_frac[k])
        if (n, f) not in cache:
            # starts T .. T + P - 1 cover every continuation start (the profile is periodic)
            rate = continue_signal(rate_h, n_t + period + n, sph)
            cache[(n, f)] = window_cost(rate, n, f)[:, n_t: n_t + period]
        starts_ok = np.arange(period) <= (last_any[k] - n_t)
        w = cache[(n, f)][sets.job_sites[k]][:, starts_ok]
        if w.size:
            out[k] = sets.job_kw[k] * float(w.min()) * sets.slot_hours * (1.0 + DEFER_MARGIN)
    return out


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


def placement_positions(sets: PlanSets, placements) -> np.ndarray:
    """``(P, 3)`` ``(job, site, start slot)`` positions of a plan's placements.

    Parameters
    ----------
    sets
        Compiled sets the plan was made on.
    placements
        The plan's placements (``job_id``, ``site``, ``start`` each).

    Raises
    ------
    ValueError
        A placement names a job or site the sets do not know.
    """
    jpos = {jb.id: k for k, jb in enumerate(sets.problem.jobs)}
    spos = {s: i for i, s in enumerate(sets.site)}
    t0 = sets.slot[0]
    step = HOUR * sets.slot_hours
    try:
        return np.array([(jpos[p.job_id], spos[p.site], int(round((p.start - t0) / step)))
                         for p in placements], dtype=np.int64).reshape(-1, 3)
    except KeyError as e:
        raise ValueError(f"plan names {e.args[0]!r}, which the planning sets do not know"
                         ) from None


def tiers_served(need: np.ndarray, masks: Sequence[np.ndarray], at: np.ndarray) -> np.ndarray:
    """GPUs served at each site given back to the demand rows of one (area, hour, GPU type).

    The rows must come tightest first. Each mask in turn says which rows may take which sites'
    GPUs; every row takes what it may, in order, until its need is met. With one area's SLOs
    as the first mask, the sites within a tighter SLO are a subset of those within a looser
    one, so this pass gives the most GPUs any assignment could give within the SLOs (Hall's
    condition on nested sets); later masks place the rest.

    Parameters
    ----------
    need
        ``(R,)`` GPUs each row asks for. [-]
    masks
        ``(R, S)`` bool arrays, tried in order.
    at
        ``(S,)`` GPUs served at each site. [-] Not changed.

    Returns
    -------
    numpy.ndarray
        ``(len(masks), R, S)`` int64 GPUs each mask's pass gave each row from each site;
        GPUs no pass could give are in none of them. [-]
    """
    at = np.array(at, dtype=np.int64)
    left = np.array(need, dtype=np.int64)
    out = np.zeros((len(masks), len(left), len(at)), dtype=np.int64)
    for k, mask in enumerate(masks):
        for d in range(len(left)):
            for s in np.flatnonzero((at > 0) & mask[d]):
                take = min(int(at[s]), int(left[d]))
                if take > 0:
                    out[k, d, s] = take
                    at[s] -= take
                    left[d] -= take
    return out


def inference_positions(sets: PlanSets, inference) -> np.ndarray:
    """``(D, S)`` GPUs of each inference demand row served at each site by a plan.

    A plan's inference placements merge the demands of one (area, hour, GPU type) per site,
    and such demands may carry different SLOs (tiers). The GPUs are given back to the demand
    rows tightest first (fewest sites within the SLO, then input order), each row taking from
    the sites within its SLO (:func:`tiers_served`). The sites within a tighter SLO of one area
    are a subset of those within a looser one, so this finds an assignment within every SLO
    whenever one exists (Hall's condition on nested sets, the one
    :func:`~carbonsched.plan.result.recount_violations` checks). GPUs no row can take within
    its SLO go to rows with GPUs left, outside it, so the counts still add up and a checker
    sees the breach.

    Parameters
    ----------
    sets
        Compiled sets the plan was made on.
    inference
        The plan's inference placements (``area``, ``hour``, ``gpu_type``, ``site``, ``gpus``).

    Returns
    -------
    numpy.ndarray
        ``(D, S)`` int64 GPUs of each demand row (:attr:`PlanSets.inf_gpus` order) served at
        each site. [-]

    Raises
    ------
    ValueError
        A placement names a site the sets do not know, or serves an (area, hour, GPU type)
        with more GPUs than its demands ask for.
    """
    spos = {s: i for i, s in enumerate(sets.site)}
    rows: dict[tuple, list[int]] = {}
    for d in np.lexsort((np.arange(len(sets.inf_gpus)), sets.inf_sites.sum(axis=1))).tolist():
        dem = sets.problem.inference[d]
        rows.setdefault((dem.area, dem.hour, dem.gpu_type), []).append(d)
    served: dict[tuple, np.ndarray] = {}
    for ip in inference:
        if ip.site not in spos:
            raise ValueError(f"plan names {ip.site!r}, which the planning sets do not know")
        key = (ip.area, ip.hour, ip.gpu_type)
        served.setdefault(key, np.zeros(len(sets.site), dtype=np.int64))[spos[ip.site]] += ip.gpus
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    for key, at in served.items():
        ds = rows.get(key, [])
        # within each row's SLO first, then what is left anywhere
        given = tiers_served(sets.inf_gpus[ds], [sets.inf_sites[ds],
                                                 np.ones((len(ds), len(at)), dtype=bool)], at)
        alloc[ds] += given.sum(axis=0)
        if (extra := int(at.sum() - given.sum())) > 0:
            area, hour, gpu_type = key
            raise ValueError(f"plan serves inference {area!r} at {hour} ({gpu_type}) with "
                             f"{extra} GPUs more than demanded")
    return alloc


def option_costs(sets: PlanSets, options: np.ndarray) -> np.ndarray:
    """Grid-only emissions of each option (no surplus), Σ_t w_t h kW × PUE × CI / 1000. [kg]

    ``w_t`` is 1 in every occupied slot but the last, which is charged the share of it the
    job runs (:attr:`PlanSets.job_last_frac`), and ``h`` the slot length in hours
    (:attr:`PlanSets.slot_hours`): a 90-minute job pays 1.5 hours of energy on any grid.

    Parameters
    ----------
    options
        ``(O, 3)`` positions from :func:`enumerate_options`.
    """
    rate = sets.cost_per_kwh
    cum = np.concatenate([np.zeros((len(sets.site), 1)), np.cumsum(rate, axis=1)], axis=1)
    j, s, t = options[:, 0], options[:, 1], options[:, 2]
    d = sets.job_dur[j]
    last = t + d - 1
    return sets.job_kw[j] * (cum[s, last] - cum[s, t] + sets.job_last_frac[j] * rate[s, last]
                             ) * sets.slot_hours


@dataclass
class PiecePatterns:
    """Columns that run a preemptible job in several pieces at one site.

    Pattern ``p`` runs job ``job[p]`` at site ``site[p]`` in ``len(pieces[p])`` pieces, each
    ``(start slot, minutes, overhead minutes)`` in time order; every piece but the first
    begins with the job's ``checkpoint_overhead_minutes`` (restore), at full power.
    """

    job: np.ndarray
    site: np.ndarray
    cost_kg: np.ndarray
    """Grid emissions of the pattern, overhead included (no surplus), as option_costs. [kg]"""
    pieces: list[list[tuple[int, int, int]]]

    def __len__(self) -> int:
        return len(self.job)

    def cover(self, sets: PlanSets) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                             np.ndarray]:
        """Covered cells: pattern, site, slot, GPU type and energy share, one row per cell."""
        pat, site, slot, energy = [], [], [], []
        for p, runs in enumerate(self.pieces):
            for t, minutes, _over in runs:
                n = -(-minutes // SLOT_MINUTES)
                w = np.ones(n)
                w[-1] = (minutes - SLOT_MINUTES * (n - 1)) / SLOT_MINUTES
                pat.extend([p] * n)
                site.extend([int(self.site[p])] * n)
                slot.extend(range(t, t + n))
                energy.extend(w.tolist())
        pat_a = np.asarray(pat, dtype=np.int64)
        return (pat_a, np.asarray(site, dtype=np.int64), np.asarray(slot, dtype=np.int64),
                sets.job_gtype[self.job[pat_a]] if len(pat_a) else np.zeros(0, np.int64),
                np.asarray(energy, dtype=float))


def empty_patterns() -> PiecePatterns:
    """Piece patterns of a plan with no preemptible job (every array empty)."""
    return PiecePatterns(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), [])


def best_piece_pattern(rate: np.ndarray, first: int, n_decide: int, last_slot: np.ndarray,
                       n_slots: int, frac: float, k: int
                       ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Cheapest choice of ``n_slots`` slots in exactly ``k`` runs, per site (dynamic programme).

    Parameters
    ----------
    rate
        Cost of running in each slot, shape ``(S, T)`` (``inf`` where not allowed). [kg]
    first
        First slot a run may use. [-]
    n_decide
        Runs must start before this slot (the horizon); they may continue past it. [-]
    last_slot
        Latest slot the final (``n_slots``-th) slot may be, per site, shape ``(S,)``. [-]
    n_slots, frac
        Slots to take and the share of the last one charged. [-]
    k
        Runs (pieces); consecutive runs are separated by at least one free slot. [-]

    Returns
    -------
    cost, taken
        Cost per site ``(S,)`` (``inf`` if impossible) and, per site, the taken slot
        positions in time order.
    """
    n_s, n_t = rate.shape
    inf = np.inf
    n = n_slots
    # IN[s, r, m]: slot t taken, r runs started, m slots taken; OUT: slot t free
    cur_in = np.full((n_s, k + 1, n + 1), inf)
    cur_out = np.full((n_s, k + 1, n + 1), inf)
    cur_out[:, 0, 0] = 0.0
    best = np.full(n_s, inf)
    best_t = np.full(n_s, -1, dtype=np.int64)
    hist_in, hist_out = [], []      # per t: True = "continued" / "came from IN"
    top = int(min(n_t, max(last_slot.max(initial=-1) + 1, 0)))
    for t in range(first, top):
        w = np.ones(n + 1)
        w[n] = frac
        c = rate[:, t][:, None, None] * w[None, None, 1:]            # cost of the m-th slot
        cont = cur_in[:, :, :-1] + c                                   # (S, k+1, n)
        new = np.full_like(cont, inf)
        if t < n_decide:
            new[:, 1:, :] = cur_out[:, :-1, :-1] + c[:, :, :]
        nxt_in = np.full_like(cur_in, inf)
        took_cont = cont <= new
        nxt_in[:, :, 1:] = np.where(took_cont, cont, new)
        # the final slot must be early enough to end by the deadline
        late = t > last_slot
        nxt_in[late, :, n] = inf
        from_in = cur_in < cur_out
        nxt_out = np.where(from_in, cur_in, cur_out)
        hist_in.append(took_cont)
        hist_out.append(from_in)
        done = nxt_in[:, k, n]
        better = done < best
        best = np.where(better, done, best)
        best_t = np.where(better, t, best_t)
        cur_in, cur_out = nxt_in, nxt_out
    taken: list[np.ndarray] = []
    for s in range(n_s):
        if not np.isfinite(best[s]):
            taken.append(np.zeros(0, dtype=np.int64))
            continue
        t, r, m, state_in = int(best_t[s]), k, n, True
        slots = []
        while m > 0:
            i = t - first
            if state_in:
                slots.append(t)
                if hist_in[i][s, r, m - 1]:
                    m -= 1
                else:
                    r, m, state_in = r - 1, m - 1, False
            else:
                state_in = bool(hist_out[i][s, r, m])
            t -= 1
        taken.append(np.array(slots[::-1], dtype=np.int64))
    return best, taken


def enumerate_patterns(sets: PlanSets) -> PiecePatterns:
    """Piece patterns of every preemptible job, beside its one-piece options.

    For each placeable job with ``max_pieces >= 2`` and each allowed site, and for each piece
    count ``k = 2 .. max_pieces``, the cheapest way to run it in exactly ``k`` pieces
    (:func:`best_piece_pattern` on the slot costs ``kW × PUE × CI / 1000``): ``k`` runs of
    whole slots separated by at least one free slot, every run starting inside the horizon,
    the first at or after the earliest start, the last ending by the deadline. Each resumed
    piece adds ``checkpoint_overhead_minutes`` of run time at full power, so ``k`` pieces
    take ``ceil((duration + (k - 1) × overhead) / 60)`` slots, the last charged its fraction.
    A pattern is kept only when it is cheaper than the job's best one-piece option at that
    site (it can only be chosen to save emissions or to fit around other work), and only
    when every resumed piece does some work (run time above its overhead).

    Returns
    -------
    PiecePatterns
    """
    jobs = [int(j) for j in sets.placeable if sets.problem.jobs[j].max_pieces >= 2]
    if not jobs or sets.slot_minutes != SLOT_MINUTES:
        # hourly grid only: a sub-hour grid plans preemptible jobs in one piece (a plan note)
        return empty_patterns()
    t0 = sets.slot[0]
    n_t = sets.pue.shape[1]
    cost = sets.cost_per_kwh
    one: dict[tuple[int, int], float] = {}
    mine = sets.options[np.isin(sets.options[:, 0], jobs)] if len(sets.options) else \
        sets.options
    if len(mine):
        c1 = option_costs(sets, mine)
        for (j, s, _t), c in zip(mine.tolist(), c1.tolist(), strict=True):
            one[(j, s)] = min(one.get((j, s), np.inf), c)
    out_j, out_s, out_c, out_p = [], [], [], []
    for j in jobs:
        job = sets.problem.jobs[j]
        o = job.checkpoint_overhead_minutes
        kw = float(sets.job_kw[j])
        where = np.flatnonzero(sets.job_sites[j])          # the DP runs on allowed sites only
        rate = kw * cost[where]
        dl_slots = (job.deadline - t0) / SLOT
        for k in range(2, job.max_pieces + 1):
            minutes = job.duration_minutes + (k - 1) * o
            n = -(-minutes // SLOT_MINUTES)
            frac = (minutes - SLOT_MINUTES * (n - 1)) / SLOT_MINUTES
            last_slot = int(math.floor(dl_slots - frac + 1e-9))
            if last_slot - int(sets.job_first[j]) + 1 < n + k - 1:
                break            # not enough room for k pieces and their gaps
            best, taken = best_piece_pattern(
                rate, int(sets.job_first[j]), sets.n_horizon,
                np.full(len(where), min(last_slot, n_t - 1)), n, frac, k)
            for i in np.flatnonzero(np.isfinite(best)):
                s = int(where[i])
                if best[i] >= one.get((j, s), np.inf) - 1e-12:
                    continue
                runs = np.split(taken[i], np.flatnonzero(np.diff(taken[i]) > 1) + 1)
                pieces = []
                for q, r in enumerate(runs):
                    run_min = SLOT_MINUTES * len(r) if q < len(runs) - 1 else \
                        SLOT_MINUTES * (len(r) - 1) + int(round(frac * SLOT_MINUTES))
                    pieces.append((int(r[0]), int(run_min), o if q else 0))
                if len(pieces) != k or any(m <= ov for _t, m, ov in pieces):
                    continue
                out_j.append(j)
                out_s.append(s)
                out_c.append(float(best[i]))
                out_p.append(pieces)
    if not out_j:
        return empty_patterns()
    return PiecePatterns(np.array(out_j, dtype=np.int64), np.array(out_s, dtype=np.int64),
                         np.array(out_c), out_p)
