"""Time column generation keeps back for the steps after the master and after each pass."""

from __future__ import annotations

from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.sets import PlanSets


def tail_s(sets: PlanSets, per_job_s: float = ColgenOptions.tail_s_per_job) -> float:
    """Seconds kept after the last master for the steps that always follow it. [s]

    ``per_job_s`` (:attr:`ColgenOptions.tail_s_per_job`) per placeable job: on 10k × 16 × 48 at load
    0.3 with a 20 s limit the pricing, the priced greedy plan (1.7–2.5 s), its build (0.5 s) and the
    recount (1.6 s) took about 4.5 s after a master that ended at 85 % of the limit, and the solve
    ended at 21.5 s (docs/benchmarks/planner-log.md#planner-3-13).

    Parameters
    ----------
    sets
        Compiled sets.
    per_job_s
        Seconds per placeable job. [s]
    """
    return per_job_s * len(sets.placeable)


SHORT_PATH_SLOTS = 48
"""Slots of the grid :attr:`ColgenOptions.smooth_s_per_job` was measured on (10k × 16 × 48 h,
hourly: 3 ms per job is where a master LP and a plan fit in the budget). [slots]"""


def short_path_s(sets: PlanSets, options: ColgenOptions | None = None) -> float:
    """The budget below which column generation solves no master LP: the short path. [s]

    :attr:`ColgenOptions.smooth_s_per_job` per placeable job, scaled by the grid's slots over
    :data:`SHORT_PATH_SLOTS` where the grid is longer (a master's capacity and power rows grow
    with the slots, and so does its solve): a 72 h rolling step (96 hourly slots with the
    tail) has 60 s at 10k jobs, a 15-minute grid four times as many slots. Measured on the
    10k × 16 × 72 h rolling step (20 % of the fleet running, 30 % preemptible, 60 s, seeds 0
    / 1, an idle machine): with the short path first in half the budget and a master-LP path
    in the rest, no master LP was solved in its 28 s and the plans were 9.4 / 14.9 % above
    their bounds; the short path alone in the whole budget, 2.8 / 2.4 % (BENCHMARKS.md
    section 17c).

    Parameters
    ----------
    sets
        Compiled sets (placeable jobs; slots ``sets.pue.shape[1]``).
    options
        ``smooth_s_per_job``; defaults when None.
    """
    opt = ColgenOptions() if options is None else options
    n_t = sets.pue.shape[1]
    return (opt.smooth_s_per_job * max(len(sets.placeable), 1)
            * max(1.0, n_t / SHORT_PATH_SLOTS))


def plan_overhead_s(sets: PlanSets,
                    per_10k_s: float = ColgenOptions.own_pass_overhead_s) -> float:
    """Seconds kept after a pass's MIP for its build, HiGHS's overrun and the plan. [s]

    ``per_10k_s`` (:attr:`ColgenOptions.own_pass_overhead_s`), measured at 10,000 jobs, scaled with
    the jobs to place (the plan is built job by job): 50k × 16 × 48 at load 0.3 ran 302.2 and 305.0
    s on a 300 s limit with the fixed 1.2 s (two solves sharing the cores).

    Parameters
    ----------
    sets
        Compiled sets.
    per_10k_s
        Seconds at 10,000 placeable jobs (and below). [s]
    """
    return per_10k_s * max(1.0, len(sets.placeable) / 10_000)


def moves_hold_s(time_limit_s: float, n_jobs: int, options: ColgenOptions | None = None
                 ) -> float:
    """Time kept back from the passes for the final moves [s].

    ``min(moves_share × limit, moves_s_per_job × jobs)`` (:class:`ColgenOptions`, default
    when ``options`` is None), or 0 when that is under half the per-job time: what is left
    after the rebuild would be less than a pass (10k jobs in a 20 s limit: 2 s against 8 s).

    Parameters
    ----------
    time_limit_s
        Budget of the whole solve. [s]
    n_jobs
        Placeable jobs. [-]
    options
        :attr:`ColgenOptions.moves_share` and
        :attr:`ColgenOptions.moves_s_per_job`; defaults when None.
    """
    opt = ColgenOptions() if options is None else options
    per_job = opt.moves_s_per_job * n_jobs
    hold = min(opt.moves_share * time_limit_s, per_job)
    return hold if hold >= 0.5 * per_job else 0.0
