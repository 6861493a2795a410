r"""Column generation over job classes, with an exact LP bound and a repair MIP.

The full model (:mod:`carbonsched.plan.model`) has one binary per feasible (job, site, start)
option — about 1.8 million at 10,000 jobs × 16 sites × 48 h — and neither PuLP construction nor
the MILP's LP finishes in a minute. Its LP relaxation is a master problem with one convexity
row per job, solved here by column generation (Dantzig–Wolfe; Desrosiers & Lübbecke, "A primer
in column generation", in *Column Generation*, Springer 2005, doi:10.1007/0-387-25486-2_1):

0. jobs identical for the model (GPU type, gang size, duration, power, window, allowed sites)
   form a class :math:`c` of multiplicity :math:`m_c`; the class's options are general
   integers :math:`0 \le x_o \le m_c` with :math:`\sum_o x_o + u_c = m_c` — the same model with
   the job symmetry removed (10,000 jobs → about 4,600 classes; 50,000 → 12,500);
1. the restricted master LP holds every unplaced, inference and absorption column, the greedy
   plan's options and each class's cheapest option, and is built directly in HiGHS from numpy
   arrays (no Python object per option);
2. pricing evaluates the reduced cost of *every* option in numpy: with row duals
   :math:`\pi_c` (assignment), :math:`\mu_{stg}` (GPU capacity), :math:`\nu_{st}` (power) and
   :math:`\rho_{st}` (absorption), option :math:`(c, s, t_0)` has
   :math:`\bar c = P_c \sum_{t} (k_{st} - \nu_{st} + \mathrm{PUE}_{st}\rho_{st})
   - n_c \sum_t \mu_{st g_c} - \pi_c` over its hours (:math:`k_{st}` = PUE × CI / 1000),
   computed for all starts at once with cumulative sums along :math:`t`;
3. each class's most negative options are added and the LP re-solved from its basis, until no
   option prices out; every round gives the Lagrangian lower bound
   :math:`z_{RMP} + \sum_c m_c \min(0, \min_o \bar c_o)` (Lasdon, *Optimization Theory for
   Large Systems*, 1970), which equals the full LP value at convergence;
4. classes whose LP counts are integral are fixed, except those sharing a binding capacity or
   power cell with a fractional class; a repair MIP over the generated and best-priced options
   of the rest (plus all inference GPUs and absorption) completes the plan.

Issue 13 (loads 0.6 and 0.8, where capacity binds) added, measured on 1k and 10k × 16 × 48:

* the master in the flow (start/end) form (:func:`make_layout`) and interior-point
  tolerance 1e-5 — the master LP dominates the budget at 10k (two rounds of 10–12 s each at
  machine load 1.7; over 60 s each with 8–20 other processes on the 2 cores);
* the gap at load 0.6 is mostly *unplaced work of the few-GPU types* (31 V100s at 10k, 3–4 at
  1k; an unplaced GPU-hour costs 10 × the dirtiest GPU-hour): the LP places it fractionally,
  the roundings leave whole gangs out. :func:`split_bound` keeps the capacity rows and
  relaxes power, so each GPU type is its own small scheduling MIP, with reduced-cost fixing
  to bound its size — on 1k at 0.6 it raised the bound from 229.74 (LP) to 243.08 in 1 s,
  where the full model's HiGHS run had 243.81 after 900 s; :func:`site_bound` (assignment
  relaxed, one MIP per site) is valid too but gained 0.3 kg there and is off by default;
* :func:`type_pass`, fix-and-optimise by GPU type (few-GPU types first), before the repair;
* on large instances (no repair MIP to follow), :func:`site_pass` first: a large-neighbourhood
  search that re-plans every class one site runs (every GPU type, plus the work left out)
  with every other class fixed — site power binds in most site-hours of a loaded fleet and couples
  the types, which a type re-planned alone cannot untangle;
* when column generation stops before converging, :data:`REFINE_ROUNDS` subgradient steps
  from the best multipliers with Polyak's step towards the last master's LP value
  :math:`z_{RMP}` (an upper bound on the dual optimum, so the step is never too short;
  Polyak, "Minimization of unsmooth functionals", USSR Comput. Math. Math. Phys. 9, 1969,
  doi:10.1016/0041-5553(69)90061-5): the interior point's approximate duals give a weak
  Lagrangian bound (3305.6 against the LP's 3408.9 on 10k × 16 × 48 at load 0.6, seed 0)
  which 60 steps lift to 3396.6 in 3–4 s, where a second interior-point master takes 20 s;
  no master is started that the time left cannot finish (a cut interior-point master
  yields no duals), and a stopped one's last iterate is priced for a bound; the refined
  multipliers also price a greedy plan, one more candidate. Since BENCHMARKS.md section
  3.15 the refinement is by default the smoothed Lagrangian dual (:mod:`carbonsched.plan.
  smoothed`, L-BFGS-B on the entropy-smoothed dual) from the last master's duals, which
  lifted a one-master bound from 3,388.4 to 7,538.1 kg in 2.8 s (LP 7,786.1; 10k x 16 x 48
  at load 0.8, seed 1) where the Polyak steps reached 3,901.0;
* a budget under :data:`SMOOTH_S_PER_JOB` per job (10k jobs in 20 s) solves no master:
  the smoothed dual, started from the warm-up's multipliers, gives the bound (seed 0 at load
  0.3: 0.13 % below the LP in 7 s) and the multipliers the plan is priced with;
* the priced greedy (the Lagrangian heuristic every pass starts from) places jobs in
  :func:`least_flexible_first` order, most GPU-hours per feasible option first: on a loaded
  fleet, largest-first let flexible jobs take the power and GPUs that short-window jobs
  needed (10k × 16 × 48 at load 0.8: 374 against 326 GPU-hours left out from the same duals);
  up to :data:`BOTH_ORDERS_MAX_JOBS` jobs the largest-first order runs too and the better
  plan is kept;
* :func:`unit_repack`, before the passes: the one-GPU, one-slot jobs (59 % of the jobs, and
  930 of the 1,001 jobs the priced greedy left out at 10k × 16 × 48, load 0.8, seed 4)
  re-placed by an LP around the rest of the best plan, with column generation over their
  options — a transportation problem, integral at its vertex unless a power row or a
  surplus limit binds (the rest rounded down); at load 0.8 it took
  the plan from 2.16 % to 0.35 % above the bound (seed 4) and from 3.69 % to 0.92 % (seed 2),
  where the moves' one-blocker ejections had found no chain to place left-out jobs along;
* last, one-job moves, insertions and ejections on the exact objective
  (:mod:`carbonsched.plan.local`) on the best plan, with :data:`MOVES_SHARE` of the budget
  kept back from the passes for them (and, up to :data:`MOVES_FIRST_MAX_JOBS` jobs, on the
  best candidate before the passes too): the priced greedy steers jobs by LP prices the
  finished plan does not need, and every pass re-plans one neighbourhood at a time.

The reported gap is (objective − bound) / |objective| with the best of the bounds of step 3
and the split bounds, each valid for any multipliers (tests/plan/test_colgen_bound.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import highspy
import numpy as np

from carbonsched.errors import InputError
from carbonsched.plan.baselines import greedy_from_sets, priced_greedy
from carbonsched.plan.highs import mip_dual_bound, run_highs
from carbonsched.plan.local import improve
from carbonsched.plan.model import ABSORB_EPS_KW, cover_index
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import (
    PlanSets,
    enumerate_options,
    option_costs,
    placement_positions,
)

INF = highspy.kHighsInf
RC_TOL = 1e-7
"""Reduced-cost tolerance, relative to the largest option cost. [-]"""
PRICE_CHUNK = 4000
"""Classes priced per numpy block (memory: chunk × S × T floats)."""
COLUMNS_PER_ROUND = int(os.environ.get("CARBONSCHED_CG_K", "2"))
"""Negative-reduced-cost options added per class and round."""
MASTER_SOLVER = os.environ.get("CARBONSCHED_CG_MASTER", "auto")
"""LP method of the master: ``"ipm"`` (interior point without crossover; measured 3–5× faster
than simplex re-solves on the 10k instance, and its central duals stabilise the pricing, with
one crossover at the end), ``"simplex"`` (warm-started primal simplex) or ``"auto"`` (IPM above
:data:`IPM_MIN_CLASSES` classes)."""
IPM_MIN_CLASSES = 2000
CG_SHARE = float(os.environ.get("CARBONSCHED_CG_SHARE", "0.65"))
"""Least share of the budget column generation may use (it may use up to
``max(CG_SHARE, CG_EXTEND_SHARE)``, one master at a time, each started only if the time its
predecessor took is left); the rest is for the fix-and-optimise pass, the split bound and
the repair MIP."""
IPM_TOL = float(os.environ.get("CARBONSCHED_CG_IPM_TOL", "1e-5"))
"""Optimality tolerance of the master's interior-point solves. [-]"""
FLOW = os.environ.get("CARBONSCHED_CG_FLOW", "0") == "1"
"""Master and repair in the start/end (flow) form (``CARBONSCHED_CG_FLOW=1``): an option enters
the balance rows of its first and one-past-last hour instead of every hour it covers (see
:func:`make_layout`). Off by default since the partial-last-slot absorption fix: on 10k × 16 × 48
the covering form proved 2.6 % and 3.4 % (load 0.3, seeds 0 and 1) and 5.5 % (load 0.6) against
the flow form's 5.9 %, 6.1 % and 6.4 %, same bound, a better repair (BENCHMARKS.md section 3.1)."""
REFINE_ROUNDS = int(os.environ.get("CARBONSCHED_CG_REFINE", "60"))
"""Subgradient (Polyak) steps from the best multipliers when column generation stops before
converging, towards the last master's LP value, with :data:`REFINE_METHOD` ``"subgradient"``;
0 turns the refinement off, whichever the method; see the module docstring."""
REFINE_METHOD = os.environ.get("CARBONSCHED_CG_REFINE_METHOD", "smoothed")
"""How the bound is refined when column generation stops before converging: ``"smoothed"``
(:mod:`carbonsched.plan.smoothed`, from the last master's duals) or ``"subgradient"``
(:data:`REFINE_ROUNDS` Polyak steps from the best multipliers)."""
REFINE_SHARE, REFINE_KEEP_SHARE = 0.1, 0.08
"""Most of the budget the refinement may take, and the least it leaves to the plan."""
TAIL_S_PER_JOB = 5e-4
"""Seconds per placeable job kept after the last master for what always follows it: pricing,
the priced greedy plan, the plan's build and the independent recount (:func:`tail_s`). [s]"""
ROUND_GROWTH = 1.0
"""A master round is not started unless ``ROUND_GROWTH`` × the last one's time is left
before the plan's least share of the budget (a cut interior-point round yields no duals)."""
CG_REL_TOL = 1e-4
"""Column generation stops when (LP − Lagrangian bound) / LP is below this. [-]"""
CG_GAP_SHARE = 0.2
"""Column generation also stops once (LP − bound) / LP is below this share of the requested
MIP gap: the rest of the budget goes to the plan, not to the last 0.1 % of the bound."""
CG_EXTEND_SHARE = 0.85
"""Column generation (the first master included) may use up to this share of the budget, one
master at a time, each started only if the time its predecessor took is left
(:data:`ROUND_GROWTH`): the plan is rounded from the last master solved."""
CROSSOVER_AT = 5e-3
"""Once (LP − bound) / LP is below this, master solves end with a crossover to a vertex."""
INTEGRAL_TOL = 1e-4
"""An LP count within this of an integer counts as integral (interior-point solutions). [-]"""
SIMPLEX_STRATEGY = int(os.environ.get("CARBONSCHED_CG_SIMPLEX", "4"))
"""HiGHS simplex strategy of the master (4 = primal: added columns keep the basis primal
feasible, so each re-solve starts where the last one ended)."""
WARMUP_SHARE = float(os.environ.get("CARBONSCHED_CG_WARMUP", "0.20"))
"""Largest share of the time budget spent on the Lagrangian warm-up that seeds the master
(measured on 10k × 16 × 48 at load 0.6: after 117–162 rounds the first master solved in
10–20 s; when a busy machine cut the warm-up at 39 rounds, the first master had not
finished after 39 s — so the cap is generous and the round count decides)."""
WARMUP_MAX_ROUNDS = 150
"""Warm-up rounds (a fixed count keeps runs reproducible; the time share is only a cap)."""
WARMUP_BIG_CLASSES = 10_000
WARMUP_SHARE_BIG, WARMUP_MAX_ROUNDS_BIG = 0.15, 600
"""Above ``WARMUP_BIG_CLASSES`` classes (50k jobs) a longer warm-up: measured, with 200
rounds the first interior-point masters of the 50k instance ended in status Unknown."""
WARMUP_STALL = int(os.environ.get("CARBONSCHED_CG_STALL", "10"))
"""Warm-up rounds without improvement before the step factor is halved."""
WARMUP_KEEP_ROUNDS = 30
"""The options chosen in the last this many warm-up rounds seed the master."""
WARMUP_TOP_K = 2
"""Best options per class under the warm-up's best multipliers added to the master."""
REPAIR_SHARE = 0.15
"""Share of the budget kept for the repair MIP after the crossover."""
FINISH_S = 2.0
"""Seconds kept for building the plan after the last MIP (HiGHS overruns its limit by up to
a second on the larger repair MIPs, measured at 10k)."""
STEP_MIN_LEFT_S = FINISH_S + 0.5
"""The split bound, the site bound and the repair MIP start only with this much of the limit
left: they build their models over every class before any solver limit applies. [s]"""
CROSSOVER_MIN_LEFT = 0.5
"""The final crossover of an interior master runs only with this share of the budget left
(measured: 12 s on the 10k × 16 × 48 master, as long as an interior solve)."""
BINDING_DUAL_REL = 1e-6
"""A capacity, power or absorption row counts as binding at an interior LP point when its
multiplier (−dual) exceeds this share of ``scale``, the largest cost of the master's initial
columns (:func:`binding_cells`; measured on 10k × 16 × 48 at load 0.8, seed 4: 695 rows above
it at the interior point, 689 binding at the vertex crossover reached). [-]"""
IMPRECISE_PRIMAL_TOL = 1e-6
"""Largest primal infeasibility (HiGHS ``max_primal_infeasibility``, absolute, over rows and
column bounds: jobs, GPUs, kW) of an imprecise interior master kept as its solution."""
REPAIR_TOP_K = 3
"""Options per repair class added by reduced cost under the final duals."""
REPAIR_HEURISTIC_EFFORT = float(os.environ.get("CARBONSCHED_CG_HEUR", "0.05"))
"""HiGHS ``mip_heuristic_effort`` of the repair MIPs (HiGHS's default 0.05)."""
REPAIR_ALL_OPTIONS = 50_000
"""When every class fits in the repair and the instance has at most this many options, the
repair MIP gets all of them."""
REPAIR_MAX_CLASSES = 500
"""Largest repair MIP, in classes (fractional classes plus freed neighbours); measured on the
10k × 16 × 48 instance: 500 classes → 0.70 % in 9 s, 800 → 0.51 % in 29 s (loaded machine)."""
REPAIR_ALL_CLASSES = 1000
"""Up to this many classes the repair MIP frees every class (starting from the best plan)."""

REPACK_MAX_OPTIONS = int(os.environ.get("CARBONSCHED_CG_REPACK", "2000000"))
"""Most options (every start of every one-GPU, one-slot class) :func:`unit_repack` takes on;
0 turns it off. [-]"""

REPACK_SHARE = 0.9
"""Largest share of the time left (less the finish) the repack may take; it runs before the
passes, which get the rest: on 10k x 16 x 48 at load 0.8, seed 2, with half it did not fit
(3.8 s for 4.0 expected) and the plan ended 3.92 % above the bound, with 0.9 it took 4.0 s,
5,925.6 -> 5,473.6 kg, and the plan ended at 0.92 % (BENCHMARKS.md section 3.14). [-]"""

REPACK_S_PER_OPTION = 1e-5
"""Time :func:`unit_repack` expects per option of those classes: 10k x 16 x 48 at load 0.8
took 2.1-2.6 s for 258,230 (seed 4) and 3.4-4.8 s for 269,016 (seed 2) with the pricing
(the LP over all of them at once: 6.0-7.6 s), on the 2 shared cores (BENCHMARKS.md
section 3.14); at load 0.3, 0.5-1.0 s for 320k-344k (seeds 0-4, section 3.15). 1.5e-5 (3.14)
skipped it at 0.3 in 20 s, where it gains most; the LP has its own limit, so an estimate
short of the worst case costs at most the time it was given. [s]"""

REPACK_PRICE_K = int(os.environ.get("CARBONSCHED_CG_REPACK_K", "2"))
"""Options per class :func:`unit_repack` starts from and adds per pricing round (0: the LP
gets every option at once): 2, 5, 10, 20 and every option at once reached the same
objective on seed 4 (2, 5 and every option on seed 2), 2 the fastest. [-]"""

REPACK_RC_TOL = 1e-6
"""Reduced cost below which :func:`repair`'s pricing adds an option (the LP's own options
stay above -1e-7, HiGHS's dual feasibility tolerance). [kg]"""

REPACK_ROUND_TOL = 1e-6
"""An LP value this close to an integer counts as that integer when rounding down. [-]"""


@dataclass
class Classes:
    """Jobs grouped into interchangeable classes."""

    rep: np.ndarray            # representative job position per class, (C,)
    mult: np.ndarray           # jobs per class, (C,)
    of_job: np.ndarray         # class of each job position, -1 if not placeable, (J,)
    members: list[np.ndarray]  # job positions per class


def job_classes(sets: PlanSets) -> Classes:
    """Group placeable jobs by (type, gang, minutes, power, window, sites, unplaced cost)."""
    jobs = sets.placeable
    of_job = np.full(len(sets.job_gpus), -1, dtype=np.int64)
    if len(jobs) == 0:
        return Classes(np.zeros(0, np.int64), np.zeros(0, np.int64), of_job, [])
    site_bits = sets.job_sites[jobs] @ (1 << np.arange(sets.job_sites.shape[1], dtype=np.int64)
                                        ) if sets.job_sites.shape[1] <= 62 else \
        np.unique(sets.job_sites[jobs], axis=0, return_inverse=True)[1]
    kw_key = np.round(sets.job_kw[jobs] * 1e6).astype(np.int64)
    key = np.stack([sets.job_gtype[jobs], sets.job_gpus[jobs], sets.job_minutes[jobs], kw_key,
                    sets.job_first[jobs], sets.job_last[jobs], np.asarray(site_bits),
                    # jobs deferrable to different deadlines have different terminal values
                    np.unique(sets.unplaced_cost[jobs], return_inverse=True)[1].reshape(-1)],
                   axis=1)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    of_job[jobs] = inv
    order = np.argsort(inv, kind="stable")
    bounds = np.flatnonzero(np.diff(inv[order])) + 1
    members = [jobs[g] for g in np.split(order, bounds)]
    return Classes(rep=jobs[first], mult=np.bincount(inv), of_job=of_job, members=members)


