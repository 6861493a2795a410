"""The rolling-horizon runner: plan over ``H`` hours, commit only what starts before the next run.

Each run is issued at ``t`` and plans every pending job over the horizon ``[t, t + H)`` (default
``H`` = 72 h) on the signals handed to it (forecasts for every hour of the horizon, or the actual
signals for the oracle). Decisions are **committed** only for placements that start before the
next run at ``t + run_every`` (default 24 h); every later placement stays **pending** (its plan is
kept as a tentative placement) and is planned again at the next run with fresher forecasts, so a
carried-over job moves only while it has not started. Committed placements are never revisited:
they hold their GPUs and power in every later run (:func:`running_work`, the planner's
``PlanningProblem.running``). A preemptible job planned in pieces is committed whole (every
piece) when its first piece starts before the next run.

A job's own deadline bounds when it may start, in any later run; it is never cut to a run's
horizon: a job that the horizon cannot hold yet stays pending. A pending job whose latest start
(``deadline − duration``) is before the issue time — or that the run could not place and whose
latest start is before the next run — ends with ``DeadlinePassed`` and a reason. Jobs that can
never run (unknown GPU type, a gang larger than any allowed site, no allowed site in the
catalog) end at once with the planner's reason.

End-of-horizon rule: the planner's own (``carbonsched.plan.sets``): a job whose deadline lies
beyond the horizon may run past its end on continued signals, or be deferred
(``DeferredPastHorizon``) when its terminal value — its best start after the horizon — is
cheaper; a deferred job simply stays pending for a later run.

The core (:class:`RollingPlanner`) is in memory, so :mod:`carbonsched.evaluate.replay` drives it
run by run;
:mod:`carbonsched.store.rolling` persists its state between the service's cron runs.

Sources: the rolling-horizon (receding-horizon) scheme, Sethi & Sorger, "A theory of rolling
horizon decision making", Annals of Operations Research 29 (1991), doi:10.1007/BF02283607.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.domain import (
    InferenceDemand,
    InferencePlacement,
    Job,
    JobState,
    Placement,
    ReasonCode,
    RunningWork,
    Site,
    Unplaced,
)
from carbonsched.errors import InputError
from carbonsched.plan import PlanningProblem, PlanResult, WarmStart, greedy_plan, solve_plan
from carbonsched.timeaxis import HOUR, hourly_slots, require_aware

DEFAULT_HORIZON_HOURS = 72
"""Hours each rolling run plans ahead. [h]"""
DEFAULT_RUN_EVERY_HOURS = 24
"""Hours between two rolling runs: placements starting before the next run are committed. [h]"""

TERMINAL_REASONS = frozenset({ReasonCode.UNKNOWN_GPU_TYPE, ReasonCode.DATA_RESIDENCY,
                              ReasonCode.GANG_TOO_LARGE, ReasonCode.GANG_NOT_WHOLE_NODES,
                              ReasonCode.DOMAIN_TOO_SMALL, ReasonCode.NO_PAYLOAD})
"""Planner reasons that no later run can change (the catalog, not the hour, forbids the job)."""

Planner = Callable[..., PlanResult]
"""``planner(problem) -> PlanResult``, e.g. :func:`milp_planner`; with
``RollingPlanner(warm=True)`` it is called as ``planner(problem, start=WarmStart)`` from the
second run on (:meth:`RollingPlanner.warm_start`)."""


def milp_planner(time_limit_s: float = 60.0, mip_gap: float = 0.01,
                 solver: str = "highs") -> Planner:
    """The MILP planner (:func:`carbonsched.plan.solve_plan`) with fixed limits."""
    def plan(problem: PlanningProblem, start: WarmStart | None = None) -> PlanResult:
        return solve_plan(problem, solver=solver, time_limit_s=time_limit_s, mip_gap=mip_gap,
                          start=start)
    return plan


@dataclass(frozen=True)
class JobRecord:
    """Where one job stands in the rolling plan.

    Attributes
    ----------
    state
        ``Pending`` (not committed; may carry a tentative ``placement``), ``Dispatched``
        (committed, not yet started at ``as_of``), ``Running``, ``Succeeded`` (its committed run
        ended) or ``Failed`` (never runs: ``reason`` says why).
    reason, detail
        Reason code and a sentence for a person.
    placements
        The committed placement (one per piece), or the latest tentative one of a pending job.
    """

    job_id: str
    state: JobState
    reason: ReasonCode | None = None
    detail: str = ""
    placements: tuple[Placement, ...] = ()


@dataclass
class RollingState:
    """What carries from one run to the next.

    Attributes
    ----------
    pending
        Jobs not committed yet, by id (their own deadlines).
    tentative
        The latest run's placement of each pending job that it placed after the next run's
        issue time (not committed; re-planned next run).
    committed
        Committed placements by job id (dispatched; running once their start has passed).
    ended
        Jobs that will never run, by id, with the reason (``DeadlinePassed`` or a planner
        reason no later run can change).
    last_issued_at
        Issue time of the latest run (``None`` before the first).
    jobs
        Every job known (pending, committed or ended), by id. A state the service loads for
        a run (:meth:`carbonsched.store.rolling_state.RollingStore.load` with ``as_of``)
        holds only what the run needs: its pending jobs, the committed ones still running,
        and the rows of the ids it is given; not the jobs long over.
    inference
        Inference GPUs committed per area, site and hour (each run commits the hours before
        the next run), for :meth:`RollingPlanner.committed_plan`.
    carried
        The latest run's column-generation multipliers and column pool
        (:class:`~carbonsched.plan.colgen.warm.CarriedDuals`, its result's ``carry``) for the
        next run's warm start (issue 36 item 2), or ``None``. Kept in memory only (the store
        keeps the jobs, not this): a state loaded from the store has none, and the next run
        starts its multipliers cold and says so (``carried_missing``).
    carried_missing
        Why ``carried`` is ``None``, for the next run's ``solver.warm_start``.
    unreadable
        Pending jobs whose stored spec the job schema now refuses (stored before one of its
        rules tightened), by id, with their ``InvalidSpec`` detail (which names the schema's
        message): read without their payload, and ended (``InvalidSpec``) by the next run.
    """

    pending: dict[str, Job] = field(default_factory=dict)
    tentative: dict[str, list[Placement]] = field(default_factory=dict)
    committed: dict[str, list[Placement]] = field(default_factory=dict)
    ended: dict[str, Unplaced] = field(default_factory=dict)
    last_issued_at: pd.Timestamp | None = None
    jobs: dict[str, Job] = field(default_factory=dict)
    inference: list[InferencePlacement] = field(default_factory=list)
    carried: Any = None
    carried_missing: str = "no run in this process has carried its multipliers"
    unreadable: dict[str, str] = field(default_factory=dict)

    def record(self, job_id: str, as_of: pd.Timestamp) -> JobRecord:
        """The state of ``job_id`` at ``as_of`` (tz-aware).

        Raises
        ------
        InputError
            The job was never submitted.
        """
        as_of = require_aware(as_of, "as_of")
        if job_id in self.committed:
            ps = tuple(self.committed[job_id])
            start, end = ps[0].start, ps[-1].end
            if end <= as_of:
                return JobRecord(job_id, JobState.SUCCEEDED, ReasonCode.COMPLETED, "", ps)
            if start <= as_of:
                return JobRecord(job_id, JobState.RUNNING, ReasonCode.STARTED, "", ps)
            return JobRecord(job_id, JobState.DISPATCHED, ReasonCode.PLACED,
                             f"committed to start at {start.isoformat()}", ps)
        if job_id in self.ended:
            u = self.ended[job_id]
            return JobRecord(job_id, JobState.FAILED, u.reason, u.detail)
        if job_id in self.pending:
            ps = tuple(self.tentative.get(job_id, ()))
            detail = ("not committed: planned to start at "
                      f"{ps[0].start.isoformat()}, re-planned by the next run" if ps else
                      "waiting for a run that can place it")
            return JobRecord(job_id, JobState.PENDING, ReasonCode.NOT_COMMITTED, detail, ps)
        raise InputError(f"job {job_id!r} was never submitted to the rolling plan")

    def counts(self, as_of: pd.Timestamp) -> dict[str, int]:
        """Jobs per state at ``as_of``."""
        out: dict[str, int] = {}
        for jid in [*self.pending, *self.committed, *self.ended]:
            s = str(self.record(jid, as_of).state)
            out[s] = out.get(s, 0) + 1
        return dict(sorted(out.items()))


@dataclass
class RunResult:
    """What one rolling run decided.

    Attributes
    ----------
    issued_at, commit_before
        The run's issue time and the next run's (placements before it are committed).
    slots
        The horizon's hourly slots.
    problem, result
        The planning problem (including pinned running work) and the planner's result.
    committed
        Placements committed by this run.
    deferred
        Tentative placements starting at or after ``commit_before`` (jobs stay pending).
    ended
        Jobs that ended in this run without running (``DeadlinePassed`` or a terminal reason).
    still_pending
        Jobs the run could not place that a later run still may.
    inference
        Inference placements in ``[issued_at, commit_before)`` (committed).
    notes
        Fallbacks and limits of this run, for a person (greedy fallback, time-limited solve).
    """

    issued_at: pd.Timestamp
    commit_before: pd.Timestamp
    slots: pd.DatetimeIndex
    problem: PlanningProblem
    result: PlanResult
    committed: list[Placement] = field(default_factory=list)
    deferred: list[Placement] = field(default_factory=list)
    ended: list[Unplaced] = field(default_factory=list)
    still_pending: list[Unplaced] = field(default_factory=list)
    inference: list[InferencePlacement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fell_back: bool = False
    time_limited: bool = False


def latest_start(job: Job) -> pd.Timestamp:
    """The latest start that still ends by the deadline: ``deadline − duration``."""
    return job.deadline - pd.Timedelta(minutes=job.duration_minutes)


def running_work(committed: dict[str, list[Placement]], jobs: dict[str, Job],
                 slots: pd.DatetimeIndex) -> list[RunningWork]:
    """Committed pieces that still occupy the horizon, as the planner's running work.

    Every committed piece that ends after the horizon's first slot holds its GPUs and the
    job's IT power from its start (or the horizon start) to its end
    (:class:`~carbonsched.domain.RunningWork`; the planner rounds up to its slot grid). A
    committed slice keeps its identity (GPU index, MIG start and profile or milli share) and a
    topology-bound gang its domains, so the next run books them where they are: a partly used
    GPU is neither over-booked nor counted as a whole GPU per slice.
    """
    t0 = slots[0]
    out = []
    for jid, pieces in committed.items():
        job = jobs.get(jid)
        for p in pieces:
            if p.end <= t0:
                continue
            kw = job.it_power_kw if job else 0.0
            pl = getattr(job, "payload", None)
            sliced = p.gpu_index is not None and pl is not None and (
                pl.mig_profile is not None if p.mig_start is not None
                else pl.gpu_milli is not None)
            out.append(RunningWork(
                site=p.site, gpu_type=p.gpu_type, gpus=p.gpus, it_power_kw=kw, end=p.end,
                job_id=jid, start=max(p.start, t0),
                gpu_index=p.gpu_index if sliced else None,
                mig_start=p.mig_start if sliced else None,
                mig_profile=pl.mig_profile if sliced and p.mig_start is not None else None,
                gpu_milli=pl.gpu_milli if sliced and p.mig_start is None else None,
                domains=tuple(p.domains)))
    return out


class RollingPlanner:
    """Plans run after run over a rolling horizon; keeps the state between runs in memory.

    Parameters
    ----------
    sites
        The catalog's sites (a run plans on the sites its signals cover).
    planner
        ``planner(problem) -> PlanResult``; default :func:`milp_planner`.
    horizon_hours
        Hours each run plans ahead, ``H``. [h]
    run_every_hours
        Hours to the next run; placements starting before it are committed. [h]
    state
        State to resume from (e.g. loaded from the store); default a fresh one.
    warm
        Start each run from the previous run's plan and column-generation multipliers
        (:meth:`warm_start`; the planner must take ``start=``); default off (the planner is
        called with the problem alone). The run's ``result.solver.warm_start`` says warm or
        cold and why.

    Raises
    ------
    InputError
        A horizon shorter than the run interval, or a non-positive interval.
    """

    def __init__(self, sites: list[Site], planner: Planner | None = None,
                 horizon_hours: int = DEFAULT_HORIZON_HOURS,
                 run_every_hours: int = DEFAULT_RUN_EVERY_HOURS,
                 state: RollingState | None = None, warm: bool = False) -> None:
        if run_every_hours < 1:
            raise InputError(f"run interval must be >= 1 h, got {run_every_hours} h; "
                             "e.g. --run-every-hours 24")
        if horizon_hours < run_every_hours:
            raise InputError(f"horizon of {horizon_hours} h is shorter than the run interval "
                             f"of {run_every_hours} h: work starting between the horizon's end "
                             "and the next run could never be planned; give --horizon-hours "
                             ">= --run-every-hours")
        self.sites = list(sites)
        self.planner = planner or milp_planner()
        self.horizon_hours = int(horizon_hours)
        self.run_every_hours = int(run_every_hours)
        self.state = state or RollingState()
        self.warm = bool(warm)
        self.state.jobs.update(self.state.pending)
        self.jobs = self.state.jobs

    # --- submissions ------------------------------------------------------------------------
    def submit(self, jobs: Iterable[Job]) -> int:
        """Add new jobs as pending work; ids already known are ignored. Returns how many."""
        n = 0
        for j in jobs:
            if (j.id in self.jobs or j.id in self.state.committed
                    or j.id in self.state.ended):
                continue
            self.jobs[j.id] = j
            self.state.pending[j.id] = j
            n += 1
        return n

    # --- one run ----------------------------------------------------------------------------
    def step(self, issued_at: pd.Timestamp, signals: pd.DataFrame,
             inference: Iterable[InferenceDemand] = (),
             horizon_hours: int | None = None) -> RunResult:
        """Plan the pending jobs from ``issued_at`` and commit what starts before the next run.

        Parameters
        ----------
        issued_at
            The run's issue time, tz-aware UTC on the hour.
        signals
            Frame on a ``(site, slot)`` MultiIndex covering every hour of the horizon for each
            site planned (see :class:`~carbonsched.plan.PlanningProblem`); sites absent from
            it are not planned in this run.
        inference
            Inference demand; the demands inside the horizon are planned, those before the
            next run committed.
        horizon_hours
            This run's horizon (default the planner's ``H``), e.g. longer for an oracle that
            sees every job's whole window.

        Returns
        -------
        RunResult

        Raises
        ------
        InputError
            ``issued_at`` not after the previous run's, or no site has signals.
        TimeAxisError
            ``issued_at`` naive or not on the hour.
        """
        t = require_aware(issued_at, "issued_at")
        h = int(horizon_hours or self.horizon_hours)
        slots = hourly_slots(t, h)
        have = set(signals.index.get_level_values(0)) if len(signals) else set()
        sites = [s for s in self.sites if s.id in have]
        if not sites:
            raise InputError(f"run at {t.isoformat()}: no site has signals; nothing can be "
                             "planned")
        jobs, running, ended = self.prepare(t, slots)
        inf = [d for d in inference if t <= d.hour < slots[-1] + HOUR]
        problem = PlanningProblem(sites=sites, jobs=jobs, inference=inf, slots=slots,
                                  signals=signals, running=running)
        start = self.warm_start() if self.warm else None
        result = self.planner(problem) if start is None else self.planner(problem, start=start)
        notes: list[str] = []
        fell_back = False
        if str(result.status) in ("infeasible", "no_solution", "error"):
            notes.append(f"run {t.isoformat()}: planner {result.status} "
                         f"({result.solver.infeasible_family or result.solver.note}); "
                         "the greedy plan was used instead")
            result = greedy_plan(problem)
            fell_back = True
        out = self.apply(t, problem, result, ended)
        out.notes[:0] = notes
        out.fell_back = out.fell_back or fell_back
        return out

    def prepare(self, issued_at: pd.Timestamp, slots: pd.DatetimeIndex
                ) -> tuple[list[Job], list[RunningWork], list[Unplaced]]:
        """First half of a run: end the jobs past their deadline; the work to plan.

        Returns
        -------
        (list of Job, list of RunningWork, list of Unplaced)
            The pending jobs; the committed pieces that hold capacity in the horizon
            (:func:`running_work`); the jobs ended with ``DeadlinePassed`` now.

        Raises
        ------
        InputError
            ``issued_at`` not after the previous run's.
        """
        t = require_aware(issued_at, "issued_at")
        st = self.state
        if st.last_issued_at is not None and t <= st.last_issued_at:
            raise InputError(f"run issued at {t.isoformat()} is not after the previous run "
                             f"({st.last_issued_at.isoformat()}); runs move forward in time")
        ended: list[Unplaced] = []
        # pending jobs whose latest start has passed can no longer meet their deadline
        for jid, job in list(st.pending.items()):
            if latest_start(job) < t:
                u = Unplaced(jid, ReasonCode.DEADLINE_PASSED,
                             f"deadline {job.deadline.isoformat()} passed: the latest start "
                             f"{latest_start(job).isoformat()} is before the run at "
                             f"{t.isoformat()}")
                ended.append(u)
                self._end(u)
        return (list(st.pending.values()), running_work(st.committed, self.jobs, slots),
                ended)

    def apply(self, issued_at: pd.Timestamp, problem: PlanningProblem, result: PlanResult,
              ended: list[Unplaced] | None = None) -> RunResult:
        """Second half of a run: commit what starts before the next run, keep the rest pending.

        Parameters
        ----------
        issued_at
            The run's issue time (as given to :meth:`prepare`).
        problem, result
            The problem planned (work from :meth:`prepare`) and the plan made for it.
        ended
            The jobs :meth:`prepare` ended.
        """
        t = require_aware(issued_at, "issued_at")
        st = self.state
        nxt = t + self.run_every_hours * HOUR
        notes: list[str] = []
        time_limited = str(result.status) == "feasible"
        if time_limited:
            notes.append(f"run {t.isoformat()}: solve stopped at its time limit "
                         f"(proven gap {result.solver.mip_gap})")
        solver_fallback = (str(result.status) == "heuristic"
                           and result.solver.method == "greedy")
        if solver_fallback:
            notes.append(f"run {t.isoformat()}: the planner returned the greedy plan "
                         f"({result.solver.note or 'no solver incumbent'})")
        if result.solver.greedy_unplaced:
            notes.append(f"run {t.isoformat()}: no incumbent within the time limit; the greedy "
                         f"fallback left {result.solver.greedy_unplaced} job(s) unplaced")
        out = RunResult(t, nxt, problem.slots, problem, result, notes=notes,
                        time_limited=time_limited, fell_back=solver_fallback)
        out.ended = list(ended or [])
        by_job: dict[str, list[Placement]] = {}
        for p in result.placements:
            if p.job_id in st.pending:
                by_job.setdefault(p.job_id, []).append(p)
        for jid, pieces in by_job.items():
            pieces.sort(key=lambda p: p.start)
            if pieces[0].start < nxt:
                # a job in pieces is committed whole once its first piece starts before the
                # next run: its later pieces hold their capacity like running work
                st.committed[jid] = pieces
                st.pending.pop(jid, None)
                st.tentative.pop(jid, None)
                out.committed.extend(pieces)
            else:
                st.tentative[jid] = pieces
                out.deferred.extend(pieces)
        for u in result.unplaced:
            if u.job_id not in st.pending:
                continue
            job = st.pending[u.job_id]
            st.tentative.pop(u.job_id, None)
            if u.reason in TERMINAL_REASONS:
                out.ended.append(u)
                self._end(u)
            elif latest_start(job) < nxt:
                e = Unplaced(u.job_id, ReasonCode.DEADLINE_PASSED,
                             f"not placed by the run at {t.isoformat()} ({u.reason}: {u.detail})"
                             f" and its latest start {latest_start(job).isoformat()} is before "
                             f"the next run at {nxt.isoformat()}")
                out.ended.append(e)
                self._end(e)
            else:
                out.still_pending.append(u)
        out.inference = [ip for ip in result.inference if ip.hour < nxt]
        st.inference.extend(out.inference)
        st.last_issued_at = t
        st.carried = result.carry
        st.carried_missing = "" if result.carry is not None else (
            f"the run issued at {t:%Y-%m-%dT%H:%MZ} was solved by "
            f"{result.solver.method or result.solver.name or 'a heuristic'}, which has no "
            "column-generation multipliers")
        return out

    def warm_start(self) -> WarmStart | None:
        """The latest run's plan (and multipliers) as the next run's warm start, or ``None``.

        The placements the latest run made after its commit window keep their absolute site
        and start (on the next run's slots: the plan shifted by ``run_every``); its
        multipliers and columns (``state.carried``) are shifted by the solve
        (:func:`carbonsched.plan.colgen.warm.carried_multipliers`). ``None`` before the
        first run or when nothing is left to re-plan.
        """
        st = self.state
        placements = [p for ps in st.tentative.values() for p in ps]
        if st.last_issued_at is None or not placements:
            return None
        last = st.last_issued_at.strftime("%Y-%m-%dT%H:%MZ")
        return WarmStart(placements, f"the plan of the run issued at {last}, shifted by "
                                     f"{self.run_every_hours} h",
                         duals=st.carried, duals_missing=st.carried_missing)

    def end_pending(self, units: Iterable[Unplaced]) -> list[Unplaced]:
        """End pending jobs for a reason the caller found (e.g. a site the catalog lost).

        Returns the units ended (those of jobs that were pending); others are left as they
        are.
        """
        out = [u for u in units if u.job_id in self.state.pending]
        for u in out:
            self._end(u)
        return out

    def _end(self, u: Unplaced) -> None:
        self.state.pending.pop(u.job_id, None)
        self.state.tentative.pop(u.job_id, None)
        self.state.ended[u.job_id] = u

    def committed_plan(self) -> PlanResult:
        """Every committed placement and inference hour so far as one plan, for scoring.

        Status ``heuristic``; pending jobs are unplaced with ``NotCommitted``.
        """
        from carbonsched.plan import PlanStatus, SolverRecord

        return PlanResult(status=PlanStatus.HEURISTIC,
                          solver=SolverRecord("rolling", PlanStatus.HEURISTIC),
                          placements=sorted((p for ps in self.state.committed.values()
                                             for p in ps), key=lambda p: (p.start, p.job_id)),
                          inference=sorted(self.state.inference,
                                           key=lambda ip: (ip.hour, ip.area, ip.site)),
                          unplaced=list(self.state.ended.values())
                          + [Unplaced(j, ReasonCode.NOT_COMMITTED, "still pending")
                             for j in self.state.pending])


def known_by(jobs: Iterable[Job], before: pd.Timestamp) -> list[Job]:
    """Jobs that arrive before ``before`` (earliest start earlier than it).

    The replay's information rule: a run learns of the jobs that arrive before the next run,
    as the daily plan knows its day's jobs at its issue time (work is submitted ahead).
    """
    return [j for j in jobs if j.earliest_start < before]


def run_times(first: pd.Timestamp, last: pd.Timestamp, run_every_hours: int
              ) -> pd.DatetimeIndex:
    """Issue times ``first, first + run_every, ...`` up to the run whose interval holds ``last``."""
    first = require_aware(first, "first").floor("h")
    n = int(np.floor((last - first) / (run_every_hours * HOUR))) + 1
    return pd.DatetimeIndex([first + k * run_every_hours * HOUR for k in range(max(n, 1))])


def jobs_summary(state: RollingState, as_of: pd.Timestamp) -> dict[str, Any]:
    """Counts by state and the ended jobs' reasons (for a run record or a report)."""
    reasons: dict[str, int] = {}
    for u in state.ended.values():
        reasons[str(u.reason)] = reasons.get(str(u.reason), 0) + 1
    return {"states": state.counts(as_of), "ended_reasons": dict(sorted(reasons.items()))}
