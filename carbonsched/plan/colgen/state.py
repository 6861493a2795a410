"""The state one column-generation solve hands from phase to phase."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import highspy
import numpy as np

from carbonsched.plan.colgen.classes import Classes
from carbonsched.plan.colgen.layout import Layout
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.status import add_note
from carbonsched.plan.result import PlanResult, SolverRecord
from carbonsched.plan.sets import PlanSets

Multipliers = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Non-negative multipliers of the capacity ``(S, T, G)``, power and absorption ``(S, T)``
rows."""


@dataclass
class MasterSolution:
    """The last master LP solved (or its crossover to a vertex).

    Attributes
    ----------
    values
        ``(P,)`` LP values of the pool's first ``n_pool`` option columns. [jobs]
    duals
        ``(R,)`` row duals in the covering form's layout (:func:`~carbonsched.plan.colgen.
        layout.pricing_duals`).
    raw
        ``(R,)`` row duals as HiGHS returned them (HiGHS signs).
    n_pool
        Columns of the pool the master had when it was solved.
    vertex
        Whether the solution is a vertex (crossover ran and the end was not imprecise).
    """

    values: np.ndarray
    duals: np.ndarray
    raw: np.ndarray
    n_pool: int
    vertex: bool


@dataclass
class ColgenState:
    """Inputs, budget and intermediate results of one solve, filled in phase by phase.

    One :func:`~carbonsched.plan.colgen.driver.solve_colgen` call makes one state.

    The phases, in order: warm-up (classes, layout, greedy plan, Lagrangian warm-up, and on a
    short budget the smoothed dual), master rounds (column generation), refinement of the
    bound, the final crossover, incumbent selection (priced greedy plans and LP roundings),
    the one-slot repack and early moves, the passes (site, GPU type) and the split bounds,
    the repair MIP and the finish (final moves, status, note).

    Attributes
    ----------
    sets
        Compiled sets.
    time_limit_s
        Budget of the whole solve, counted from ``started``. [s]
    mip_gap
        Requested relative gap. [-]
    threads
        HiGHS threads.
    rec
        Solver record being filled.
    started
        ``time.perf_counter()`` at the start of the solve. [s]
    opt
        The tunables.
    cg_share
        Least share of the budget column generation may use. [-]
    progress
        Optional callback for one-line progress messages.
    held
        Time kept back for the final moves, taken off :meth:`left`. [s]
    lb
        Best proven lower bound so far. [kg]
    cands
        ``(name, plan)`` incumbents so far.
    repacked
        :func:`~.incumbents.plan_key` of every plan the one-slot repack started from or
        produced; it starts from the best candidate not among them
        (:func:`~.incumbents.repack`).
    prior_unrepacked
        In a staged solve's master-LP path, the short path's best ``(name, plan)`` that is
        neither its plan nor one its repack started from or produced, or None.
    prior_more
        With :attr:`ColgenOptions.repack_more` above 0, in a staged solve's master-LP path,
        every ``(name, plan)`` of the short path but its plan and the carbon greedy (those
        its repack started from or produced are skipped as starts by ``repacked``); it
        replaces ``prior_unrepacked`` as the short path's candidates there.
    """

    sets: PlanSets
    time_limit_s: float
    mip_gap: float
    threads: int
    rec: SolverRecord
    started: float
    opt: ColgenOptions
    cg_share: float
    progress: Callable[[str], None] | None = None
    held: float = 0.0
    # warm-up
    tb: float = 0.0                       # start of the build [perf_counter s]
    cls: Classes | None = None
    lay: Layout | None = None
    greedy: PlanResult | None = None
    seeds: list[np.ndarray] = field(default_factory=list)
    lb: float = -np.inf
    warm_duals: np.ndarray | None = None
    best_lam: Multipliers | None = None   # multipliers of the best bound so far
    warm_s: float = 0.0                   # warm-up and smoothed dual [s]
    short: bool = False                   # no master LP: the budget is too short
    force_short: bool = False             # take the short path whatever the budget
    resumed: bool = False                 # warm-up taken from an earlier short-path solve
    prior: tuple[str, PlanResult] | None = None   # the short path's (name, plan)
    prior_bound: float = -np.inf          # the short path's bound [kg]
    prior_build_s: float = 0.0            # the short path's build time [s]
    prior_unrepacked: tuple[str, PlanResult] | None = None   # its best plan not repacked
    prior_more: list[tuple[str, PlanResult]] = field(default_factory=list)   # repack_more
    priced_by: str = "warm-up"            # whose multipliers price the plan without a master
    short_pool: np.ndarray | None = None  # (O, 3) options the smoothed dual chose
    earlier_duals: list = field(default_factory=list)   # earlier smoothed-dual iterates' duals
    marked_duals: list = field(default_factory=list)    # ... at evaluations e, 2e, 4e, ...
    warm_start: np.ndarray | None = None  # (P, 3) (job, site, start) of a previous plan
    warm_label: str = ""                  # what that plan is, for the note
    carried: Any = None                   # the previous run's CarriedDuals (colgen.warm)
    carried_how: str = ""                 # "warm: ..." / "cold: ..." for the record
    # master
    pool: np.ndarray | None = None
    h: highspy.Highs | None = None
    use_ipm: bool = False
    n_fixed: int = 0
    scale: float = 1.0
    ts: float = 0.0                       # start of the master rounds [perf_counter s]
    tail: float = 0.0                     # kept after the last master [s]
    it: int = 0
    converged: bool = False
    vertex: bool = False
    good: MasterSolution | None = None
    z_good: float = np.inf
    refined_lam: Multipliers | None = None
    # incumbents
    no_master: bool = False
    xo: np.ndarray | None = None
    duals: np.ndarray | None = None
    row_duals: np.ndarray | None = None
    lam_c: np.ndarray | None = None
    rank_kw: np.ndarray | None = None
    lff: np.ndarray | None = None
    cands: list[tuple[str, PlanResult]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    repacked: set[frozenset] = field(default_factory=set)   # plan_key: repack starts/results
    t_pg: float = 0.0                     # time of one priced greedy [s]
    residual: np.ndarray | None = None
    fixed_opts: np.ndarray | None = None
    fixed_counts: np.ndarray | None = None
    split_opts: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))

    def left(self) -> float:
        """Seconds of the limit left, less the time held back for the final moves. [s]"""
        return self.time_limit_s - (time.perf_counter() - self.started) - self.held

    def plain_reserve_s(self) -> float:
        """Seconds a phase that runs no MIP leaves at the end of the limit. [s]

        The larger of :attr:`ColgenOptions.finish_plain_s` and one priced greedy plan's time
        (``t_pg``, 0 before the first): building and checking the plan is of that order
        (0.34 s where a priced greedy plan took 0.4 s, 9.2k jobs × 16 sites × 72 slots).
        """
        return max(self.opt.finish_plain_s, self.t_pg)

    def say(self, msg: str) -> None:
        """Pass a one-line progress message to the callback, if any."""
        if self.progress:
            self.progress(msg)

    def note(self, text: str) -> None:
        """Append ``text`` to the plan note."""
        add_note(self.rec, text)

    def best(self) -> tuple[str, PlanResult]:
        """The incumbent of least objective (the first of equals)."""
        return min(self.cands, key=lambda c: c[1].totals["objective"])