@dataclass
class Layout:
    """Row positions of the master: assignment, inference, capacity, power, absorption."""

    reps: np.ndarray           # representative job per class, (C,)
    mult: np.ndarray           # (C,)
    assign_row: np.ndarray     # (J,) row of each representative's class, -1 otherwise
    demands: np.ndarray        # active demand positions, (D',)
    serve_row: np.ndarray      # (D,) -1 if inactive
    cap_base: int              # cap row of (s, t, g) = cap_base + (s*T + t)*G + g
    pow_base: int              # power row of (s, t) = pow_base + s*T + t
    absorb_row: np.ndarray     # (S, T) row or -1
    n_rows: int                # all rows (cell rows, then the flow form's balance rows)
    n_cell_rows: int = -1      # rows of the covering form: assignment .. absorption
    bal_g_base: int = -1       # GPU balance row of (s, t, g) = bal_g_base + (s*T + t)*G + g
    bal_k_base: int = -1       # IT-power balance row of (s, t) = bal_k_base + s*T + t

    @property
    def flow(self) -> bool:
        """Options enter balance rows at their start and end (flow form), not every hour."""
        return self.bal_g_base >= 0


def make_layout(sets: PlanSets, cls: Classes, flow: bool | None = None) -> Layout:
    r"""Number the master's rows.

    In the flow form (``flow``, default :data:`FLOW`) the GPUs and IT power running in
    each site-hour are variables :math:`R_{stg}`, :math:`K_{st}` with balance rows
    :math:`R_{stg} = R_{s,t-1,g} + \sum_{o \text{ starts at } t} n_o -
    \sum_{o \text{ ended at } t} n_o` (the same for kW), and the capacity, power and
    absorption rows hold :math:`R`, :math:`K` and inference only. The LP is the same (a
    linear substitution), but an option column has four entries besides its assignment row
    instead of three per covered hour, which measured several times faster in the master's
    interior-point solves (the classical time-indexed "on/off" reformulation; Pochet &
    Wolsey, *Production Planning by Mixed Integer Programming*, Springer 2006, §4).
    """
    n_c = len(cls.rep)
    assign_row = np.full(len(sets.job_gpus), -1, dtype=np.int64)
    assign_row[cls.rep] = np.arange(n_c)
    demands = np.flatnonzero(sets.inf_gpus > 0)
    serve_row = np.full(len(sets.inf_gpus), -1, dtype=np.int64)
    serve_row[demands] = n_c + np.arange(len(demands))
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    cap_base = n_c + len(demands)
    pow_base = cap_base + n_s * n_t * n_g
    has_abs = (sets.surplus_kw > ABSORB_EPS_KW) & (sets.ci_g_per_kwh > 0)
    absorb_row = np.full((n_s, n_t), -1, dtype=np.int64)
    absorb_row[has_abs] = pow_base + n_s * n_t + np.arange(int(has_abs.sum()))
    n_cell = pow_base + n_s * n_t + int(has_abs.sum())
    flow = FLOW if flow is None else flow
    if not flow:
        return Layout(cls.rep, cls.mult, assign_row, demands, serve_row, cap_base, pow_base,
                      absorb_row, n_cell, n_cell)
    return Layout(cls.rep, cls.mult, assign_row, demands, serve_row, cap_base, pow_base,
                  absorb_row, n_cell + n_s * n_t * (n_g + 1), n_cell, n_cell,
                  n_cell + n_s * n_t * n_g)


def row_bounds(sets: PlanSets, lay: Layout, fixed_gpus: np.ndarray | None = None,
               fixed_kw: np.ndarray | None = None, fixed_energy_kw: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper row bounds, less the usage of work fixed outside the model.

    ``fixed_kw`` is the fixed work's IT power (the whole gang in every slot it occupies, for
    the power rows); ``fixed_energy_kw`` the same weighted by the share of each slot it runs
    (its partial last slot: for the absorption rows, as in the MILP); default ``fixed_kw``.
    """
    n_s, n_t = sets.pue.shape
    n_c = len(lay.reps)
    lo = np.full(lay.n_rows, -INF)
    hi = np.full(lay.n_rows, INF)
    lo[:n_c] = hi[:n_c] = lay.mult
    r = lay.serve_row[lay.demands]
    lo[r] = hi[r] = sets.inf_gpus[lay.demands]
    cap = sets.gpu_cap.astype(float)                     # (S, T, G), less running work
    if fixed_gpus is not None:
        cap = cap - fixed_gpus
    hi[lay.cap_base: lay.pow_base] = cap.reshape(-1)
    pw = sets.power_rhs_kw.astype(float).copy()
    if fixed_kw is not None:
        # fixed work is whole gangs of jobs allowed at the site: a multiple of the power unit,
        # so the rounded right-hand side less it is still a valid one
        pw = pw - fixed_kw
    hi[lay.pow_base: lay.pow_base + n_s * n_t] = pw.reshape(-1)
    m = lay.absorb_row >= 0
    if fixed_energy_kw is None:
        fixed_energy_kw = fixed_kw
    hi[lay.absorb_row[m]] = 0.0 if fixed_energy_kw is None else (sets.pue * fixed_energy_kw)[m]
    if lay.flow:
        lo[lay.n_cell_rows:] = hi[lay.n_cell_rows:] = 0.0
    return lo, hi


def option_block(sets: PlanSets, lay: Layout, opts: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CSC block of option columns ``(rep, site, start)``: costs, starts, rows, values."""
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    cov = cover_index(sets, opts)
    j_of = opts[cov.option, 0]
    kw = sets.job_kw[j_of]
    gp = sets.job_gpus[j_of].astype(float)
    if lay.flow:
        # a run of covered hours enters its first hour's balance rows with +n (+kW) and the
        # hour after its last with -n (-kW); a run ending at the horizon needs no end entry
        same_prev = np.zeros(len(cov.option), dtype=bool)
        same_prev[1:] = ((cov.option[1:] == cov.option[:-1]) & (cov.site[1:] == cov.site[:-1])
                         & (cov.slot[1:] == cov.slot[:-1] + 1))
        same_next = np.zeros(len(cov.option), dtype=bool)
        same_next[:-1] = same_prev[1:]
        st = ~same_prev
        en = ~same_next & (cov.slot + 1 < n_t)
        cell_s = cov.site[st] * n_t + cov.slot[st]
        cell_e = cov.site[en] * n_t + cov.slot[en] + 1
        # K counts the whole gang's kW in a partial last slot, the absorption row only the
        # share of the slot it runs (as the MILP and the covering form): the option gives
        # back PUE × kW × (1 − share) there
        ab = lay.absorb_row[cov.site, cov.slot]
        part = (cov.energy < 1.0) & (ab >= 0)
        cols = np.concatenate([np.arange(len(opts)), cov.option[st], cov.option[st],
                               cov.option[en], cov.option[en], cov.option[part]])
        rows = np.concatenate([lay.assign_row[opts[:, 0]],
                               lay.bal_g_base + cell_s * n_g + cov.gtype[st],
                               lay.bal_k_base + cell_s,
                               lay.bal_g_base + cell_e * n_g + cov.gtype[en],
                               lay.bal_k_base + cell_e, ab[part]])
        vals = np.concatenate([np.ones(len(opts)), gp[st], kw[st], -gp[en], -kw[en],
                               (sets.pue[cov.site, cov.slot] * kw * (1.0 - cov.energy))[part]])
    else:
        cap_rows = lay.cap_base + (cov.site * n_t + cov.slot) * n_g + cov.gtype
        pow_rows = lay.pow_base + cov.site * n_t + cov.slot
        abs_rows = lay.absorb_row[cov.site, cov.slot]
        has = abs_rows >= 0
        cols = np.concatenate([np.arange(len(opts)), cov.option, cov.option, cov.option[has]])
        rows = np.concatenate([lay.assign_row[opts[:, 0]], cap_rows, pow_rows, abs_rows[has]])
        vals = np.concatenate([np.ones(len(opts)), gp, kw,
                               -(sets.pue[cov.site, cov.slot] * kw * cov.energy)[has]])
    order = np.argsort(cols, kind="stable")
    starts = np.searchsorted(cols[order], np.arange(len(opts)))
    return (option_costs(sets, opts), starts.astype(np.int32), rows[order].astype(np.int32),
            vals[order])


def pricing_duals(sets: PlanSets, lay: Layout, raw: np.ndarray) -> np.ndarray:
    r"""Master row duals in the covering form's layout, for :func:`price`.

    In the flow form an option's reduced cost involves the balance rows' duals
    :math:`\beta` (GPUs) and :math:`\gamma` (kW) at its start and end; with
    :math:`\mu_t = \beta_t - \beta_{t+1}` and :math:`\nu_t = \gamma_t - \gamma_{t+1}`
    (:math:`\beta_T = \gamma_T = 0`) it is exactly the covering form's
    :math:`P\sum_t (k_t - \nu_t) - n\sum_t \mu_t - \pi` for whole slots (absorption acts
    through :math:`K`). A partial last slot also enters its absorption row with
    :math:`\mathrm{PUE}\,P\,(1 - w)` (:func:`option_block`), which :func:`price` charges as
    the covering form's :math:`-(1 - w)\,\mathrm{PUE}\,\rho`: the returned power duals are
    :math:`\nu_t + \mathrm{PUE}_t \rho_t` and the absorption duals :math:`\rho_t`, so the
    :math:`\rho` of whole slots cancels. In the covering form ``raw`` is returned unchanged.
    """
    if not lay.flow:
        return raw
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    beta = np.zeros((n_s, n_t + 1, n_g))
    beta[:, :n_t] = raw[lay.bal_g_base: lay.bal_k_base].reshape(n_s, n_t, n_g)
    gamma = np.zeros((n_s, n_t + 1))
    gamma[:, :n_t] = raw[lay.bal_k_base: lay.bal_k_base + n_s * n_t].reshape(n_s, n_t)
    out = np.zeros(lay.n_rows)
    out[: lay.cap_base] = raw[: lay.cap_base]
    out[lay.cap_base: lay.pow_base] = (beta[:, :-1] - beta[:, 1:]).reshape(-1)
    rho = np.zeros((n_s, n_t))
    m = lay.absorb_row >= 0
    rho[m] = raw[lay.absorb_row[m]]
    out[lay.absorb_row[m]] = rho[m]
    out[lay.pow_base: lay.pow_base + n_s * n_t] = (gamma[:, :-1] - gamma[:, 1:]
                                                   + sets.pue * rho).reshape(-1)
    return out


def fixed_columns(sets: PlanSets, lay: Layout, classes: np.ndarray, integer: bool
                  ) -> dict[str, np.ndarray]:
    """Unplaced (per class), inference (per demand and site) and absorption columns.

    Parameters
    ----------
    classes
        Class positions whose unplaced column is added.
    integer
        Bound the unplaced columns by the multiplicity (MIP) instead of leaving them free (LP).
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    reps = lay.reps[classes]
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    n_u = len(classes)
    costs = [pen]
    lower = [np.zeros(n_u)]
    upper = [lay.mult[classes].astype(float) if integer else np.full(n_u, INF)]
    rows = [lay.assign_row[reps]]
    vals = [np.ones(n_u)]
    col_nnz = [np.ones(n_u, dtype=np.int64)]
    kinds = [np.zeros(n_u, dtype=np.int64)]
    # inference y_ds
    dd, ss = np.nonzero(sets.inf_sites[lay.demands])
    dd = lay.demands[dd]
    t = sets.inf_hour[dd]
    g = sets.inf_gtype[dd]
    kw = sets.inf_kw_per_gpu[dd]
    ab = lay.absorb_row[ss, t]
    costs.append(kw * sets.cost_per_kwh[ss, t])
    lower.append(np.zeros(len(dd)))
    upper.append(sets.inf_gpus[dd].astype(float))
    nnz = np.where(ab >= 0, 4, 3)
    col_nnz.append(nnz)
    r4 = np.stack([lay.serve_row[dd], lay.cap_base + (ss * n_t + t) * n_g + g,
                   lay.pow_base + ss * n_t + t, ab], axis=1)
    v4 = np.stack([np.ones(len(dd)), np.ones(len(dd)), kw, -kw * sets.pue[ss, t]], axis=1)
    keep = np.arange(4)[None, :] < nnz[:, None]
    rows.append(r4[keep])
    vals.append(v4[keep])
    kinds.append(np.ones(len(dd), dtype=np.int64))
    # absorption a_st
    sa, ta = np.nonzero(lay.absorb_row >= 0)
    costs.append(-sets.ci_g_per_kwh[sa, ta] / 1000.0)
    lower.append(np.zeros(len(sa)))
    upper.append(sets.surplus_kw[sa, ta])
    rows.append(lay.absorb_row[sa, ta])
    vals.append(np.ones(len(sa)))
    col_nnz.append(np.ones(len(sa), dtype=np.int64))
    kinds.append(np.full(len(sa), 2, dtype=np.int64))
    if lay.flow:
        # R_stg (GPUs running) and K_st (IT kW running): -1 in their hour's balance row, +1
        # in the next hour's, +1 in the capacity (power) row; K also -PUE in absorption
        n_stg = n_s * n_t * n_g
        cell = np.arange(n_stg)
        s_of, t_of = cell // (n_t * n_g), (cell // n_g) % n_t
        nxt = t_of + 1 < n_t
        r3 = np.stack([lay.bal_g_base + cell, lay.bal_g_base + cell + n_g,
                       lay.cap_base + cell], axis=1)
        v3 = np.tile([-1.0, 1.0, 1.0], (n_stg, 1))
        keep = np.ones((n_stg, 3), dtype=bool)
        keep[:, 1] = nxt
        rows.append(r3[keep])
        vals.append(v3[keep])
        col_nnz.append(keep.sum(axis=1))
        costs.append(np.zeros(n_stg))
        lower.append(np.zeros(n_stg))
        upper.append(np.full(n_stg, INF))
        kinds.append(np.full(n_stg, 4, dtype=np.int64))
        del s_of
        n_st = n_s * n_t
        cell = np.arange(n_st)
        si, ti = cell // n_t, cell % n_t
        ab = lay.absorb_row[si, ti]
        r4 = np.stack([lay.bal_k_base + cell, lay.bal_k_base + cell + 1,
                       lay.pow_base + cell, ab], axis=1)
        v4 = np.stack([np.full(n_st, -1.0), np.ones(n_st), np.ones(n_st), -sets.pue[si, ti]],
                      axis=1)
        keep = np.stack([np.ones(n_st, bool), ti + 1 < n_t, np.ones(n_st, bool), ab >= 0],
                        axis=1)
        rows.append(r4[keep])
        vals.append(v4[keep])
        col_nnz.append(keep.sum(axis=1))
        costs.append(np.zeros(n_st))
        lower.append(np.zeros(n_st))
        upper.append(np.full(n_st, INF))
        kinds.append(np.full(n_st, 5, dtype=np.int64))
    nz = np.concatenate(col_nnz)
    starts = np.concatenate([[0], np.cumsum(nz)[:-1]]).astype(np.int32)
    return {"costs": np.concatenate(costs), "lower": np.concatenate(lower),
            "upper": np.concatenate(upper), "starts": starts,
            "rows": np.concatenate(rows).astype(np.int32), "vals": np.concatenate(vals),
            "kinds": np.concatenate(kinds), "ys": np.stack([dd, ss], axis=1)}


def _limit(h: highspy.Highs, seconds: float) -> None:
    """Give the next ``run()`` ``seconds`` of HiGHS time.

    HiGHS 1.x counts its time limit over all runs of one object (ERGO-Code/HiGHS#1331,
    #1477), so the limit is set past the run time so far.
    """
    h.setOptionValue("time_limit", float(h.getRunTime()) + max(float(seconds), 0.05))


def _new_highs(threads: int, time_limit_s: float) -> highspy.Highs:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", threads)
    h.setOptionValue("time_limit", max(float(time_limit_s), 0.05))
    return h


def allowed_starts(sets: PlanSets, jobs: np.ndarray) -> np.ndarray:
    """``(n, S, T)``: the job may start at the site and slot (allowed site, inside its window).

    The horizon's end is not checked here (:func:`price` prices a start that overruns it at
    +inf).
    """
    starts = np.arange(sets.pue.shape[1])
    return (sets.job_sites[jobs][:, :, None]
            & (starts[None, None, :] >= sets.job_first[jobs][:, None, None])
            & (starts[None, None, :] <= sets.job_last[jobs][:, None, None]))


def price(sets: PlanSets, lay: Layout, duals: np.ndarray, reps: np.ndarray, k: int = 1
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` best options of each class under the duals: reduced cost, site, start.

    Parameters
    ----------
    duals
        Row duals of the master, shape ``(rows,)`` (HiGHS sign convention: reduced cost =
        cost − Aᵀ·duals).
    reps
        Representative job positions of the classes to price.

    Returns
    -------
    rc, site, start
        Arrays of shape ``(len(reps), k)`` sorted by reduced cost; ``rc`` is +inf where a
        class has fewer options.
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    mu = duals[lay.cap_base: lay.pow_base].reshape(n_s, n_t, n_g)
    nu = duals[lay.pow_base: lay.pow_base + n_s * n_t].reshape(n_s, n_t)
    rho = np.zeros((n_s, n_t))
    m = lay.absorb_row >= 0
    rho[m] = duals[lay.absorb_row[m]]
    per_kw = sets.cost_per_kwh - nu + sets.pue * rho                     # (S, T)
    per_kwh = sets.cost_per_kwh + sets.pue * rho    # the energy part: last slot × its fraction
    cum_kw = np.concatenate([np.zeros((n_s, 1)), np.cumsum(per_kw, axis=1)], axis=1)
    cum_mu = np.concatenate([np.zeros((n_s, 1, n_g)), np.cumsum(mu, axis=1)], axis=1)
    pi = duals[lay.assign_row[reps]]
    out_rc = np.full((len(reps), k), np.inf)
    out_s = np.zeros((len(reps), k), dtype=np.int64)
    out_t = np.zeros((len(reps), k), dtype=np.int64)
    dur = sets.job_dur[reps]
    gt = sets.job_gtype[reps]
    for d in np.unique(dur):
        wk = np.full((n_s, n_t), np.inf)
        wk[:, : n_t - d + 1] = cum_kw[:, d:] - cum_kw[:, : n_t - d + 1]
        el = np.zeros((n_s, n_t))
        el[:, : n_t - d + 1] = per_kwh[:, d - 1:]
        wm = np.zeros((n_s, n_t, n_g))
        wm[:, : n_t - d + 1] = cum_mu[:, d:] - cum_mu[:, : n_t - d + 1]
        for g in np.unique(gt[dur == d]):
            sel_all = np.flatnonzero((dur == d) & (gt == g))
            for c0 in range(0, len(sel_all), PRICE_CHUNK):
                sel = sel_all[c0: c0 + PRICE_CHUNK]
                j = reps[sel]
                unused = (1.0 - sets.job_last_frac[j])[:, None, None]
                rc = (sets.job_kw[j][:, None, None] * (wk[None] - unused * el[None])
                      - sets.job_gpus[j][:, None, None] * wm[None, :, :, g]
                      - pi[sel][:, None, None])                            # (n, S, T)
                rc = np.where(allowed_starts(sets, j), rc, np.inf).reshape(len(sel), -1)
                kk = min(k, rc.shape[1])
                if kk == 1:
                    best = np.argmin(rc, axis=1)[:, None]
                else:
                    part = np.argpartition(rc, kk - 1, axis=1)[:, :kk]
                    best = np.take_along_axis(
                        part, np.argsort(np.take_along_axis(rc, part, 1), axis=1), 1)
                rows = np.arange(len(sel))[:, None]
                out_rc[sel, :kk] = rc[rows, best]
                out_s[sel, :kk] = best // n_t
                out_t[sel, :kk] = best % n_t
    return out_rc, out_s, out_t


def _usage(sets: PlanSets, opts: np.ndarray, counts: np.ndarray, energy: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """GPUs ``(S, T, G)`` and IT kW ``(S, T)`` used by ``counts`` jobs on each option.

    With ``energy`` the kW are weighted by the share of each slot the job runs (its partial
    last slot), as the absorption rows count them.
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    if len(opts) == 0:
        return np.zeros((n_s, n_t, n_g)), np.zeros((n_s, n_t))
    cov = cover_index(sets, opts)
    j = opts[cov.option, 0]
    w = counts[cov.option]
    cell = cov.site * n_t + cov.slot
    gpus = np.bincount(cell * n_g + cov.gtype, weights=sets.job_gpus[j] * w,
                       minlength=n_s * n_t * n_g).reshape(n_s, n_t, n_g)
    kw_w = sets.job_kw[j] * w * (cov.energy if energy else 1.0)
    kw = np.bincount(cell, weights=kw_w, minlength=n_s * n_t).reshape(n_s, n_t)
    return gpus, kw


def _stack(reps: np.ndarray, rc: np.ndarray, ss: np.ndarray, tt: np.ndarray,
           mask: np.ndarray) -> np.ndarray:
    jj = np.repeat(reps[:, None], rc.shape[1], axis=1)
    return np.stack([jj[mask], ss[mask], tt[mask]], axis=1).astype(np.int64)


@dataclass
class Warmup:
    """Result of the Lagrangian warm-up: best bound, its duals and the options it visited."""

    bound: float
    duals: np.ndarray
    pool: np.ndarray
    iterations: int


def lagrangian_warmup(sets: PlanSets, lay: Layout, upper: float, seconds: float,
                      max_iter: int = 100_000, trace: list | None = None,
                      start: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                      ) -> Warmup:
    r"""Subgradient ascent on the Lagrangian dual of the capacity, power and absorption rows.

    For multipliers :math:`\lambda \ge 0` every class independently takes its cheapest
    option or stays unplaced, every inference demand its cheapest site, every absorption
    variable its bound; :math:`L(\lambda)` is a valid lower bound on the LP and on the MILP
    (Held, Wolfe & Crowder, "Validation of subgradient optimization", Math. Programming 6,
    1974, doi:10.1007/BF01580223). Steps are Polyak's, :math:`\theta (U - L) / \|g\|^2`,
    with :math:`\theta` halved after 10 rounds without improvement. The options chosen along
    the way seed the column-generation master, and the duals of the best round price it.

    Parameters
    ----------
    upper
        The Polyak target: an upper bound on the optimum (the greedy plan's objective), or
        the restricted master's LP value when refining its duals (``start``). [kg]
    seconds
        Time budget. [s]
    start
        Multipliers ``(lam_c, lam_p, lam_a)`` to start from (default zero), projected to
        :math:`\ge 0`.
    """
    t_end = time.perf_counter() + seconds
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    cap = sets.gpu_cap.astype(float)
    pcap = sets.power_rhs_kw.astype(float).copy()
    has_abs = lay.absorb_row >= 0
    if start is None:
        lam_c = np.zeros((n_s, n_t, n_g))
        lam_p = np.zeros((n_s, n_t))
        lam_a = np.zeros((n_s, n_t))
    else:
        lam_c, lam_p, lam_a = (np.maximum(0.0, np.asarray(x, dtype=float)) for x in start)
    best = (-np.inf, None)
    visited = []
    theta, stall = 1.0, 0
    it = 0
    while it < max_iter and time.perf_counter() < t_end:
        it += 1
        duals = _duals_from(lay, lam_c, lam_p, lam_a)
        value, opts, g_used, kw_used, a_val = lagrangian(sets, lay, lam_c, lam_p, lam_a)
        visited.append(opts)
        if len(visited) > WARMUP_KEEP_ROUNDS:
            visited.pop(0)
        if trace is not None:
            trace.append((time.perf_counter(), value))
        if value > best[0] + 1e-9 * max(1.0, abs(value)):
            best = (value, duals.copy())
            stall = 0
        else:
            stall += 1
            if stall >= WARMUP_STALL:
                theta, stall = theta / 2, 0
        gc = g_used - cap
        gp = kw_used - pcap
        ga = np.where(has_abs, a_val - sets.pue * kw_used, 0.0)
        # projected subgradient: components that would push a zero multiplier negative vanish
        gc = np.where((lam_c <= 0) & (gc < 0), 0.0, gc)
        gp = np.where((lam_p <= 0) & (gp < 0), 0.0, gp)
        ga = np.where((lam_a <= 0) & (ga < 0), 0.0, ga)
        norm = float((gc ** 2).sum() + (gp ** 2).sum() + (ga ** 2).sum())
        if norm <= 1e-12 or theta < 1e-4:
            break
        step = theta * max(upper - value, 1e-9 * abs(upper)) / norm
        lam_c = np.maximum(0.0, lam_c + step * gc)
        lam_p = np.maximum(0.0, lam_p + step * gp)
        lam_a = np.maximum(0.0, lam_a + step * ga)
    pool = np.unique(np.concatenate(visited), axis=0) if visited else np.zeros((0, 3), np.int64)
    return Warmup(bound=best[0], duals=best[1] if best[1] is not None else
                  np.zeros(lay.n_rows), pool=pool, iterations=it)


def _duals_from(lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray, lam_a: np.ndarray
                ) -> np.ndarray:
    """Row duals (HiGHS signs, assignment rows 0) from non-negative multipliers."""
    n_s, n_t = lam_p.shape
    duals = np.zeros(lay.n_rows)
    duals[lay.cap_base: lay.pow_base] = -lam_c.reshape(-1)
    duals[lay.pow_base: lay.pow_base + n_s * n_t] = -lam_p.reshape(-1)
    m = lay.absorb_row >= 0
    duals[lay.absorb_row[m]] = -lam_a[m]
    return duals


def multipliers(sets: PlanSets, lay: Layout, duals: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-negative multipliers (capacity, power, absorption) from master row duals."""
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    lam_c = np.maximum(0.0, -duals[lay.cap_base: lay.pow_base]).reshape(n_s, n_t, n_g)
    lam_p = np.maximum(0.0, -duals[lay.pow_base: lay.pow_base + n_s * n_t]).reshape(n_s, n_t)
    lam_a = np.zeros((n_s, n_t))
    m = lay.absorb_row >= 0
    lam_a[m] = np.maximum(0.0, -duals[lay.absorb_row[m]])
    return lam_c, lam_p, lam_a


def inference_prices(sets: PlanSets, lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray,
                     lam_a: np.ndarray) -> np.ndarray:
    """Lagrangian cost of one inference GPU of each active demand at each site, ``(D', S)``.

    kW × (carbon cost + power multiplier − PUE × absorption multiplier) + the GPU capacity
    multiplier of its hour and type [kg per GPU]; +inf at sites the demand may not use.
    """
    dem = lay.demands
    t_d, g_d = sets.inf_hour[dem], sets.inf_gtype[dem]
    kw_d = sets.inf_kw_per_gpu[dem]
    per_gpu = (kw_d[:, None] * (sets.cost_per_kwh[:, t_d].T + lam_p[:, t_d].T
                                - sets.pue[:, t_d].T * lam_a[:, t_d].T)
               + lam_c[:, t_d, g_d].T)
    return np.where(sets.inf_sites[dem], per_gpu, np.inf)


def lagrangian(sets: PlanSets, lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray,
               lam_a: np.ndarray):
    r"""Lagrangian function of the capacity, power and absorption rows at given multipliers.

    Every class takes its cheapest option under the prices or stays unplaced, every inference
    demand its cheapest eligible site, every absorption variable its best bound. The value is
    a valid lower bound on the LP and the MILP for any :math:`\lambda \ge 0` (weak duality),
    whatever solver produced the multipliers.

    Returns
    -------
    value, opts, gpus_used, kw_used, absorbed
        Bound [kg]; the chosen options ``(O, 3)`` (one per placed class); the GPUs ``(S, T,
        G)`` and IT kW ``(S, T)`` that choice uses and the absorption ``(S, T)`` [kW].
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    reps, mult = lay.reps, lay.mult.astype(float)
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    cap = sets.gpu_cap.astype(float)
    pcap = sets.power_rhs_kw.astype(float).copy()
    has_abs = lay.absorb_row >= 0
    ci_kg = sets.ci_g_per_kwh / 1000.0
    dem = lay.demands
    rc, ss, tt = price(sets, lay, _duals_from(lay, lam_c, lam_p, lam_a), reps, k=1)
    rc, ss, tt = rc[:, 0], ss[:, 0], tt[:, 0]
    place = rc < pen
    value = float((mult * np.minimum(rc, pen)).sum())
    opts = np.stack([reps[place], ss[place], tt[place]], axis=1)
    g_used, kw_used = _usage(sets, opts, mult[place].astype(np.int64))
    if len(dem):
        t_d, g_d = sets.inf_hour[dem], sets.inf_gtype[dem]
        kw_d = sets.inf_kw_per_gpu[dem]
        per_gpu = inference_prices(sets, lay, lam_c, lam_p, lam_a)
        site_d = np.argmin(per_gpu, axis=1)
        n_d = sets.inf_gpus[dem].astype(float)
        value += float((n_d * per_gpu[np.arange(len(dem)), site_d]).sum())
        g_used = g_used + np.bincount((site_d * n_t + t_d) * n_g + g_d, weights=n_d,
                                      minlength=n_s * n_t * n_g).reshape(n_s, n_t, n_g)
        kw_used = kw_used + np.bincount(site_d * n_t + t_d, weights=n_d * kw_d,
                                        minlength=n_s * n_t).reshape(n_s, n_t)
    take = has_abs & (lam_a < ci_kg)
    a_val = np.where(take, sets.surplus_kw, 0.0)
    value += float(((lam_a - ci_kg) * a_val).sum())
    value -= float((lam_c * cap).sum() + (lam_p * pcap).sum())
    return value, opts, g_used, kw_used, a_val


SPLIT_SHARE = float(os.environ.get("CARBONSCHED_CG_SPLIT", "0.25"))
"""Share of the budget for the type-split bound (:func:`split_bound`); 0 turns it off."""
SITE_SHARE = float(os.environ.get("CARBONSCHED_CG_SITE", "0"))
"""Share of the budget for the site-split bound (:func:`site_bound`); 0 (default) turns it
off: measured on 1k × 16 × 48 at load 0.6 it raised the bound by 0.3 kg (229.74 → 230.02)
against 13.3 kg for the GPU-type split, with the master's duals as multipliers."""
SPLIT_ENUM_MAX = 400_000
"""GPU types with more feasible options than this keep their Lagrangian term in the split
bound (enumerating them costs more than it can prove in the budget)."""
SPLIT_MIN_DELTA = 0.1
"""A type's MIP is skipped when the option cap forces its reduced-cost threshold below this
share of the gap (it could then raise the bound by little more than the threshold)."""
SPLIT_MIP_MAX = 40_000
"""Most options in one GPU type's subproblem MIP; the reduced-cost threshold is lowered
to keep it there (the bound stays valid: see :func:`split_bound`)."""


@dataclass
class SplitBound:
    """Outcome of :func:`split_bound`."""

    bound: float
    lagrangian: float
    per_type: dict
    """By GPU type: ``(lagrangian term, proven term, options in the MIP, MIP status)``."""
    options: np.ndarray
    """``(O, 3)`` ``(representative, site, start)`` of the subproblem MIPs' solutions."""
    counts: np.ndarray
    columns: np.ndarray | None = None
    """Every option the subproblem MIPs had (reduced cost below their thresholds)."""


def split_bound(sets: PlanSets, lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray,
                lam_a: np.ndarray, upper: float, seconds: float, threads: int,
                say=None) -> SplitBound:
    r"""Lagrangian bound with power and absorption relaxed and GPU capacity kept.

    With multipliers :math:`\lambda^P, \lambda^A \ge 0` on the power and absorption rows the
    problem separates by GPU type :math:`g` (capacity rows are per type, inference uses one
    type): :math:`z \ge \sum_g V_g(\lambda) + \kappa(\lambda)`, where :math:`V_g` is the
    type's own scheduling MIP (assignment, inference, capacity) with per-kW prices
    :math:`k_{st} + \lambda^P_{st} - \mathrm{PUE}_{st}\lambda^A_{st}` and :math:`\kappa` the
    absorption and :math:`-\lambda^P \bar P` terms. Each :math:`V_g` is bounded below by
    its capacity-relaxed Lagrangian :math:`L_g(\lambda^C)` (the classic bound, summing to
    :func:`lagrangian`); and since every solution of the type's problem has value at least
    :math:`L_g + \sum_o \bar c_o x_o` with non-negative reduced costs :math:`\bar c_o`, a
    solution below :math:`L_g + \Delta` uses only options with :math:`\bar c_o < \Delta`.
    Hence :math:`V_g \ge \min(L_g + \Delta, B_g)`, :math:`B_g` the dual bound of the MIP
    over those options — valid for any :math:`\Delta`, which is lowered until the MIP has at
    most :data:`SPLIT_MIP_MAX` options (reduced-cost fixing; Nemhauser & Wolsey, *Integer
    and Combinatorial Optimization*, Wiley 1988, §II.5; for the decomposition by resource,
    Guignard, "Lagrangean relaxation", TOP 11, 2003, doi:10.1007/BF02579036).

    The capacity rows are where few-GPU types lose integrality (a gang of 4 cannot use three
    free GPUs), which the LP and :func:`lagrangian` cannot see.

    Parameters
    ----------
    lam_c, lam_p, lam_a
        Non-negative multipliers of the capacity ``(S, T, G)``, power and absorption
        ``(S, T)`` rows (any values give a valid bound).
    upper
        Objective of the best plan known; no threshold above ``upper − L`` is needed. [kg]
    seconds
        Time for all subproblem MIPs. [s]
    """
    t_end = time.perf_counter() + seconds
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    reps, mult = lay.reps, lay.mult
    value, _, _, _, a_val = lagrangian(sets, lay, lam_c, lam_p, lam_a)
    # per-class and per-demand terms of the Lagrangian, to split it by type
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    rc1 = price(sets, lay, _duals_from(lay, lam_c, lam_p, lam_a), reps, k=1)[0][:, 0]
    class_term = mult * np.minimum(rc1, pen)
    kprice = sets.cost_per_kwh + lam_p - sets.pue * lam_a                   # (S, T) [kg/kWh]
    dem = lay.demands
    # the GPUs free in each hour (less the work already running), as :func:`lagrangian`'s
    # capacity term: with the installed count here the bound once exceeded the optimum
    # (a GPU busy in hour 0 counted free by the type's MIP, and its price counted twice)
    cap = sets.gpu_cap.astype(float)                                       # (S, T, G)
    dem_term = np.zeros(len(dem))
    if len(dem):
        t_d, g_d = sets.inf_hour[dem], sets.inf_gtype[dem]
        per_gpu = (sets.inf_kw_per_gpu[dem][:, None] * kprice[:, t_d].T
                   + lam_c[:, t_d, g_d].T)
        per_gpu = np.where(sets.inf_sites[dem], per_gpu, np.inf)
        dem_term = sets.inf_gpus[dem] * per_gpu.min(axis=1)
    g_of_c = sets.job_gtype[reps]
    g_of_d = sets.inf_gtype[dem] if len(dem) else np.zeros(0, np.int64)
    lag_g = np.array([class_term[g_of_c == g].sum() + dem_term[g_of_d == g].sum()
                      - (lam_c[:, :, g] * cap[:, :, g]).sum() for g in range(n_g)])
    const = value - lag_g.sum()
    delta_max = max(upper - value, 0.0) * (1 + 1e-9) + 1e-9
    n_win = np.clip(sets.job_last[reps] - sets.job_first[reps] + 1, 0, n_t)
    n_opt = sets.job_sites[reps].sum(axis=1) * n_win
    per_type: dict = {}
    proven_g = lag_g.copy()
    sol_o, sol_n = [np.zeros((0, 3), np.int64)], [np.zeros(0, np.int64)]
    seen = [np.zeros((0, 3), np.int64)]
    order = np.argsort([n_opt[g_of_c == g].sum() for g in range(n_g)], kind="stable")
    for g in order:
        cg = np.flatnonzero(g_of_c == g)
        dg = np.flatnonzero(g_of_d == g)
        name = str(sets.gpu_type[g])
        left = t_end - time.perf_counter()
        if len(cg) == 0 or n_opt[cg].sum() > SPLIT_ENUM_MAX or left < 0.2:
            per_type[name] = (float(lag_g[g]), float(lag_g[g]), 0, "not enumerated")
            continue
        opts = enumerate_options(sets, reps[cg])
        cov = cover_index(sets, opts)
        j = opts[cov.option, 0]
        # power sees the whole gang in every slot, absorption the share of the slot it runs
        c_tilde = option_costs(sets, opts) + np.bincount(
            cov.option, weights=sets.job_kw[j] * (lam_p[cov.site, cov.slot] - cov.energy
                                                  * (sets.pue * lam_a)[cov.site, cov.slot]),
            minlength=len(opts))
        rc = c_tilde + np.bincount(cov.option, weights=sets.job_gpus[j]
                                   * lam_c[cov.site, cov.slot, cov.gtype], minlength=len(opts))
        loc = np.full(len(sets.job_gpus), -1, dtype=np.int64)
        loc[reps[cg]] = np.arange(len(cg))
        oc = loc[opts[:, 0]]
        pi = np.minimum(np.full(len(cg), np.inf), pen[cg])
        np.minimum.at(pi, oc, rc)
        rc = rc - pi[oc]
        delta = delta_max
        if (rc < delta).sum() > SPLIT_MIP_MAX:
            delta = float(np.partition(rc, SPLIT_MIP_MAX)[SPLIT_MIP_MAX])
        if delta < SPLIT_MIN_DELTA * delta_max:
            per_type[name] = (float(lag_g[g]), float(lag_g[g]), 0,
                              f"skipped: threshold {delta:.3g} below {SPLIT_MIN_DELTA} of gap")
            continue
        keep = rc < delta
        opts, c_tilde, oc = opts[keep], c_tilde[keep], oc[keep]
        seen.append(opts)
        # the type's MIP: assignment, inference and capacity rows (covering form)
        cells = np.flatnonzero(sets.gpu_count[:, g] > 0)
        cell_row = np.full((n_s, n_t), -1, dtype=np.int64)
        n_cap = len(cells) * n_t
        cell_row[cells] = (len(cg) + len(dg) + np.arange(n_cap)).reshape(len(cells), n_t)
        h = _new_highs(threads, max(left, 0.1))
        h.setOptionValue("mip_rel_gap", 1e-4)
        lo = np.concatenate([mult[cg].astype(float), sets.inf_gpus[dem[dg]].astype(float),
                             np.full(n_cap, -INF)])
        hi = np.concatenate([mult[cg].astype(float), sets.inf_gpus[dem[dg]].astype(float),
                             cap[cells, :, g].reshape(-1)])
        h.addRows(len(lo), lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
                  np.zeros(0))
        # unplaced columns
        h.addCols(len(cg), pen[cg], np.zeros(len(cg)), mult[cg].astype(float), len(cg),
                  np.arange(len(cg), dtype=np.int32), np.arange(len(cg), dtype=np.int32),
                  np.ones(len(cg)))
        n_y = 0
        ys = np.zeros((0, 2), np.int64)
        if len(dg):
            dd, ss = np.nonzero(sets.inf_sites[dem[dg]])
            d_pos = dem[dg][dd]
            t_y = sets.inf_hour[d_pos]
            ys = np.stack([d_pos, ss], axis=1)
            n_y = len(dd)
            rows = np.stack([len(cg) + dd, cell_row[ss, t_y]], axis=1).reshape(-1)
            h.addCols(n_y, sets.inf_kw_per_gpu[d_pos] * kprice[ss, t_y], np.zeros(n_y),
                      sets.inf_gpus[d_pos].astype(float), 2 * n_y,
                      np.arange(0, 2 * n_y, 2, dtype=np.int32), rows.astype(np.int32),
                      np.ones(2 * n_y))
        cov = cover_index(sets, opts)
        cols = np.concatenate([np.arange(len(opts)), cov.option])
        rows = np.concatenate([oc, cell_row[cov.site, cov.slot]])
        vals = np.concatenate([np.ones(len(opts)),
                               sets.job_gpus[opts[cov.option, 0]].astype(float)])
        srt = np.argsort(cols, kind="stable")
        starts = np.searchsorted(cols[srt], np.arange(len(opts))).astype(np.int32)
        h.addCols(len(opts), c_tilde, np.zeros(len(opts)), mult[cg][oc].astype(float),
                  len(srt), starts, rows[srt].astype(np.int32), vals[srt])
        n_col = len(cg) + n_y + len(opts)
        h.changeColsIntegrality(n_col, np.arange(n_col, dtype=np.int32),
                                np.ones(n_col, dtype=np.uint8))
        run_highs(h)
        info = h.getInfo()
        # +inf when infeasible: no solution of the type's problem below the threshold
        db = mip_dual_bound(h, has_integers=n_col > 0)
        ms = h.getModelStatus()
        if np.isfinite(db) or db == np.inf:
            proven_g[g] = max(lag_g[g], min(lag_g[g] + delta, db))
        if info.primal_solution_status == 2:
            x = np.round(np.asarray(h.getSolution().col_value)[len(cg) + n_y:]).astype(np.int64)
            sol_o.append(opts[x > 0])
            sol_n.append(x[x > 0])
        per_type[name] = (float(lag_g[g]), float(proven_g[g]), int(len(opts)),
                          h.modelStatusToString(ms))
        if say:
            say(f"split bound, type {name}: Lagrangian {lag_g[g]:.3f} -> {proven_g[g]:.3f} "
                f"({len(opts)} options, threshold {delta:.3g}, {h.modelStatusToString(ms)})")
        del ys
    return SplitBound(bound=float(proven_g.sum() + const), lagrangian=float(value),
                      per_type=per_type, options=np.concatenate(sol_o),
                      counts=np.concatenate(sol_n), columns=np.concatenate(seen))


SITE_ENUM_MAX = 2_500_000
"""The site split enumerates every option; above this many it is not tried."""
SITE_MIP_MAX = 25_000
"""Most options in one site's MIP (the reduced-cost threshold is lowered to keep it)."""


SPLIT_NOTE_MIN_KG = 1e-3
"""A type's split bound must rise by this over its Lagrangian share to count (and be named in
the plan note): below it the total's rise is summation noise. [kg]"""


def split_rises(per_type: dict) -> list[str]:
    """``"type Lagrangian->proven"`` [kg] of the types whose split bound rose enough to count.

    A type counts when its bound rose by at least :data:`SPLIT_NOTE_MIN_KG` (the plan note;
    empty: the split bound is not adopted).
    """
    return [f"{k} {v[0]:.3f}->{v[1]:.3f}" for k, v in per_type.items()
            if v[1] >= v[0] + SPLIT_NOTE_MIN_KG]


def site_bound(sets: PlanSets, lay: Layout, raw: np.ndarray, upper: float, seconds: float,
               threads: int, say=None) -> SplitBound:
    r"""Lagrangian bound with the assignment and inference rows relaxed: one MIP per site.

    With the master's duals :math:`\pi_c` (assignment) and :math:`\sigma_d` (inference) as
    multipliers, the problem separates by site (GPU capacity, power and absorption rows are
    per site):

    .. math:: z \ge \sum_c m_c \pi_c + \sum_d N_d \sigma_d
              + \sum_c m_c \min(0, p_c - \pi_c) + \sum_s V_s(\pi, \sigma),

    :math:`V_s` the site's own MIP: options at the site with costs :math:`c_o - \pi_c`
    (at most :math:`m_c` of a class), inference with :math:`e_{ds} - \sigma_d`, absorption,
    and the site's capacity, power and absorption rows, integer — the gangs that do not fit
    a site's few GPUs or its power cap, which no LP sees. Each :math:`V_s` is bounded below by
    its own Lagrangian :math:`L_s` (capacity, power and absorption relaxed with the master's
    duals; :math:`\sum_s L_s` plus the first terms is the LP value at the LP's optimal
    duals), and as in :func:`split_bound` by :math:`\min(L_s + \Delta, B_s)` with
    :math:`B_s` the dual bound of the MIP over the options of reduced cost below
    :math:`\Delta` (a Lagrangian decomposition by site; Guignard, TOP 11, 2003,
    doi:10.1007/BF02579036; reduced-cost fixing, Nemhauser & Wolsey 1988, §II.5).

    Parameters
    ----------
    raw
        Master row duals (HiGHS signs) in the covering layout's first rows; any values
        give a valid bound.
    upper
        Objective of the best plan known. [kg]
    seconds
        Time for all site MIPs. [s]
    """
    t_end = time.perf_counter() + seconds
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    reps, mult = lay.reps, lay.mult
    pi = raw[lay.assign_row[reps]]
    dem = lay.demands
    sigma = raw[lay.serve_row[dem]] if len(dem) else np.zeros(0)
    lam_c, lam_p, lam_a = multipliers(sets, lay, raw)
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    ci_kg = sets.ci_g_per_kwh / 1000.0
    const = float((mult * pi).sum() + (sets.inf_gpus[dem] * sigma).sum()
                  + (mult * np.minimum(0.0, pen - pi)).sum())
    opts = enumerate_options(sets, reps)
    cov = cover_index(sets, opts)
    j = opts[cov.option, 0]
    loc = np.full(len(sets.job_gpus), -1, dtype=np.int64)
    loc[reps] = np.arange(len(reps))
    oc = loc[opts[:, 0]]
    cost = option_costs(sets, opts) - pi[oc]                    # relaxed-assignment cost
    r = cost + np.bincount(cov.option, weights=sets.job_gpus[j] * lam_c[cov.site, cov.slot,
                                                                          cov.gtype]
                           + sets.job_kw[j] * (lam_p[cov.site, cov.slot] - cov.energy
                                               * (sets.pue * lam_a)[cov.site, cov.slot]),
                           minlength=len(opts))
    del cov, j
    # inference columns y_ds and their reduced costs
    dd, ys = np.nonzero(sets.inf_sites[dem]) if len(dem) else (np.zeros(0, int),) * 2
    d_pos = dem[dd] if len(dem) else np.zeros(0, np.int64)
    t_y, g_y = sets.inf_hour[d_pos], sets.inf_gtype[d_pos]
    kw_y = sets.inf_kw_per_gpu[d_pos]
    cost_y = kw_y * sets.cost_per_kwh[ys, t_y] - sigma[dd]
    r_y = cost_y + lam_c[ys, t_y, g_y] + kw_y * (lam_p - sets.pue * lam_a)[ys, t_y]
    n_y = sets.inf_gpus[d_pos].astype(float)
    has_abs = lay.absorb_row >= 0
    cap = sets.gpu_count.astype(float)
    pcap = sets.power_rhs_kw
    delta_max = float("inf")
    per_site: dict = {}
    total = const
    sol_o, sol_n = [np.zeros((0, 3), np.int64)], [np.zeros(0, np.int64)]
    site_of = opts[:, 1]
    for s in range(n_s):
        on = np.flatnonzero(site_of == s)
        # the site's Lagrangian: each class all on its best option here if that is negative
        beta = np.zeros(len(reps))
        np.minimum.at(beta, oc[on], r[on])
        on_y = np.flatnonzero(ys == s)
        abs_t = np.flatnonzero(has_abs[s] & (lam_a[s] < ci_kg[s]))
        l_s = float((mult * beta).sum() + (n_y[on_y] * np.minimum(0.0, r_y[on_y])).sum()
                    + ((lam_a[s, abs_t] - ci_kg[s, abs_t]) * sets.surplus_kw[s, abs_t]).sum()
                    - (lam_c[s] * cap[s][None, :]).sum() - (lam_p[s] * pcap[s]).sum())
        total += l_s
        per_site[str(sets.site[s])] = (l_s, l_s, 0, "not run")
    lag_total = total
    if not np.isfinite(upper):
        return SplitBound(lag_total, lag_total, per_site, sol_o[0], sol_n[0])
    delta_max = max(upper - lag_total, 0.0) * (1 + 1e-9) + 1e-9
    for s in range(n_s):
        left = (t_end - time.perf_counter()) / (n_s - s)
        name = str(sets.site[s])
        l_s = per_site[name][0]
        if left < 0.1:
            continue
        on = np.flatnonzero(site_of == s)
        beta = np.zeros(len(reps))
        np.minimum.at(beta, oc[on], r[on])
        rc = r[on] - beta[oc[on]]
        delta = delta_max
        if (rc < delta).sum() > SITE_MIP_MAX:
            delta = float(np.partition(rc, SITE_MIP_MAX)[SITE_MIP_MAX])
        if delta < SPLIT_MIN_DELTA * delta_max:
            per_site[name] = (l_s, l_s, 0, f"skipped: threshold {delta:.3g}")
            continue
        sel = on[rc < delta]
        o_s = opts[sel]
        cls_here = np.unique(oc[sel])
        crow = np.full(len(reps), -1, dtype=np.int64)
        crow[cls_here] = np.arange(len(cls_here))
        n_c = len(cls_here)
        cap_base, pow_base = n_c, n_c + n_t * n_g
        abs_row = np.full(n_t, -1, dtype=np.int64)
        ab_t = np.flatnonzero(has_abs[s])
        abs_row[ab_t] = pow_base + n_t + np.arange(len(ab_t))
        n_rows = pow_base + n_t + len(ab_t)
        lo = np.full(n_rows, -INF)
        hi = np.concatenate([mult[cls_here].astype(float), np.repeat(cap[s][None, :], n_t, 0
                                                                     ).reshape(-1),
                             pcap[s], np.zeros(len(ab_t))])
        h = _new_highs(threads, left)
        h.setOptionValue("mip_rel_gap", 1e-4)
        h.addRows(n_rows, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
                  np.zeros(0))
        c2 = cover_index(sets, o_s)
        jj = o_s[c2.option, 0]
        kwc = sets.job_kw[jj]
        ar = abs_row[c2.slot]
        hv = ar >= 0
        cols = np.concatenate([np.arange(len(o_s)), c2.option, c2.option, c2.option[hv]])
        rows = np.concatenate([crow[oc[sel]], cap_base + c2.slot * n_g + c2.gtype,
                               pow_base + c2.slot, ar[hv]])
        vals = np.concatenate([np.ones(len(o_s)), sets.job_gpus[jj].astype(float), kwc,
                               -(sets.pue[s, c2.slot] * kwc * c2.energy)[hv]])
        srt = np.argsort(cols, kind="stable")
        starts = np.searchsorted(cols[srt], np.arange(len(o_s))).astype(np.int32)
        h.addCols(len(o_s), cost[sel], np.zeros(len(o_s)), mult[oc[sel]].astype(float),
                  len(srt), starts, rows[srt].astype(np.int32), vals[srt])
        n_int = len(o_s)
        if len(on_y := np.flatnonzero(ys == s)):
            ty = t_y[on_y]
            ar_y = abs_row[ty]
            nnz = np.where(ar_y >= 0, 3, 2)
            r3 = np.stack([cap_base + ty * n_g + g_y[on_y], pow_base + ty, ar_y], axis=1)
            v3 = np.stack([np.ones(len(on_y)), kw_y[on_y], -kw_y[on_y] * sets.pue[s, ty]], 1)
            keep = np.arange(3)[None, :] < nnz[:, None]
            st_y = np.concatenate([[0], np.cumsum(nnz)[:-1]]).astype(np.int32)
            h.addCols(len(on_y), cost_y[on_y], np.zeros(len(on_y)), n_y[on_y],
                      int(nnz.sum()), st_y, r3[keep].astype(np.int32), v3[keep])
            n_int += len(on_y)
        if len(ab_t):
            h.addCols(len(ab_t), -ci_kg[s, ab_t], np.zeros(len(ab_t)),
                      sets.surplus_kw[s, ab_t], len(ab_t),
                      np.arange(len(ab_t), dtype=np.int32), abs_row[ab_t].astype(np.int32),
                      np.ones(len(ab_t)))
        h.changeColsIntegrality(n_int, np.arange(n_int, dtype=np.int32),
                                np.ones(n_int, dtype=np.uint8))
        run_highs(h)
        info = h.getInfo()
        db = mip_dual_bound(h, has_integers=n_int > 0)
        if db == np.inf:   # all zeros is a solution: "infeasible" is numerical trouble
            db = -np.inf
        ms = h.getModelStatus()
        proven = max(l_s, min(l_s + delta, db))
        total += proven - l_s
        if info.primal_solution_status == 2:
            x = np.round(np.asarray(h.getSolution().col_value)[: len(o_s)]).astype(np.int64)
            sol_o.append(o_s[x > 0])
            sol_n.append(x[x > 0])
        per_site[name] = (l_s, proven, int(len(o_s)), h.modelStatusToString(ms))
        if say:
            say(f"site bound, {name}: Lagrangian {l_s:.3f} -> {proven:.3f} ({len(o_s)} "
                f"options, threshold {delta:.3g}, {h.modelStatusToString(ms)})")
    return SplitBound(bound=float(total), lagrangian=float(lag_total), per_type=per_site,
                      options=np.concatenate(sol_o), counts=np.concatenate(sol_n))


SMOOTH_S_PER_JOB = float(os.environ.get("CARBONSCHED_CG_SMOOTH", "3e-3"))
"""Below this many seconds of budget per placeable job no master LP is solved: the bound comes
from the smoothed Lagrangian dual (:mod:`carbonsched.plan.smoothed`) and the plan from its
multipliers (10k × 16 × 48 in 20 s, load 0.3, seed 0: one interior-point master took 6 s and
bounded 6.8 % below the LP; the smoothed dual reached 0.13 % below it in 7 s, BENCHMARKS.md
section 3.15). [s]"""
def job_cost_scale(sets: PlanSets, objective_kg: float) -> float:
    """Temperature scale of the smoothed dual: the mean cost of a placeable job. [kg]

    ``objective_kg`` / placeable jobs (the greedy plan's, or the last master's LP value); an
    objective net of absorbed surplus can be 0 or negative, and then a tenth of the mean
    unplaced penalty (the penalty is 10 x the dirtiest hour's cost) stands in.
    """
    n = max(len(sets.placeable), 1)
    if np.isfinite(objective_kg) and objective_kg / n > 0:
        return float(objective_kg / n)
    pen = np.abs(sets.unplaced_cost[sets.placeable]) if len(sets.placeable) else np.zeros(0)
    return float(max(pen.mean() / 10.0 if len(pen) else 0.0, 1e-6))
SMOOTH_PLAN_SHARE = float(os.environ.get("CARBONSCHED_CG_SMOOTH_PLAN", "0.4"))
"""Share of the budget the smoothed dual leaves to the plan: 8 s of 20 for the priced greedy,
the repack and its completion and the site pass. With 0.3 the bound rose by at most 0.1 kg
(one temperature then) and the plans of all five 10k seeds at load 0.3 were worse (1.3-2.2 %
gaps against 0.5-0.8 %; BENCHMARKS.md section 3.15). [-]"""
MOVES_SHARE = float(os.environ.get("CARBONSCHED_CG_MOVES", "0.1"))
"""Most of the budget kept back from the passes for :func:`carbonsched.plan.local.improve`
on the final plan (:func:`moves_hold_s`; it gets whatever is left then); 0 turns the moves
off. [-]"""
MOVES_FIRST_MAX_JOBS = 2_000
"""Up to this many placeable jobs the moves also run on the best plan before the passes. [-]"""
MOVES_S_PER_JOB = 8e-4
"""Time kept back per placeable job when that is less: a pass of moves over 10,000 jobs took
about 2 s (10k x 16 x 48, idle machine), the blocker check of the ejections about 1 s more
and the rebuild of the plan 0.5 s; room for two passes. [s]"""


def moves_hold_s(time_limit_s: float, n_jobs: int) -> float:
    """Time kept back from the passes for the final moves [s].

    ``min(MOVES_SHARE × limit, MOVES_S_PER_JOB × jobs)``, or 0 when that is under half the
    per-job time: what is left after the rebuild would be less than a pass (10k jobs in a
    20 s limit: 2 s against 8 s).
    """
    per_job = MOVES_S_PER_JOB * n_jobs
    hold = min(MOVES_SHARE * time_limit_s, per_job)
    return hold if hold >= 0.5 * per_job else 0.0


def _add_moves(sets: PlanSets, cands: list, seconds: float, rec: SolverRecord, say) -> None:
    """Append the best candidate improved by moves, if anything moved.

    :func:`carbonsched.plan.local.improve` (moves, insertions, ejections) within ``seconds``
    [s]; the new candidate is named ``"<its name> + moves"``.
    """
    name, best = min(cands, key=lambda c: c[1].totals["objective"])
    tr = time.perf_counter()
    out = improve(sets, best, seconds, rec)
    if out is None:
        return
    plan, mv = out
    say(f"moves on {name}: {best.totals['objective']:.3f} -> {plan.totals['objective']:.3f} "
        f"({mv.moved} jobs moved, {mv.inserted} left-out jobs placed where they fit, "
        f"{mv.ejected} by moving one job out of their way; {time.perf_counter() - tr:.1f} s)")
    cands.append((f"{name} + moves", plan))


def usable_interior(h: highspy.Highs) -> bool:
    """Whether an interior-point master that ended imprecise still gives a usable solution.

    IPX stops with HiGHS status ``Unknown`` when it cannot reach its tolerance (seen once on
    the 50k × 16 × 48 master at load 0.3, which left the whole solve without a master). Its
    last iterate is kept when HiGHS flags primal and dual values valid and the primal rows
    hold within :data:`IMPRECISE_PRIMAL_TOL`: any non-negative multipliers give a valid
    Lagrangian bound, and the rounding re-checks every capacity.
    """
    sol = h.getSolution()
    return bool(sol.value_valid and sol.dual_valid
                and h.getInfo().max_primal_infeasibility <= IMPRECISE_PRIMAL_TOL)


def binding_cells(lay: Layout, raw: np.ndarray, scale: float) -> int:
    """Capacity, power and absorption rows whose multiplier exceeds ``BINDING_DUAL_REL × scale``.

    A basic solution has at most as many non-zero variables as the LP has rows (Bertsimas &
    Tsitsiklis, *Introduction to Linear Optimization*, Athena 1997, §2.3): one per class row
    plus one per binding capacity, power or absorption row, so a vertex splits at most about
    that many classes over several options (or between an option and staying unplaced). At
    an interior point the count estimates the fractional classes a crossover would leave.

    Parameters
    ----------
    lay
        The master's layout; rows ``lay.cap_base`` to ``lay.n_cell_rows`` are counted (the
        real capacity, power and absorption rows, in the covering and the flow form).
    raw
        The master's row duals as HiGHS returns them, shape ``(lay.n_rows,)``; these rows
        are ``<=`` rows of a minimisation, so a binding one has a negative dual. [kg per GPU,
        kg per kW]
    scale
        The largest cost of the master's initial columns (at least 1). [kg]

    Returns
    -------
    int
        The number of rows whose ``-raw`` exceeds ``BINDING_DUAL_REL × scale``.
    """
    return int((-raw[lay.cap_base: lay.n_cell_rows] > BINDING_DUAL_REL * scale).sum())


def crossover_pays(lay: Layout, raw: np.ndarray, scale: float) -> tuple[bool, int]:
    """Whether a vertex would leave no more fractional classes than the repair MIP takes.

    True with at most :data:`REPAIR_ALL_CLASSES` classes (the repair then takes every class)
    or at most :data:`REPAIR_MAX_CLASSES` binding rows (:func:`binding_cells`, returned too).
    """
    n_bind = binding_cells(lay, raw, scale)
    return len(lay.reps) <= REPAIR_ALL_CLASSES or n_bind <= REPAIR_MAX_CLASSES, n_bind


def _note(rec: SolverRecord, text: str) -> None:
    rec.note = "; ".join(x for x in (rec.note, text) if x)


def solve_colgen(sets: PlanSets, time_limit_s: float, mip_gap: float, threads: int,
                 rec: SolverRecord, started: float, progress=None,
                 cg_share: float = CG_SHARE) -> PlanResult:
    """Column generation to the exact LP bound, then a repair MIP (module docstring).

    Parameters
    ----------
    sets
        Compiled sets.
    time_limit_s
        Budget of the whole solve, counted from ``started``. [s]
    mip_gap
        Relative gap at which the repair MIP may stop. [-]
    threads
        HiGHS threads.
    rec
        Solver record to fill (``bound``, ``mip_gap``, seconds, status, note).
    started
        ``time.perf_counter()`` at the start of the solve.
    progress
        Optional callback for one-line progress messages.
    cg_share
        Share of the budget column generation may use before the repair starts. [-]

    Returns
    -------
    PlanResult
        ``optimal`` only if the LP converged, the repair MIP finished and the gap to the best
        proven bound (the LP's, the GPU-type split's, or the dual bound of a repair MIP over
        the whole model) is within ``mip_gap``; ``feasible`` otherwise; ``heuristic`` (greedy
        plan) if the repair found nothing.
    """
    from carbonsched.plan.solve import ABS_GAP_KG, relative_gap

    if getattr(sets, "slot_minutes", 60) != 60:
        raise InputError(
            f"column generation supports the hourly slot grid only, not {sets.slot_minutes}-"
            "minute slots; use method 'milp' (solve_plan's 'auto' and 'colgen' do so with a "
            "plan note)")

    held = 0.0   # time kept back for the last step (the moves), read by left()

    def left() -> float:
        return time_limit_s - (time.perf_counter() - started) - held

    def say(msg: str) -> None:
        if progress:
            progress(msg)

    if rec.name != "highs":
        _note(rec, "column generation always uses HiGHS (highspy); CBC has no in-process LP "
              "interface")
        rec.name = "highs"
    tb = time.perf_counter()
    cls = job_classes(sets)
    lay = make_layout(sets, cls)
    reps = cls.rep
    greedy = greedy_from_sets(sets)
    g_opts = _plan_options(sets, cls, greedy)
    rc0, s0, st0 = price(sets, lay, np.zeros(lay.n_rows), reps, k=1)
    seeds = [g_opts, _stack(reps, rc0, s0, st0, np.isfinite(rc0))]
    lag_lb = -np.inf
    warm_duals = np.zeros(lay.n_rows)
    best_lam = multipliers(sets, lay, warm_duals)   # multipliers of the best bound so far
    warm_s = 0.0
    if WARMUP_SHARE > 0:
        tw = time.perf_counter()
        big = len(reps) > WARMUP_BIG_CLASSES
        wu = lagrangian_warmup(sets, lay, greedy.totals["objective"],
                               (WARMUP_SHARE_BIG if big else WARMUP_SHARE) * time_limit_s,
                               max_iter=WARMUP_MAX_ROUNDS_BIG if big else WARMUP_MAX_ROUNDS)
        lag_lb = wu.bound
        warm_duals = wu.duals
        best_lam = multipliers(sets, lay, wu.duals)
        warm_s = time.perf_counter() - tw
        seeds.append(wu.pool)
        rcw, sw, tw = price(sets, lay, np.where(np.arange(lay.n_rows) < len(reps), 0.0, wu.duals),
                            reps, k=WARMUP_TOP_K)
        seeds.append(_stack(reps, rcw, sw, tw, np.isfinite(rcw)))
        say(f"Lagrangian warm-up: {wu.iterations} rounds, bound {wu.bound:.3f}, "
            f"{len(wu.pool)} options visited")
    # a budget too short for a master LP and a plan (10k x 16 x 48 in 20 s: one interior-point
    # master took 6 s and its duals bounded worse than the warm-up): the smoothed dual instead
    short = time_limit_s < SMOOTH_S_PER_JOB * max(len(sets.placeable), 1)
    priced_by = "warm-up"   # whose multipliers price the plan when no master is solved
    if short and left() > SMOOTH_PLAN_SHARE * time_limit_s:
        from carbonsched.plan.smoothed import smoothed_ascent

        sd = smoothed_ascent(sets, lay, left() - SMOOTH_PLAN_SHARE * time_limit_s,
                             job_cost_scale(sets, greedy.totals["objective"]), start=best_lam)
        warm_s += sd.seconds
        seeds.append(sd.pool)
        say(f"smoothed dual: {sd.evaluations} evaluations, bound {sd.bound:.3f} "
            f"({sd.seconds:.1f} s)")
        head = (f"short budget ({time_limit_s:.1f} s for {len(sets.placeable)} jobs, less "
                f"than {SMOOTH_S_PER_JOB * 1000:g} ms per job): no master LP; ")
        if sd.bound > lag_lb:
            was = f"{lag_lb:.3f} (warm-up) -> " if np.isfinite(lag_lb) else ""
            _note(rec, head + f"the bound is the smoothed Lagrangian dual's, {was}"
                  f"{sd.bound:.3f} kg ({sd.evaluations} L-BFGS-B evaluations, "
                  f"{sd.seconds:.1f} s)")
            lag_lb, warm_duals = sd.bound, sd.duals
            best_lam = multipliers(sets, lay, sd.duals)
            priced_by = "smoothed dual"
        else:
            _note(rec, head + f"the smoothed Lagrangian dual reached {sd.bound:.3f} kg "
                  f"({sd.evaluations} L-BFGS-B evaluations, {sd.seconds:.1f} s), not above "
                  f"the warm-up's {lag_lb:.3f}, which is kept")
    elif short:
        _note(rec, f"short budget ({time_limit_s:.1f} s for {len(sets.placeable)} jobs): no "
              f"master LP, and no time for the smoothed dual ({max(left(), 0.0):.1f} s left "
              "after the warm-up); the bound is the warm-up's")
    pool = np.unique(np.concatenate(seeds), axis=0)
    lo, hi = row_bounds(sets, lay)
    h = _new_highs(threads, max(left(), 0.1))
    use_ipm = MASTER_SOLVER == "ipm" or (MASTER_SOLVER == "auto"
                                         and len(reps) > IPM_MIN_CLASSES)
    if use_ipm:
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
        # the bound is the Lagrangian of whatever duals come out (valid for any), so the
        # interior point need not polish them: measured 59 iterations to 1e-5 where the
        # default 1e-8 had not finished after 90 s on the 10k × 16 × 48 master at load 0.6
        h.setOptionValue("ipm_optimality_tolerance", IPM_TOL)
    else:
        h.setOptionValue("simplex_strategy", SIMPLEX_STRATEGY)
    h.addRows(lay.n_rows, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    fx = fixed_columns(sets, lay, np.arange(len(reps)), integer=False)
    n_fixed = len(fx["costs"])
    h.addCols(n_fixed, fx["costs"], fx["lower"], fx["upper"], len(fx["rows"]), fx["starts"],
              fx["rows"], fx["vals"])
    c, st, ri, va = option_block(sets, lay, pool)
    h.addCols(len(pool), c, np.zeros(len(pool)), np.full(len(pool), INF), len(ri), st, ri, va)
    rec.build_seconds = time.perf_counter() - tb - warm_s   # sets, classes, seeds, master
    say(f"column generation: {len(sets.placeable)} jobs in {len(reps)} classes, "
        f"{len(pool)} initial columns")
    scale = max(float(np.abs(c).max(initial=1.0)), 1e-9)
    lb = lag_lb
    it = 0
    converged = False
    vertex = False
    # (option values, pricing duals, raw row duals, pool size, at a vertex) of the last
    # solved master
    good = None
    z_good = np.inf
    ts = time.perf_counter()
    # the masters' share of the budget, the first one's too: cut, it leaves the warm-up's
    # bound (10k x 16 x 48 at load 0.6, seed 0, two solves sharing the 2 cores: 2754.9
    # against 3396.9 when it ends)
    share = max(cg_share, CG_EXTEND_SHARE)
    tail = max((1 - share) * time_limit_s, tail_s(sets))   # kept after the last master
    n_imprecise = 0   # masters whose interior point ended imprecise, used all the same
    while not short:
        it += 1
        _limit(h, left() - tail)
        tr = time.perf_counter()
        if it == 1 and os.environ.get("CARBONSCHED_CG_WRITE"):   # debugging aid
            h.writeModel(os.environ["CARBONSCHED_CG_WRITE"])
        run_highs(h)
        t_lp = time.perf_counter() - tr
        ms = h.getModelStatus()
        imprecise = (use_ipm and ms == highspy.HighsModelStatus.kUnknown
                     and usable_interior(h))
        if imprecise:
            n_imprecise += 1
            say(f"round {it}: the interior point ended imprecise (HiGHS status Unknown, "
                f"primal infeasibility {h.getInfo().max_primal_infeasibility:.2g}); used as "
                "the master's solution")
        if ms != highspy.HighsModelStatus.kOptimal and not imprecise:
            _note(rec, f"master LP stopped: {h.modelStatusToString(ms)}")
            # the interrupted interior point's last iterate still gives multipliers (the
            # Lagrangian bound is valid for any non-negative ones)
            # (HiGHS flags them not valid; after an earlier master they may be its duals)
            cut = np.asarray(h.getSolution().row_dual)
            if len(cut) == lay.n_rows and np.isfinite(cut).all() and np.abs(cut).any():
                lam = multipliers(sets, lay, pricing_duals(sets, lay, cut))
                v = lagrangian(sets, lay, *lam)[0]
                say(f"round {it}: bound {v:.3f} from the row duals HiGHS returned for the "
                    "stopped master")
                if v > lb:
                    lb, best_lam = v, lam
                    _note(rec, f"bound {v:.3f} from the row duals HiGHS returned for the "
                          "stopped master (flagged not valid; any non-negative multipliers "
                          "give a valid bound)")
            break
        z = h.getInfo().objective_function_value
        sol = h.getSolution()
        raw = np.asarray(sol.row_dual)
        duals = pricing_duals(sets, lay, raw)
        # an imprecise end is no vertex even with the crossover asked for
        good = (np.asarray(sol.col_value)[n_fixed: n_fixed + len(pool)], duals, raw,
                len(pool), bool(vertex) and not imprecise)
        z_good = z
        tr = time.perf_counter()
        for cand in (raw, duals) if lay.flow else (raw,):
            lam = multipliers(sets, lay, cand)
            v = lagrangian(sets, lay, *lam)[0]
            if v > lb:
                lb, best_lam = v, lam
        rc, bs, bt = price(sets, lay, duals, reps, k=COLUMNS_PER_ROUND)
        t_pr = time.perf_counter() - tr
        neg = rc < -RC_TOL * scale
        say(f"round {it}: LP {z:.3f}, bound {lb:.3f}, {int(neg.sum())} new columns, "
            f"pool {len(pool)} (LP {t_lp:.1f} s, pricing {t_pr:.1f} s)")
        if not neg.any() or z - lb <= max(CG_REL_TOL, CG_GAP_SHARE * mip_gap) * abs(z):
            converged = True
            break
        if (use_ipm and not vertex and z - lb <= CROSSOVER_AT * abs(z)
                and crossover_pays(lay, raw, scale)[0]):
            # the next round is likely the last: let it end at a vertex
            h.setOptionValue("run_crossover", "on")
            vertex = True
        new = _stack(reps, rc, bs, bt, neg)
        c, st, ri, va = option_block(sets, lay, new)
        h.addCols(len(new), c, np.zeros(len(new)), np.full(len(new), INF), len(ri), st, ri, va)
        pool = np.concatenate([pool, new])
        # a master cut by the time limit yields no duals, and the plan is rounded from the
        # last one solved: a further master is started only if the time its predecessor took
        # is left before the plan's least share of the budget (measured on 10k x 16 x 48 at
        # load 0.3, seed 2: the second master improved the plan from 2212.2 to 2114.3)
        if left() - ROUND_GROWTH * t_lp <= tail:
            _note(rec, "column generation stopped by the time budget; the bound is the best "
                  "Lagrangian bound reached")
            break
    if n_imprecise:
        _note(rec, f"{n_imprecise} master LP(s) ended imprecise (HiGHS status Unknown: the "
              "interior point stopped short of its tolerance) and were used as solved: their "
              "duals price the columns and give Lagrangian bounds (valid for any non-negative "
              "multipliers), their values guide the rounding")
    refine_s = min(REFINE_SHARE * time_limit_s,
                   left() - max(REFINE_KEEP_SHARE * time_limit_s, tail_s(sets)))
    refined_lam = None   # the refinement's multipliers, when it lifted the bound
    if (not converged and good is not None and REFINE_ROUNDS > 0 and refine_s > 0
            and z_good - lb > max(CG_REL_TOL, CG_GAP_SHARE * mip_gap) * abs(z_good)):
        # (subgradient: Polyak steps from the best multipliers towards the last master's LP
        # value, an upper bound on the dual optimum: measured on 10k x 16 x 48 at load 0.6
        # they lift the bound from 3305.6 to 3396.6 kg (LP 3408.9) in 60 steps, 3-4 s, where
        # another interior-point master takes 20 s)
        tr = time.perf_counter()
        if REFINE_METHOD == "smoothed":
            # the smoothed dual from the last master's duals (10k x 16 x 48 at load 0.8,
            # seed 1, one master in a 24 s budget: 3,388.4 -> 7,538.1 kg in 2.8 s; off-line,
            # 7,680.8 in 6 s; LP 7,786.1; 60 Polyak steps reached 3,901.0)
            from carbonsched.plan.smoothed import smoothed_ascent

            sd = smoothed_ascent(sets, lay, refine_s, job_cost_scale(sets, z_good),
                                 start=multipliers(sets, lay, good[1]))
            ref_bound, ref_duals = sd.bound, sd.duals
            how = f"the smoothed dual from the last master's duals ({sd.evaluations} L-BFGS-B " \
                  "evaluations)"
        else:
            ref = lagrangian_warmup(sets, lay, z_good, refine_s, max_iter=REFINE_ROUNDS,
                                    start=best_lam)
            ref_bound, ref_duals = ref.bound, ref.duals
            how = f"{ref.iterations} subgradient steps"
        if ref_bound > lb:
            _note(rec, f"bound refined from {lb:.3f} to {ref_bound:.3f} by {how} (column "
                  "generation had not converged)")
            lb, best_lam = ref_bound, multipliers(sets, lay, ref_duals)
            refined_lam = best_lam
        say(f"bound refined to {lb:.3f} by {how} ({time.perf_counter() - tr:.1f} s)")
    rec.bound = lb if np.isfinite(lb) else None
    final_x = (use_ipm and good is not None and not good[4]
               and left() > CROSSOVER_MIN_LEFT * time_limit_s)
    pays, n_bind = crossover_pays(lay, good[2], scale) if final_x else (True, 0)
    if final_x and not pays:
        # a vertex would leave more fractional classes than the repair MIP takes, and the
        # crossover costs as long as a master or longer: on 10k x 16 x 48 at load 0.8, seed
        # 4, 22.7 s of 60 for 847 fractional classes, the plan 9.5 % above the bound where
        # the interior LP's rounding and the passes reached 2.2 %
        _note(rec, f"crossover to a vertex skipped: {n_bind} binding capacity, power and "
              f"absorption rows at the last master's LP solution, more than the "
              f"{REPAIR_MAX_CLASSES} classes a repair MIP takes")
        say(f"crossover skipped: {n_bind} binding rows (the repair takes "
            f"{REPAIR_MAX_CLASSES} classes)")
    elif final_x:
        # a vertex (basic) solution has few fractional values; interior ones have many
        tr = time.perf_counter()
        h.setOptionValue("run_crossover", "on")
        _limit(h, left() - REPAIR_SHARE * time_limit_s)
        run_highs(h)
        ok = (h.getModelStatus() == highspy.HighsModelStatus.kOptimal
              and h.getInfo().basis_validity == 1)
        say(f"crossover to a vertex: {time.perf_counter() - tr:.1f} s, "
            f"{h.modelStatusToString(h.getModelStatus())}")
        if ok:
            sol = h.getSolution()
            raw = np.asarray(sol.row_dual)
            good = (np.asarray(sol.col_value)[n_fixed: n_fixed + len(pool)],
                    pricing_duals(sets, lay, raw), raw, len(pool), True)
    no_master = good is None
    if no_master:   # no master LP solved in time: price with the warm-up's multipliers
        good = (np.zeros(len(pool)), warm_duals, warm_duals, len(pool), False)
    xo, duals, row_duals, n_pool, _ = good
    pool = pool[:n_pool]
    lam_c, lam_p, lam_a = multipliers(sets, lay, duals)
    rank_kw = sets.cost_per_kwh + lam_p - sets.pue * lam_a
    placeable = sets.placeable
    lff = least_flexible_first(sets)
    # incumbent 1: Lagrangian heuristic (greedy on carbon + shadow prices)
    t_pg = time.perf_counter()
    cands = [("greedy", greedy),
             ("priced greedy", priced_greedy(sets, rank_kw, lam_c, order=lff))]
    t_pg = time.perf_counter() - t_pg
    skipped: list[str] = []

    def room(label: str) -> bool:
        """Whether one more priced greedy (as long as the first) fits before the finish."""
        # a master stopped by the limit leaves little: on 10k x 16 x 48 at load 0.8 two more
        # candidates once ended the solve at 62.7 s of 60 (BENCHMARKS.md 3.11)
        if left() >= t_pg + FINISH_S:
            return True
        skipped.append(label)
        return False

    if refined_lam is not None and room("priced greedy on the refined multipliers"):
        # the refined multipliers price the cells the last master LP left under-priced: on
        # 10k x 16 x 48 at load 0.6, seed 2 (one master in the budget) priced greedy on them
        # gave 3,551.1 kg against 3,556.3 on the master's duals (BENCHMARKS.md section 3.8)
        r_c, r_p, r_a = refined_lam
        cands.append(("priced greedy on the refined multipliers",
                      priced_greedy(sets, sets.cost_per_kwh + r_p - sets.pue * r_a, r_c,
                                    order=lff)))
    if len(placeable) <= BOTH_ORDERS_MAX_JOBS and room("largest-first priced greedy"):
        big_first = placeable[np.argsort(-(sets.job_gpus * sets.job_dur)[placeable],
                                         kind="stable")]
        cands.append(("largest-first priced greedy",
                      priced_greedy(sets, rank_kw, lam_c, order=big_first)))
    # incumbent 2: the LP rounded (largest values first) and completed by priced greedy
    floor = np.floor(xo + INTEGRAL_TOL).astype(np.int64)
    used = np.bincount(cls.of_job[pool[:, 0]], weights=floor, minlength=len(reps))
    residual = lay.mult - used.astype(np.int64)
    fixed_opts, fixed_counts = pool[floor > 0], floor[floor > 0]
    roundings = [] if no_master else [("LP rounding", round_lp(cls, pool, xo))]
    if no_master:
        # nothing to round: its completion would be priced greedy again, 1.5-2.5 s at 10k
        # jobs that a 20 s budget does not have (10k x 16 x 48 at load 0.3, two solves
        # sharing the 2 cores: 21-23.5 s with it, the same plan as priced greedy)
        _note(rec, "no master LP solved in the budget: the plan is priced greedy on the "
              f"{priced_by}'s multipliers (no LP to round)")
    elif 2 * int(fixed_counts.sum()) >= len(placeable):
        roundings.insert(0, ("LP floor", expand(cls, fixed_opts, fixed_counts)))
    else:
        # an interior LP point has few integral counts: its floor is mostly priced greedy
        # again (2 s at 10k jobs, measured), time the type pass needs more
        _note(rec, f"LP floor + priced greedy skipped (the LP's integral part holds "
              f"{int(fixed_counts.sum())} of {len(placeable)} jobs)")
    for label, part in roundings:
        if not room(f"{label} + priced greedy"):
            continue
        placed = np.zeros(len(sets.job_gpus), dtype=bool)
        placed[part[:, 0]] = True
        completion = priced_greedy(sets, rank_kw, lam_c, order=lff[~placed[lff]],
                                   prefilled=part)
        if "short" not in completion.solver.note:
            cands.append((f"{label} + priced greedy", completion))
    if skipped:
        _note(rec, f"skipped for time ({max(left(), 0.0):.1f} s of the limit left, a priced "
              f"greedy plan took {t_pg:.1f} s): " + ", ".join(skipped))
    if REPACK_MAX_OPTIONS > 0 and left() > STEP_MIN_LEFT_S:
        # the one-GPU, one-slot jobs re-placed by an LP around the rest of the best plan: they
        # fill any hole, and are most of the work a full fleet leaves out; before the moves'
        # time is held back: on a loaded fleet it gains more than they do (10k x 16 x 48 at
        # load 0.8, seed 2: 5,925.6 -> 5,473.6 kg, the moves after it 0.6 kg more)
        best_name, best_plan = min(cands, key=lambda c: c[1].totals["objective"])
        repacked = unit_repack(sets, lay, cls, best_plan, threads,
                               REPACK_SHARE * (left() - FINISH_S), say, rec,
                               prices=(rank_kw, lam_c), greedy_s=t_pg)
        if repacked is not None:
            cands.append((f"{best_name} + one-slot repack", repacked))
    if MOVES_SHARE > 0:
        # kept back from the passes for the moves on the final plan
        held = moves_hold_s(time_limit_s, len(placeable))
        if (len(placeable) <= MOVES_FIRST_MAX_JOBS and held > 0
                and left() > held + STEP_MIN_LEFT_S):
            # small instance: the passes and the repair start from the moved plan too (1k x
            # 16 x 48 at load 0.6, seed 2: 0.55 % against 0.86 % with the final moves alone;
            # at 10k, load 0.8, seed 2, the site pass gained less from the moved plan); at
            # most as long as the hold, taken from the passes
            _add_moves(sets, cands, held, rec, say)
    split_opts = np.zeros((0, 3), dtype=np.int64)
    # incumbent 3: fix-and-optimise by GPU type, few-GPU types first
    n_frac = int((residual > 0).sum())
    will_repair = 0 < n_frac <= REPAIR_MAX_CLASSES or (len(reps) <= REPAIR_ALL_CLASSES
                                                        and n_frac > 0)
    if SITE_PASS_SHARE > 0 and not will_repair and left() > 2.0:
        # without a repair MIP to follow, most of what is left goes to the site-by-site
        # search (power binds per site, across GPU types), the type pass gets the rest
        _, best_plan = min(cands, key=lambda c: c[1].totals["objective"])
        lp_site_kg = np.bincount(pool[:, 1], weights=option_costs(sets, pool) * xo,
                                 minlength=len(sets.site))
        improved = site_pass(sets, lay, cls, duals, pool[xo > INTEGRAL_TOL], lp_site_kg,
                             best_plan, threads,
                             SITE_PASS_SHARE * 0.8 * (left() - FINISH_S), mip_gap, say, rec)
        if improved is not None:
            cands.append(("site by site", improved))
    if TYPE_PASS_SHARE > 0 and left() > 2.0:
        best_name, best_plan = min(cands, key=lambda c: c[1].totals["objective"])
        # without a repair to follow (too many fractional classes) the pass takes most of
        # what is left, the split bound the rest
        tp_s = min(TYPE_PASS_SHARE * time_limit_s, 0.6 * left()) if will_repair else \
            0.8 * (left() - FINISH_S)
        improved = type_pass(sets, lay, cls, duals, pool[xo > INTEGRAL_TOL], split_opts,
                             best_plan, threads, tp_s, mip_gap, say, rec,
                             repair_follows=will_repair)
        if improved is not None:
            cands.append(("fix-and-optimise by GPU type", improved))
    if SPLIT_SHARE > 0 and left() > STEP_MIN_LEFT_S:
        upper = min(r.totals["objective"] for _, r in cands)
        tr = time.perf_counter()
        sb = split_bound(sets, lay, *best_lam, upper,
                         min(SPLIT_SHARE * time_limit_s, 0.4 * (left() - FINISH_S)), threads,
                         say)
        say(f"type-split bound {sb.bound:.3f} (Lagrangian {sb.lagrangian:.3f}, best bound "
            f"{lb:.3f}) in {time.perf_counter() - tr:.1f} s")
        split_opts = np.concatenate([sb.options, sb.columns])
        risen = split_rises(sb.per_type)
        if sb.bound > lb and risen:
            lb = sb.bound
            rec.bound = lb
            _note(rec, "bound from the GPU-type split (capacity kept, power relaxed): "
                  + ", ".join(risen))
    if SITE_SHARE > 0 and left() > STEP_MIN_LEFT_S and count_options(sets) <= SITE_ENUM_MAX:
        upper = min(r.totals["objective"] for _, r in cands)
        tr = time.perf_counter()
        sbs = site_bound(sets, lay, row_duals, upper,
                         min(SITE_SHARE * time_limit_s, 0.5 * left()), threads, say)
        say(f"site-split bound {sbs.bound:.3f} (its Lagrangian {sbs.lagrangian:.3f}, best "
            f"bound {lb:.3f}) in {time.perf_counter() - tr:.1f} s")
        split_opts = np.concatenate([split_opts, sbs.options])
        if sbs.bound > lb:
            lb = sbs.bound
            rec.bound = lb
            _note(rec, f"bound from the site split (assignment relaxed, one MIP per site): "
                  f"{sbs.bound:.3f}")
    say(f"LP {'converged' if converged else 'stopped'} after {it} rounds "
        f"({time.perf_counter() - ts:.1f} s): {int(residual.sum())} jobs of "
        f"{int((residual > 0).sum())} classes left by the LP's integral part")
    if os.environ.get("CARBONSCHED_CG_DUMP"):   # debugging aid: the state before the repair
        import pickle

        with open(os.environ["CARBONSCHED_CG_DUMP"], "wb") as fh:
            pickle.dump({"pool": pool, "xo": xo, "duals": duals, "residual": residual,
                         "fixed_opts": fixed_opts, "fixed_counts": fixed_counts,
                         "cands": [(n, r.totals["objective"]) for n, r in cands],
                         "bound": rec.bound}, fh)
    # incumbent 4: repair MIP over the residual classes and the fixed classes that share a
    # binding cell with them, started from the best plan so far
    rep_proven = False
    frac = np.flatnonzero(residual > 0)
    every = len(reps) <= REPAIR_ALL_CLASSES
    if ((0 < len(frac) <= REPAIR_MAX_CLASSES or (every and len(frac)))
            and left() > STEP_MIN_LEFT_S):
        lp_pos = pool[xo > INTEGRAL_TOL]
        in_f = np.zeros(len(reps), dtype=bool)
        in_f[frac] = True
        # neighbours: fixed classes in the binding cells where the LP put the residual work
        neigh = neighbours(sets, lay, row_duals, lp_pos[in_f[cls.of_job[lp_pos[:, 0]]]],
                           fixed_opts, cls, max(REPAIR_MAX_CLASSES - len(frac), 0))
        # large-neighbourhood search around the best plan so far: every other class keeps
        # its placements from that plan, so the plan itself is a feasible start; classes the
        # plan placed off their LP options are freed too
        lp_based = [c for c in cands if c[0].startswith("LP floor + priced greedy")]
        start_plan = min(lp_based, key=lambda c: c[1].totals["objective"])[1] \
            if lp_based and not every else min(cands, key=lambda c: c[1].totals["objective"])[1]
        say(f"repair MIP starts from {start_plan.totals['objective']:.3f}")
        start_opts = _plan_options(sets, cls, start_plan)
        lp_set = {tuple(o) for o in pool[xo > INTEGRAL_TOL].tolist()}
        moved = np.unique([cls.of_job[o[0]] for o in start_opts.tolist()
                           if tuple(o) not in lp_set]).astype(np.int64)
        rep_c = np.union1d(np.union1d(frac, neigh), moved).astype(np.int64)
        if every:                                # small instance: the MIP over every class
            rep_c = np.arange(len(reps), dtype=np.int64)
        in_rep = np.zeros(len(reps), dtype=bool)
        in_rep[rep_c] = True
        outside = ~in_rep[cls.of_job[start_opts[:, 0]]]
        fix_o, fix_n = np.unique(start_opts[outside], axis=0, return_counts=True)
        rep_opts = np.unique(np.concatenate([
            candidate_options(sets, lay, duals, reps[rep_c], pool[xo > INTEGRAL_TOL],
                              REPAIR_TOP_K),
            start_opts[~outside], split_opts[in_rep[cls.of_job[split_opts[:, 0]]]]]), axis=0)
        whole = (len(rep_c) == len(reps) and len(fix_o) == 0
                 and count_options(sets) <= REPAIR_ALL_OPTIONS)
        if whole:
            # small instance: every option of every class (the MIP is then the full model)
            rep_opts = np.unique(np.concatenate([rep_opts, enumerate_options(sets, reps)]),
                                 axis=0)
        out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), rep_c,
                     lay.mult[rep_c], rep_opts, threads, max(left() - FINISH_S, 0.5), mip_gap,
                     say, start=start_plan)
        if out is not None:
            chosen, alloc, rep_proven, rep_bound = out
            cands.append(("LP + repair MIP", build_plan_result(
                sets, chosen, alloc, PlanStatus.FEASIBLE, rec)))
            if whole and rep_bound is not None and rep_bound > lb + ABS_GAP_KG:
                # the MIP over the whole (class-aggregated) model: its dual bound bounds
                # the problem, and holds the gangs the LP relaxes
                say(f"bound from the repair MIP over the whole model {rep_bound:.3f} "
                    f"(was {lb:.3f})")
                _note(rec, f"bound from the MIP over every class and option: {lb:.3f} -> "
                      f"{rep_bound:.3f}")
                lb = rep_bound
                rec.bound = lb
    held = 0.0
    if MOVES_SHARE > 0 and left() > FINISH_S:
        # one-job moves, insertions and ejections on the exact objective (carbonsched.plan.
        # local): the priced greedy steers jobs by LP prices the finished plan does not need,
        # and the passes and the repair re-plan one neighbourhood at a time
        _add_moves(sets, cands, left() - FINISH_S, rec, say)
    name, res = min(cands, key=lambda c: c[1].totals["objective"])
    rec.solve_seconds = time.perf_counter() - ts + warm_s   # warm-up, master LPs, repair
    res.solver = rec
    rec.objective = res.totals["objective"]
    rec.mip_gap = relative_gap(rec.objective, rec.bound)
    status = plan_status(name, rec.mip_gap, mip_gap, converged, rep_proven)
    rec.status = res.status = status
    _note(rec, f"column generation: {it} rounds, {len(pool)} columns of "
          f"{count_options(sets)} options, {len(reps)} classes; plan from {name} ("
          + ", ".join(f"{n} {r.totals['objective']:.3f}" for n, r in cands) + ")")
    rec.seconds = time.perf_counter() - started
    return res


def plan_status(name: str, gap: float | None, mip_gap: float, converged: bool,
                rep_proven: bool) -> PlanStatus:
    """Status of column generation's plan from the candidate that won and the proof.

    Parameters
    ----------
    name
        The winning candidate's name: ``"greedy"``, or ``"greedy + <step>"`` for a step run
        on the plain greedy plan (the one-slot repack: an LP re-placed only its one-slot
        jobs), is a heuristic plan unless the gap is proven.
    gap
        Relative gap to the best proven bound (None: no bound). [-]
    mip_gap
        Requested relative gap. [-]
    converged
        Whether column generation converged (the bound is the LP's or better).
    rep_proven
        Whether the last repair MIP finished its own proof.

    Returns
    -------
    PlanStatus
        ``optimal`` when the gap is within ``mip_gap``, the LP converged and the repair
        proved (or the gap is 0); ``heuristic`` for an unproven greedy plan; else
        ``feasible``.
    """
    proven = gap is not None and gap <= mip_gap + 1e-9
    if (name == "greedy" or name.startswith("greedy + ")) and not proven:
        return PlanStatus.HEURISTIC
    if proven and converged and (rep_proven or gap == 0.0):
        return PlanStatus.OPTIMAL
    return PlanStatus.FEASIBLE


TYPE_PASS_SHARE = float(os.environ.get("CARBONSCHED_CG_TYPE_PASS", "0.3"))
"""Share of the budget for :func:`type_pass`; 0 turns it off."""
TYPE_PASS_FIRST_SHARE = 0.7
"""Share of :func:`type_pass`'s time for the types the plan leaves work of."""
TYPE_PASS_MAX_OPTIONS = 60_000
"""A GPU type with more options than this gets the generated and best-priced ones only."""
TYPE_PASS_NEIGHBOURS = 250
"""Most classes of other types freed with a type whose work the plan leaves out."""
OWN_PASS_OVERHEAD_S = 1.2
"""Seconds of a type's share kept for building the plan of its own-classes MIP (measured on
10k × 16 × 48: 1.2 s for the plan of 10,000 jobs, and HiGHS overruns a 2 s limit by 0.9 s in
its cut loop)."""


def type_pass(sets: PlanSets, lay: Layout, cls: Classes, duals: np.ndarray,
              lp_opts: np.ndarray, extra_opts: np.ndarray, plan: PlanResult, threads: int,
              seconds: float, mip_gap: float, say, rec: SolverRecord,
              repair_follows: bool = False) -> PlanResult | None:
    """Fix-and-optimise by GPU type: re-plan one type's classes with the rest fixed.

    Types with the fewest options go first; each MIP (:func:`repair`) frees every class of
    the type with all its options (or, above :data:`TYPE_PASS_MAX_OPTIONS`, the generated,
    split-bound and best-priced ones), keeps every other class where ``plan`` put it, and
    starts from ``plan``, so a pass never worsens the plan. Unless a repair MIP over every
    class follows (``repair_follows``, small instances), a type whose work ``plan`` leaves
    out first gets the MIP over its own classes alone (every option, all other types fixed:
    on 10k × 16 × 48 at load 0.6 the 238 V100M16 classes, 8,373 options, proved optimal in
    4.5 s and placed 16 of 17 left-out GPU-hours, where the MIP freeing 250 more classes got
    nowhere in its 1–3 s), then, if work is still left out, the MIP that also frees the
    classes running on its sites; and the types without left-out work go largest first.
    With a repair to follow, the order is the one measured best on 1k × 16 × 48 at load 0.6
    (the wide MIP per left-out type, then the types by increasing options). The few-GPU
    types are where
    priced greedy and LP rounding leave gangs out (Helber & Sahling, "A fix-and-optimize
    approach for the multi-level capacitated lot sizing problem", Int. J. Production
    Economics 123, 2010, doi:10.1016/j.ijpe.2009.08.022).

    Returns
    -------
    PlanResult or None
        The improved plan, or None if no pass improved ``plan``.
    """
    t_end = time.perf_counter() + seconds
    overhead = plan_overhead_s(sets)
    reps = cls.rep
    g_of_c = sets.job_gtype[reps]
    n_t = len(sets.slot)
    n_win = np.clip(sets.job_last[reps] - sets.job_first[reps] + 1, 0, n_t)
    n_opt = sets.job_sites[reps].sum(axis=1) * n_win
    types = np.unique(g_of_c)
    types = types[np.argsort([n_opt[g_of_c == g].sum() for g in types], kind="stable")]
    # types with work left out first (an unplaced GPU-hour costs ten dirtiest ones), with
    # most of the time; then the others
    jpos = {jb.id: k for k, jb in enumerate(sets.problem.jobs)}
    out_jobs = _left_out(sets, cls, plan, jpos)
    out_g = np.zeros(len(sets.gpu_type))
    for g, ks in out_jobs.items():
        out_g[g] = float((sets.job_gpus[ks] * sets.job_dur[ks]).sum())
    first = [g for g in types if out_g[g] > 0]
    first.sort(key=lambda g: -out_g[g])
    rest = [g for g in types if out_g[g] == 0]
    if not repair_follows:
        # without a repair MIP after the pass, the types with the most options (where most
        # of the emissions are) go first among the rest: measured on 10k × 16 × 48 at load
        # 0.3, the three smallest types' MIPs gained nothing and the largest's (G2, 2 s)
        # 2129.0 -> 2109.2 kg, when it got any time
        rest = rest[::-1]
    types = np.array(first + rest, dtype=np.int64)
    t_first = time.perf_counter() + TYPE_PASS_FIRST_SHARE * seconds if first else 0.0
    best = plan
    start_obj = plan.totals["objective"]
    # a type with work left out gets first the exact MIP over its own classes alone (all
    # their options, every other type fixed), then, if work is still left out and time
    # remains, the MIP that frees its sites' busy classes of other types too
    passes = [(k, g, own_only) for k, g in enumerate(types)
              for own_only in ((True, False) if k < len(first) and not repair_follows
                               else (False,))]
    type_end = 0.0
    for k, g, own_only in passes:
        left = t_end - time.perf_counter()
        if k < len(first):
            if own_only:
                # an even split of the types' time, but when that is too short for a MIP
                # the types that leave out the most work take it
                type_end = time.perf_counter() + max(
                    (t_first - time.perf_counter()) / (len(first) - k),
                    min(left, 1.0 + overhead))
                share = type_end - time.perf_counter() - overhead
            elif repair_follows:
                share = (t_first - time.perf_counter()) / (len(first) - k)
            else:
                share = type_end - time.perf_counter() - overhead
                if share < 1.0 or g not in _left_out(sets, cls, best, jpos):
                    continue
        elif repair_follows:
            share = left / (len(types) - k) if k < len(types) - 1 else left
        else:
            # the largest type first, with all that is left (HiGHS stops when it proves
            # its MIP); the MIP's build and the plan overrun its limit
            share = left - overhead
        if share < 0.5:
            continue
        own = np.flatnonzero(g_of_c == g).astype(np.int64)
        rep_c = own
        po = _plan_options(sets, cls, best)
        if k < len(first) and len(po) and not own_only:
            # the type's work is left out: free, too, the classes the plan runs on the sites
            # that have the type in the hours the left-out jobs could run (their power is
            # what keeps the gangs out), most overlapping first
            hot = np.zeros((len(sets.site), n_t), dtype=bool)
            for j in out_jobs[g]:
                hot[:, sets.job_first[j]: sets.job_last[j] + sets.job_dur[j]] = True
            hot &= (sets.gpu_count[:, g] > 0)[:, None]
            cv = cover_index(sets, po)
            c_hit = cls.of_job[po[cv.option[hot[cv.site, cv.slot]], 0]]
            score = np.bincount(c_hit, minlength=len(reps))
            score[own] = 0
            near = np.flatnonzero(score > 0)
            near = near[np.argsort(-score[near], kind="stable")][:TYPE_PASS_NEIGHBOURS]
            rep_c = np.union1d(own, near).astype(np.int64)
        in_rep = np.zeros(len(reps), dtype=bool)
        in_rep[rep_c] = True
        outside = ~in_rep[cls.of_job[po[:, 0]]] if len(po) else np.zeros(0, dtype=bool)
        fix_o, fix_n = np.unique(po[outside], axis=0, return_counts=True)
        if n_opt[own].sum() <= TYPE_PASS_MAX_OPTIONS:
            opts = enumerate_options(sets, reps[own])
        else:
            opts = candidate_options(sets, lay, duals, reps[own], lp_opts, REPAIR_TOP_K)
        if len(rep_c) > len(own):
            opts = np.concatenate([opts, candidate_options(
                sets, lay, duals, reps[np.setdiff1d(rep_c, own)], lp_opts, REPAIR_TOP_K)])
        if len(extra_opts):
            opts = np.concatenate([opts, extra_opts[in_rep[cls.of_job[extra_opts[:, 0]]]]])
        opts = np.unique(np.concatenate([opts, po[~outside]]), axis=0)
        out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), rep_c,
                     lay.mult[rep_c], opts, threads, share, mip_gap, say, start=best)
        if out is None:
            continue
        cand = build_plan_result(sets, out[0], out[1], PlanStatus.FEASIBLE, rec)
        if cand.totals["objective"] < best.totals["objective"] - 1e-9:
            say(f"type {sets.gpu_type[g]}{' alone' if own_only else ''}: "
                f"{best.totals['objective']:.3f} -> {cand.totals['objective']:.3f}")
            if own_only:
                _note(rec, f"{sets.gpu_type[g]} re-planned alone (its own MIP, every other "
                      f"type fixed): {best.totals['objective']:.3f} -> "
                      f"{cand.totals['objective']:.3f}")
            best = cand
    return best if best.totals["objective"] < start_obj - 1e-9 else None


SITE_PASS_SHARE = float(os.environ.get("CARBONSCHED_CG_SITE_PASS", "0.8"))
"""When no repair MIP follows, :func:`site_pass` gets this share of 0.8 × (time left −
:data:`FINISH_S`) and the type pass 0.8 × what is left after it; 0 turns the site pass off."""
SITE_PASS_MAX_LEFT_OUT = 300
"""Most classes with left-out work added to one site's neighbourhood (a loaded fleet leaves
many out; those that may run at the site first, then the costliest to leave out)."""
SITE_PASS_MAX_S = 5.0
"""Most seconds for one site's MIP (measured on 10k × 16 × 48 at load 0.6, the machine
shared by three solves: the neighbourhoods that improved the plan proved optimal in
0.8–5.6 s)."""


def site_pass(sets: PlanSets, lay: Layout, cls: Classes, duals: np.ndarray,
              lp_opts: np.ndarray, lp_site_kg: np.ndarray, plan: PlanResult, threads: int,
              seconds: float, mip_gap: float, say, rec: SolverRecord) -> PlanResult | None:
    """Large-neighbourhood search by site: re-plan everything one site runs, the rest fixed.

    Site power (IT and facility caps) binds in most site-hours of a loaded fleet (10k × 16 ×
    48 at load 0.6: 591 of 768 power rows have a non-zero dual), so it couples every GPU
    type at a site: a type re-planned alone (:func:`type_pass`) cannot move the other
    types' work out of the way, and measured from the same start it stalled 1.7 % above the
    LP (3,466.8 kg after 45 s against the LP's 3,408.9). Here a neighbourhood is every class
    with a placement at one site (freed with all its jobs, wherever the plan put them), plus
    every class with work left out, up to :data:`SITE_PASS_MAX_LEFT_OUT` (restricting those
    to the ones that may run at the site gave 3,560.6 kg against 3,452.4 on seed 0: the
    left-out V100 gangs stayed out); its MIP (:func:`repair`) gets those classes' generated
    and best-priced options, keeps every other class where ``plan`` put it and starts from
    ``plan``, so a step never worsens the plan. Sites go in decreasing order of their excess
    over the LP, the plan's grid emissions there less the LP solution's (``lp_site_kg``); a
    site whose MIP proved its neighbourhood optimal is not tried again until another site's
    step changes the plan. Measured from the same start in 15 s: 3,452.4 kg (seed 0) and
    3,477.4 kg (seed 4) against the type pass's 3,484.6 and 3,502.7 (fix-and-optimise by
    neighbourhoods of one resource: Shaw, "Using constraint programming and local search
    methods to solve vehicle routing problems", CP 1998, doi:10.1007/3-540-49481-2_30;
    Pisinger & Ropke, "Large neighborhood search", Handbook of Metaheuristics, 2010,
    doi:10.1007/978-1-4419-1665-5_13).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    duals
        ``(R,)`` master row duals in the covering form (:func:`pricing_duals`), to price each
        class's best options. [kg per row unit]
    lp_opts
        ``(O, 3)`` ``(representative, site, start)`` positions of the LP solution's support
        (candidate options of every class).
    lp_site_kg
        ``(S,)`` grid emissions of the LP solution per site, surplus not counted
        (:func:`~carbonsched.plan.sets.option_costs` × LP values). [kg]
    plan
        The plan to improve (every step starts from the best so far).
    threads
        HiGHS threads.
    seconds
        Time for the whole pass; each site MIP gets at most :data:`SITE_PASS_MAX_S`, less
        the largest overrun a step has shown (model build, HiGHS past its limit, the plan's
        build), at least :func:`plan_overhead_s`. [s]
    mip_gap
        Relative gap at which a site MIP may stop. [-]
    say
        Callable taking a one-line progress message.
    rec
        Solver record; a note names the pass when it improves the plan.

    Returns
    -------
    PlanResult or None
        The improved plan, or None if no step improved ``plan``.
    """
    t_end = time.perf_counter() + seconds
    reps = cls.rep
    n_s = len(sets.site)
    best = plan
    start_obj = plan.totals["objective"]
    changes = 0
    settled = np.full(n_s, -1)        # the change count at which a site's MIP was proven
    tried = np.full(n_s, -1)          # the change count at which a site was last tried
    steps = 0
    reserve = plan_overhead_s(sets)   # a step's time beyond its MIP's limit, largest seen
    while True:
        if t_end - time.perf_counter() < 1.0:
            break
        po = _plan_options(sets, cls, best)
        excess = np.bincount(po[:, 1], weights=option_costs(sets, po), minlength=n_s) \
            - lp_site_kg
        open_ = np.flatnonzero((settled != changes) & (tried != changes))
        if len(open_) == 0:
            break
        site = int(open_[np.argmax(excess[open_])])
        tried[site] = changes
        placed = np.bincount(cls.of_job[po[:, 0]], minlength=len(reps))
        short = np.flatnonzero(placed < lay.mult)
        if len(short) > SITE_PASS_MAX_LEFT_OUT:
            # those that may run at the site first, then the most expensive to leave out
            key = np.lexsort((-sets.unplaced_cost[reps[short]] * (lay.mult - placed)[short],
                              ~sets.job_sites[reps[short], site]))
            short = short[key[:SITE_PASS_MAX_LEFT_OUT]]
        rep_c = np.union1d(cls.of_job[po[po[:, 1] == site, 0]], short).astype(np.int64)
        if len(rep_c) == 0:
            settled[site] = changes
            continue
        in_rep = np.zeros(len(reps), dtype=bool)
        in_rep[rep_c] = True
        outside = ~in_rep[cls.of_job[po[:, 0]]]
        fix_o, fix_n = np.unique(po[outside], axis=0, return_counts=True)
        opts = np.unique(np.concatenate([
            candidate_options(sets, lay, duals, reps[rep_c], lp_opts, REPAIR_TOP_K),
            po[~outside]]), axis=0)
        limit = min(SITE_PASS_MAX_S, t_end - time.perf_counter() - reserve)
        if limit < 0.5:
            break
        ts = time.perf_counter()
        out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), rep_c,
                     lay.mult[rep_c], opts, threads, limit, mip_gap, say, start=best)
        cand = None if out is None else build_plan_result(sets, out[0], out[1],
                                                          PlanStatus.FEASIBLE, rec)
        reserve = max(reserve, time.perf_counter() - ts - limit)
        steps += 1
        if cand is None:
            continue
        if cand.totals["objective"] < best.totals["objective"] - 1e-9:
            say(f"site {sets.site[site]}: {best.totals['objective']:.3f} -> "
                f"{cand.totals['objective']:.3f}")
            best = cand
            changes += 1
        if out[2]:
            settled[site] = changes
    if best.totals["objective"] < start_obj - 1e-9:
        _note(rec, f"re-planned site by site ({steps} site MIPs, each freeing the classes a "
              f"site runs and the left-out work): {start_obj:.3f} -> "
              f"{best.totals['objective']:.3f}")
        return best
    return None


def tail_s(sets: PlanSets) -> float:
    """Seconds kept after the last master for the steps that always follow it. [s]

    :data:`TAIL_S_PER_JOB` per placeable job: on 10k × 16 × 48 at load 0.3 with a 20 s
    limit the pricing, the priced greedy plan (1.7–2.5 s), its build (0.5 s) and the recount
    (1.6 s) took about 4.5 s after a master that ended at 85 % of the limit, and the solve
    ended at 21.5 s (BENCHMARKS.md section 3.13).
    """
    return TAIL_S_PER_JOB * len(sets.placeable)


def plan_overhead_s(sets: PlanSets) -> float:
    """Seconds kept after a pass's MIP for its build, HiGHS's overrun and the plan. [s]

    :data:`OWN_PASS_OVERHEAD_S` measured at 10,000 jobs, scaled with the jobs to place (the
    plan is built job by job): 50k × 16 × 48 at load 0.3 ran 302.2 and 305.0 s on a 300 s
    limit with the fixed 1.2 s (two solves sharing the cores).
    """
    return OWN_PASS_OVERHEAD_S * max(1.0, len(sets.placeable) / 10_000)


BOTH_ORDERS_MAX_JOBS = 2_000
"""Up to this many placeable jobs the priced greedy also runs largest first (GPU-hours) and
the better plan is kept: on 1k × 16 × 48 at load 0.6 neither order wins every seed (seed 2:
405.1 kg least flexible first, 333.4 largest first; seed 0: 268.3 and 303.1), and a run
there takes ~0.1 s. At 10k jobs least flexible first gave the better plan from the same
duals in all four off-line comparisons (loads 0.6 and 0.8, BENCHMARKS.md section 3.7), and a
second run would cost 1.3-2.5 s (idle to loaded machine) of the ~10 s the plan has after two
master LPs."""


def least_flexible_first(sets: PlanSets) -> np.ndarray:
    """Placeable jobs, most GPU-hours per feasible option first: the priced greedy's order.

    A job's options are its allowed sites × its start window, so the key is the work it
    brings divided by the room it has to go: large jobs with short windows on few sites
    first, small flexible ones last, to fill what is left. This is the least-flexible-job
    -first rule for machines with eligibility constraints (Pinedo, *Scheduling: Theory,
    Algorithms, and Systems*, 5th ed., Springer 2016, ch. 5, doi:10.1007/978-3-319-26580-3)
    weighted by the job's GPU-hours. Measured from the same LP duals (10k × 16 × 48 at load
    0.6, seeds 0 and 4; 0.8, seeds 0 and 1; 1k × 16 × 48 at 0.6, seed 1), the priced greedy
    gave 3,452.3 / 3,483.2 / 5,777.0 / 7,903.9 / 303.3 kg in this order against 3,650.6 /
    3,555.7 / 5,949.3 / 8,465.7 / 388.7 largest-first (GPU-hours alone), which left 10-1,148
    GPU-hours out where this order leaves 0-990.

    Returns
    -------
    numpy.ndarray
        Job positions, shape ``(J',)`` (``J'`` = :attr:`PlanSets.placeable`); ties keep
        ``placeable`` order.
    """
    pl = sets.placeable
    window = np.clip(sets.job_last[pl] - sets.job_first[pl] + 1, 1, None)
    n_opt = np.maximum(window * sets.job_sites[pl].sum(axis=1), 1)
    work = (sets.job_gpus * sets.job_dur)[pl].astype(float)
    return pl[np.argsort(-work / n_opt, kind="stable")]


def _left_out(sets: PlanSets, cls: Classes, plan: PlanResult,
              jpos: dict[str, int]) -> dict[int, list[int]]:
    """The placeable jobs ``plan`` leaves out (positions), by GPU type."""
    out: dict[int, list[int]] = {}
    for u in plan.unplaced:
        k = jpos[u.job_id]
        if cls.of_job[k] >= 0:
            out.setdefault(int(sets.job_gtype[k]), []).append(k)
    return out


def count_options(sets: PlanSets) -> int:
    """Number of feasible (job, site, start) options of the full model."""
    n_t = len(sets.slot)
    j = sets.placeable
    win = np.clip(sets.job_last[j] - sets.job_first[j] + 1, 0, n_t)
    return int((sets.job_sites[j].sum(axis=1) * win).sum())


def candidate_options(sets: PlanSets, lay: Layout, duals: np.ndarray, reps: np.ndarray,
                      pool: np.ndarray, k: int) -> np.ndarray:
    """The generated options of the classes of ``reps`` plus each one's ``k`` best-priced."""
    in_set = np.zeros(len(sets.job_gpus), dtype=bool)
    in_set[reps] = True
    out = [pool[in_set[pool[:, 0]]]]
    if len(reps):
        rc, ss, tt = price(sets, lay, duals, reps, k=k)
        out.append(_stack(reps, rc, ss, tt, np.isfinite(rc)))
    return np.unique(np.concatenate(out), axis=0)


def neighbours(sets: PlanSets, lay: Layout, duals: np.ndarray, cand: np.ndarray,
               fixed: np.ndarray, cls: Classes, limit: int) -> np.ndarray:
    """Fixed classes occupying a binding (capacity or power) cell that ``cand`` could use.

    Freeing them lets the repair MIP make room for the fractional classes instead of leaving
    work out. At most ``limit`` classes, those sharing the most such cells first.
    """
    if len(cand) == 0 or len(fixed) == 0 or limit <= 0:
        return np.zeros(0, dtype=np.int64)
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    tight_cap = np.abs(duals[lay.cap_base: lay.pow_base]).reshape(n_s, n_t, n_g) > 1e-9
    tight_pow = np.abs(duals[lay.pow_base: lay.pow_base + n_s * n_t]).reshape(n_s, n_t) > 1e-9
    cov = cover_index(sets, cand)
    hot_cap = np.zeros((n_s, n_t, n_g), dtype=bool)
    hot_pow = np.zeros((n_s, n_t), dtype=bool)
    hot_cap[cov.site, cov.slot, cov.gtype] = True
    hot_pow[cov.site, cov.slot] = True
    hot_cap &= tight_cap
    hot_pow &= tight_pow
    fc = cover_index(sets, fixed)
    hits = hot_cap[fc.site, fc.slot, fc.gtype] | hot_pow[fc.site, fc.slot]
    c_of = cls.of_job[fixed[:, 0]]
    score = np.bincount(c_of[fc.option[hits]], minlength=len(cls.rep))
    picked = np.flatnonzero(score > 0)
    return picked[np.argsort(-score[picked], kind="stable")][:limit]


def repair(sets: PlanSets, lay: Layout, cls: Classes, fixed_opts: np.ndarray,
           fixed_counts: np.ndarray, rep_c: np.ndarray, rhs: np.ndarray, opts: np.ndarray,
           threads: int, time_limit_s: float, mip_gap: float, say,
           start: PlanResult | None = None, relax: bool = False, price_k: int = 0,
           status_out: dict | None = None
           ) -> tuple[np.ndarray, np.ndarray, bool, float | None] | None:
    """MIP over the repair classes' candidate options, all inference and absorption.

    Capacity, power and absorption rows are reduced by the fixed classes' usage.

    With ``relax`` (which needs ``start``), the model is solved as an LP by the dual simplex
    with the inference allocation fixed at ``start``'s, and each option's count is rounded
    down (a value within :data:`REPACK_ROUND_TOL` of an integer counts as that integer): a
    feasible plan whatever the LP's values, since each cell's GPU count and IT power only grow
    with the option counts and the plan's build recomputes absorption from the placements
    (:func:`unit_repack`). With ``price_k`` > 0 as well, ``opts`` is only the start: after
    each LP the repair classes are priced on its duals (:func:`price`, up to ``price_k`` new
    options per class) and the options of negative reduced cost added, until there are none
    (the LP over every option of the repair classes is then solved) or the time is up.
    ``status_out``, if given, gets ``"status"`` (HiGHS's model status of the last run) and
    ``"complete"`` (whether the pricing ended with no option left to add).

    Returns
    -------
    (chosen, alloc, proven, bound) or None
        Per-job ``(job, site, start)`` of every placed job, the inference allocation
        ``(D, S)``, whether the MIP proved optimality within its gap (with ``relax``: whether
        the LP's values were integral), and HiGHS's dual bound on this MIP [kg] (None if not
        finite, and with ``relax``) — a bound on the whole problem only when the MIP frees
        every class over every option with nothing fixed; None if the MIP found no solution
        in the limit, or (``relax``) no LP was solved to optimality: stopped by the limit or
        infeasible.

    Raises
    ------
    ValueError
        ``relax`` without a start plan whose placements of the repair classes are among
        ``opts`` (a caller's error: :func:`unit_repack` always passes them).
    """
    gpus_fixed, kw_fixed = _usage(sets, fixed_opts, fixed_counts)
    e_fixed = _usage(sets, fixed_opts, fixed_counts, energy=True)[1]
    lo, hi = row_bounds(sets, lay, gpus_fixed, kw_fixed, e_fixed)
    free = np.ones(len(lay.reps), dtype=bool)
    free[rep_c] = False
    lo[: len(lay.reps)][free] = -INF
    hi[: len(lay.reps)][free] = INF
    lo[rep_c] = hi[rep_c] = rhs
    left_of = np.zeros(len(lay.reps), dtype=np.int64)
    left_of[rep_c] = rhs
    h = _new_highs(threads, time_limit_s)
    h.setOptionValue("mip_rel_gap", float(mip_gap) / 4)
    h.setOptionValue("mip_heuristic_effort", REPAIR_HEURISTIC_EFFORT)
    if relax:
        h.setOptionValue("solver", "simplex")
    if os.environ.get("CARBONSCHED_CG_REPAIR_LOG"):   # debugging aid
        h.setOptionValue("output_flag", True)
        h.setOptionValue("log_file", os.environ["CARBONSCHED_CG_REPAIR_LOG"])
        h.setOptionValue("log_to_console", False)
    h.addRows(lay.n_rows, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    fx = fixed_columns(sets, lay, rep_c, integer=True)
    fx["upper"][: len(rep_c)] = rhs
    nf = len(fx["costs"])
    x0 = None if start is None else _start_vector(sets, lay, cls, start, rep_c, fx, opts,
                                                   e_fixed)
    if relax:
        if x0 is None:
            raise ValueError("repair(relax=True) needs a start plan whose placements of the "
                             "repair classes are among the options")
        inf_col = np.flatnonzero(fx["kinds"] == 1)
        fx["lower"][inf_col] = fx["upper"][inf_col] = x0[inf_col]
    h.addCols(nf, fx["costs"], fx["lower"], fx["upper"], len(fx["rows"]), fx["starts"],
              fx["rows"], fx["vals"])
    c, st, ri, va = option_block(sets, lay, opts)
    ub = left_of[cls.of_job[opts[:, 0]]].astype(float)
    h.addCols(len(opts), c, np.zeros(len(opts)), ub, len(ri), st, ri, va)
    kinds = np.concatenate([fx["kinds"], np.full(len(opts), 3)])
    int_cols = np.flatnonzero(_integral(kinds)).astype(np.int32)
    if not relax:
        h.changeColsIntegrality(len(int_cols), int_cols,
                                np.full(len(int_cols), 1, dtype=np.uint8))
        if x0 is not None:
            h.setSolution(_highs_solution(x0))
    say(f"repair {'LP' if relax else 'MIP'}: {len(rep_c)} classes, {len(opts)} options, "
        f"limit {time_limit_s:.1f} s")
    t_run = time.perf_counter()
    run_highs(h)
    if relax:
        val, opts, complete = _priced_lp(sets, lay, cls, h, rep_c, left_of, opts, price_k,
                                         time_limit_s - (time.perf_counter() - t_run), say,
                                         t_run)
        if status_out is not None:
            status_out["status"] = h.modelStatusToString(h.getModelStatus())
            status_out["complete"] = complete
        if val is None:
            return None
        # rounded down (within the tolerance): each cell's GPUs and IT kW only grow with the
        # counts, so none is used more than in the LP solution
        x = np.floor(val + REPACK_ROUND_TOL).astype(np.int64)
        whole = _integral(np.concatenate([fx["kinds"], np.full(len(opts), 3)]))  # priced too
        proven = bool(np.all(np.abs(val[whole] - x[whole]) <= REPACK_ROUND_TOL))
        bound = None
    else:
        if h.getInfo().primal_solution_status != 2:
            return None
        proven = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
        bound = mip_dual_bound(h, has_integers=len(int_cols) > 0)
        x = np.round(np.asarray(h.getSolution().col_value)).astype(np.int64)
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    ys = fx["ys"]
    if len(ys):
        alloc[ys[:, 0], ys[:, 1]] = x[np.flatnonzero(fx["kinds"] == 1)]
    all_opts = np.concatenate([fixed_opts, opts])
    all_counts = np.concatenate([fixed_counts, x[nf:]])
    return (expand(cls, all_opts, all_counts), alloc, proven,
            bound if bound is not None and np.isfinite(bound) else None)


def _integral(kinds: np.ndarray) -> np.ndarray:
    """Integer columns of :func:`repair`'s model, by kind, ``(N,)`` bool.

    All but absorption (2) and the flow form's run columns (4, 5).
    """
    return (kinds != 2) & (kinds != 4) & (kinds != 5)


def _priced_lp(sets: PlanSets, lay: Layout, cls: Classes, h: highspy.Highs, rep_c: np.ndarray,
               left_of: np.ndarray, opts: np.ndarray, price_k: int, seconds: float, say,
               t_run: float) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """Pricing rounds on :func:`repair`'s relaxed model, solved once already.

    Returns
    -------
    (values, options, complete)
        Column values of the last LP solved to optimality (None if none was), the options
        its columns stand for (a round cut short by the time limit is dropped with its
        columns), and whether the pricing ended with no option of negative reduced cost left
        (the LP over every option then solved).
    """
    ok = highspy.HighsModelStatus.kOptimal
    if h.getModelStatus() != ok:
        return None, opts, False
    val = np.asarray(h.getSolution().col_value).copy()
    n_val = len(opts)
    complete = price_k <= 0    # every option given at once
    have = {tuple(o) for o in opts.tolist()} if price_k > 0 else set()
    while price_k > 0:
        # column generation over the repair classes' options (the dual simplex restarts from
        # the last basis when columns are added)
        duals = pricing_duals(sets, lay, np.asarray(h.getSolution().row_dual))
        # one more than asked: an option already in the LP may price out when it holds its
        # whole class (at its upper bound), and at most one per class can
        rc, ss, tt = price(sets, lay, duals, cls.rep[rep_c], k=price_k + 1)
        new = _stack(cls.rep[rep_c], rc, ss, tt, rc < -REPACK_RC_TOL)
        if len(new):
            new = new[[tuple(o) not in have for o in new.tolist()]]
        if len(new) == 0:
            complete = True
            break
        rest = seconds - (time.perf_counter() - t_run)
        if rest < 0.1:
            break
        c, st, ri, va = option_block(sets, lay, new)
        ub = left_of[cls.of_job[new[:, 0]]].astype(float)
        h.addCols(len(new), c, np.zeros(len(new)), ub, len(ri), st, ri, va)
        opts = np.concatenate([opts, new])
        have.update(tuple(o) for o in new.tolist())
        _limit(h, rest)
        run_highs(h)
        if h.getModelStatus() != ok:
            break
        val = np.asarray(h.getSolution().col_value).copy()
        n_val = len(opts)
        say(f"repair LP: {len(new)} options priced in, {len(opts)} in all "
            f"({time.perf_counter() - t_run:.1f} s)")
    return val, opts[:n_val], complete and n_val == len(opts)


def unit_classes(sets: PlanSets, cls: Classes) -> np.ndarray:
    """Positions of the classes whose jobs take one GPU for one slot, ``(K,)``."""
    reps = cls.rep
    return np.flatnonzero((sets.job_gpus[reps] == 1) & (sets.job_dur[reps] == 1))


def unit_repack(sets: PlanSets, lay: Layout, cls: Classes, plan: PlanResult, threads: int,
                seconds: float, say, rec: SolverRecord,
                prices: tuple[np.ndarray, np.ndarray] | None = None, greedy_s: float = 0.0
                ) -> PlanResult | None:
    """Re-place every one-GPU, one-slot job of ``plan`` by an LP, the rest of the plan fixed.

    With every other job's placement and the inference allocation fixed, these jobs form a
    transportation problem: each class sends its jobs to ``(site, slot)`` cells under the GPU
    capacity of each ``(site, slot, GPU type)``, plus the power and absorption rows. A
    transportation matrix is totally unimodular (Hoffman and Kruskal, "Integral boundary
    points of convex polyhedra", Annals of Mathematics Studies 38, 1956), so the simplex's
    vertex is integral unless a power row (kW coefficients) or a surplus limit binds; any
    value left fractional is rounded down (:func:`repair` with ``relax``), which keeps the
    plan feasible, and the note says so. These jobs are most of the work left out on a full
    fleet (10k x 16 x 48 at load 0.8, seed 4: 930 of the priced greedy's 1,001 left-out jobs),
    and a job of one slot fits any one-GPU hole: the objective of the one-slot part went from
    2,183.1 to 2,057.5 kg on the final plan of that instance (554 jobs left out), an integral
    vertex, in 6.0-7.1 s over every option at once and 2.1-2.6 s priced (BENCHMARKS.md
    section 3.14).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    plan
        The plan to improve; its other placements and its inference allocation stay (but
        for a completion, see ``prices``).
    threads
        HiGHS threads.
    seconds
        Time limit of the LP and its pricing rounds; setting up the model and building the
        plan come on top (0.4-0.7 s at 10k jobs). [s]
    say
        Progress callback.
    rec
        Solver record whose note gets the repack's outcome.
    prices
        ``(rank_kw (S, T) [kg/kWh], rank_gpu (S, T, G) [kg/GPU·h])``: when the LP was
        fractional, the jobs its rounding left out are offered to a priced greedy
        (:func:`~carbonsched.plan.baselines.priced_greedy`) around the rounded plan, and the
        better of the two plans is returned (10k x 16 x 48 at load 0.3, seed 1: the rounding
        left the plan at 2,193.7 kg, from 2,134.9 before it; completed, 2,086.4). The
        completion allocates inference afresh (the LP's allocation stays otherwise); a
        completion that leaves inference short is not used. Default: no completion.
    greedy_s
        Time a priced greedy took in this solve: the completion runs only if that much of
        ``seconds`` is left after the LP. [s]

    Returns
    -------
    PlanResult or None
        The repacked plan (a candidate: the caller keeps the best), or None if there is
        nothing to re-place, the options are too many for the time, or the LP has no
        solution (stopped by the limit, or infeasible: the start plan does not serve all
        inference, whose allocation the LP keeps).
    """
    unit_c = unit_classes(sets, cls)
    if len(unit_c) == 0:
        return None
    po = _plan_options(sets, cls, plan)
    in_u = np.zeros(len(cls.rep), dtype=bool)
    in_u[unit_c] = True
    outside = ~in_u[cls.of_job[po[:, 0]]]
    fix_o, fix_n = np.unique(po[outside], axis=0, return_counts=True)
    opts = enumerate_options(sets, cls.rep[unit_c])
    n_opts = len(opts)
    n_jobs = int(lay.mult[unit_c].sum())
    what = f"{n_jobs} one-GPU, one-slot job{'s' if n_jobs != 1 else ''}"
    expected_s = REPACK_S_PER_OPTION * n_opts
    if n_opts > REPACK_MAX_OPTIONS or expected_s > seconds:
        _note(rec, f"one-slot repack skipped: {what}, {n_opts} options (at most "
              f"{REPACK_MAX_OPTIONS}), about {expected_s:.2f} s expected, {seconds:.2f} s "
              "available")
        return None
    if REPACK_PRICE_K > 0:
        # start from the plan's own options and each class's cheapest ones; the pricing
        # adds the others the LP needs
        rc, ss, tt = price(sets, lay, np.zeros(lay.n_rows), cls.rep[unit_c], k=REPACK_PRICE_K)
        opts = np.unique(np.concatenate([po[~outside], _stack(cls.rep[unit_c], rc, ss, tt,
                                                              np.isfinite(rc))]), axis=0)
    tr = time.perf_counter()
    status: dict = {}
    out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), unit_c,
                 lay.mult[unit_c], opts, threads, seconds, 0.0, say, start=plan, relax=True,
                 price_k=REPACK_PRICE_K, status_out=status)
    took = time.perf_counter() - tr
    if out is None:
        why = status.get("status", "not run")
        if why == "Infeasible":
            why += ": the plan it starts from does not serve all inference, which it keeps"
        _note(rec, f"one-slot repack gave no plan: the LP over {what} has no solution "
              f"(HiGHS: {why}; limit {seconds:.1f} s)")
        return None
    chosen, alloc, integral, _ = out
    new = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE, rec)
    before, after = plan.totals["objective"], new.totals["objective"]
    caveats = []
    if not status.get("complete", False):
        caveats.append("pricing cut short by the limit, so not every option was offered")
    if not integral:
        caveats.append("its fractional values were rounded down")
        if prices is not None and seconds - took < greedy_s:
            caveats.append(f"no time to complete it ({max(seconds - took, 0.0):.1f} s left, a "
                           f"priced greedy took {greedy_s:.1f} s)")
        elif prices is not None:
            done = complete_plan(sets, new, *prices)
            if done is not None:
                was = {p.job_id for p in new.placements}
                now = {p.job_id for p in done.placements}
                short = "short" in done.solver.note      # inference it could not serve
                better = done.totals["objective"] < after and not short
                caveats.append(
                    f"a priced greedy around it placed {len(now - was)} left-out "
                    f"job{'s' if len(now - was) != 1 else ''}"
                    + (f" and dropped {len(was - now)}" if was - now else "")
                    + f" ({after:.3f} -> {done.totals['objective']:.3f} kg"
                    + (", inference short, not used" if short else
                       "" if better else ", not used") + ")")
                if better:
                    new, after = done, done.totals["objective"]
    if after >= before:
        caveats.append("no better, not used")
    _note(rec, f"one-slot repack: {what} re-placed by an LP ({len(unit_c)} classes, "
          f"{n_opts} options, {took:.1f} s): {before:.3f} -> {after:.3f} kg"
          + "".join(f"; {c}" for c in caveats))
    say(f"one-slot repack: {before:.3f} -> {after:.3f} kg ({took:.1f} s"
        + "".join(f"; {c}" for c in caveats) + ")")
    return new


def complete_plan(sets: PlanSets, plan: PlanResult, rank_kw: np.ndarray, rank_gpu: np.ndarray
                  ) -> PlanResult | None:
    """``plan`` with the placeable jobs it leaves out offered to a priced greedy around it.

    Parameters
    ----------
    sets
        Compiled sets.
    plan
        The plan to complete (a rounded-down repack).
    rank_kw, rank_gpu
        The greedy's prices, ``(S, T)`` [kg/kWh] and ``(S, T, G)`` [kg/GPU·h]
        (:func:`~carbonsched.plan.baselines.priced_greedy`).

    Notes
    -----
    Its placements are the greedy's prefill (those that no longer fit after the greedy's own
    inference allocation go back to its queue first); the left-out jobs follow in
    :func:`least_flexible_first` order. The result is a candidate: the caller compares.

    Returns
    -------
    PlanResult or None
        The completed plan, or None if ``plan`` leaves no placeable job out.
    """
    part = placement_positions(sets, plan.placements)
    placed = np.zeros(len(sets.job_gpus), dtype=bool)
    placed[part[:, 0]] = True
    lff = least_flexible_first(sets)
    rest = lff[~placed[lff]]
    if len(rest) == 0:
        return None
    return priced_greedy(sets, rank_kw, rank_gpu, order=rest, prefilled=part)


def _plan_options(sets: PlanSets, cls: Classes, plan: PlanResult) -> np.ndarray:
    """``(P, 3)`` ``(representative, site, start)`` of every placement of a plan."""
    pos = placement_positions(sets, plan.placements)
    pos[:, 0] = cls.rep[cls.of_job[pos[:, 0]]]
    return pos


def _highs_solution(x0: np.ndarray) -> highspy.HighsSolution:
    sol = highspy.HighsSolution()
    sol.col_value = x0.tolist()
    sol.value_valid = True
    return sol


def _start_vector(sets: PlanSets, lay: Layout, cls: Classes, plan: PlanResult,
                  rep_c: np.ndarray, fx: dict, opts: np.ndarray, e_fixed: np.ndarray
                  ) -> np.ndarray | None:
    """Column values of the repair MIP that reproduce ``plan`` on the repair classes.

    ``e_fixed`` is the fixed work's IT kW weighted by the share of each slot it runs.
    """
    po = _plan_options(sets, cls, plan)
    in_rep = np.zeros(len(lay.reps), dtype=bool)
    in_rep[rep_c] = True
    po = po[in_rep[cls.of_job[po[:, 0]]]]
    key = {tuple(o): i for i, o in enumerate(opts.tolist())}
    x_opt = np.zeros(len(opts))
    for o in po.tolist():
        i = key.get(tuple(o))
        if i is None:
            return None
        x_opt[i] += 1
    c_pos = {int(c): i for i, c in enumerate(rep_c)}
    x_u = np.zeros(len(rep_c))
    placed = np.bincount(cls.of_job[po[:, 0]], minlength=len(lay.reps)) if len(po) else \
        np.zeros(len(lay.reps), dtype=np.int64)
    for c, i in c_pos.items():
        x_u[i] = lay.mult[c] - placed[c]
    spos = {s: i for i, s in enumerate(sets.site)}
    alloc = {}
    for ip in plan.inference:
        alloc.setdefault((ip.area, ip.hour, ip.gpu_type, ip.site), 0)
        alloc[(ip.area, ip.hour, ip.gpu_type, ip.site)] += ip.gpus
    x_y = []
    prob = sets.problem
    taken: dict[tuple, int] = {}
    for d, s in fx["ys"].tolist():
        dem = prob.inference[d]
        k = (dem.area, dem.hour, dem.gpu_type, sets.site[s])
        have = alloc.get(k, 0) - taken.get(k, 0)
        v = min(have, int(sets.inf_gpus[d]))
        taken[k] = taken.get(k, 0) + v
        x_y.append(v)
    del spos
    g_rep, kw_rep = _usage(sets, po, np.ones(len(po), dtype=np.int64))
    x_run = [g_rep.reshape(-1), kw_rep.reshape(-1).copy()] if lay.flow else []
    e_rep = _usage(sets, po, np.ones(len(po), dtype=np.int64), energy=True)[1]
    for (d, s), v in zip(fx["ys"].tolist(), x_y, strict=True):
        e_rep[s, sets.inf_hour[d]] += v * sets.inf_kw_per_gpu[d]
    sa, ta = np.nonzero(lay.absorb_row >= 0)
    # absorption counts the minutes run (partial last slots), as the absorption rows do
    x_a = np.minimum(sets.surplus_kw[sa, ta], sets.pue[sa, ta] * (e_fixed + e_rep)[sa, ta])
    return np.concatenate([x_u, np.array(x_y, dtype=float), x_a, *x_run, x_opt])


def round_lp(cls: Classes, pool: np.ndarray, xo: np.ndarray) -> np.ndarray:
    """Round a fractional class solution to jobs: options by decreasing LP value.

    Each option gets round(x) of its class's jobs (largest x first, never more jobs than the
    class has); what is left is for the completion heuristic.

    Returns
    -------
    numpy.ndarray
        ``(P, 3)`` ``(job, site, start)`` in decreasing LP value.
    """
    counts = np.floor(xo + 0.5).astype(np.int64)
    order = np.argsort(-xo, kind="stable")
    order = order[counts[order] > 0]
    left = np.array([len(m) for m in cls.members], dtype=np.int64)
    take = np.zeros(len(pool), dtype=np.int64)
    c_of = cls.of_job[pool[:, 0]]
    for o in order:
        c = c_of[o]
        n = min(int(counts[o]), int(left[c]))
        take[o] = n
        left[c] -= n
    sel = order[take[order] > 0]
    return expand(cls, pool[sel], take[sel]) if len(sel) else np.zeros((0, 3), np.int64)


def expand(cls: Classes, opts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Hand each class's integer option counts to its member jobs, in option order.

    Returns
    -------
    numpy.ndarray
        ``(P, 3)`` ``(job, site, start)``, one row per placed job.
    """
    sel = counts > 0
    opts, counts = opts[sel], counts[sel]
    c_of = cls.of_job[opts[:, 0]]
    out = []
    taken = np.zeros(len(cls.rep), dtype=np.int64)
    for o in range(len(opts)):
        c, n = int(c_of[o]), int(counts[o])
        mem = cls.members[c][taken[c]: taken[c] + n]
        taken[c] += len(mem)
        out.append(np.column_stack([mem, np.full(len(mem), opts[o, 1]),
                                    np.full(len(mem), opts[o, 2])]))
    if not out:
        return np.zeros((0, 3), dtype=np.int64)
    return np.concatenate(out).astype(np.int64)
