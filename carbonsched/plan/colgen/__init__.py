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

Beyond that, measured on 1k and 10k × 16 × 48 at loads 0.6 and 0.8 (where capacity binds):

* the master optionally in the flow (start/end) form (:func:`~carbonsched.plan.colgen.layout.
  make_layout`, :attr:`ColgenOptions.flow`) and interior-point tolerance 1e-5 — the master LP
  dominates the budget at 10k (two rounds of 10–12 s each at machine load 1.7; over 60 s each with
  8–20 other processes on the 2 cores);
* the gap at load 0.6 is mostly *unplaced work of the few-GPU types* (31 V100s at 10k, 3–4 at 1k; an
  unplaced GPU-hour costs 10 × the dirtiest GPU-hour): the LP places it fractionally, the roundings
  leave whole gangs out. :func:`~carbonsched.plan.colgen.bounds.split_bound` keeps the capacity rows
  and relaxes power, so each GPU type is its own small scheduling MIP, with reduced-cost fixing to
  bound its size — on 1k at 0.6 it raised the bound from 229.74 (LP) to 243.08 in 1 s, where the
  full model's HiGHS run had 243.81 after 900 s; :func:`~carbonsched.plan.colgen.bounds.site_bound`
  (assignment relaxed, one MIP per site) is valid too but gained 0.3 kg there and is off by default;
* :func:`~carbonsched.plan.colgen.passes.type_pass`, fix-and-optimise by GPU type (few-GPU types
  first), before the repair;
* on large instances (no repair MIP to follow), :func:`~carbonsched.plan.colgen.passes.
  site_pass` first: a large-neighbourhood
  search that re-plans every class one site runs (every GPU type, plus the work left out)
  with every other class fixed — site power binds in most site-hours of a loaded fleet and couples
  the types, which a type re-planned alone cannot untangle;
* when column generation stops before converging, :attr:`ColgenOptions.refine_rounds` subgradient
  steps from the best multipliers with Polyak's step towards the last master's LP value
  :math:`z_{RMP}` (an upper bound on the dual optimum, so the step is never too short; Polyak,
  "Minimization of unsmooth functionals", USSR Comput. Math. Math. Phys. 9, 1969,
  doi:10.1016/0041-5553(69)90061-5): the interior point's approximate duals give a weak Lagrangian
  bound (3305.6 against the LP's 3408.9 on 10k × 16 × 48 at load 0.6, seed 0) which 60 steps lift to
  3396.6 in 3–4 s, where a second interior-point master takes 20 s; no master is started that the
  time left cannot finish (a cut interior-point master yields no duals), and a stopped one's last
  iterate is priced for a bound; the refined multipliers also price a greedy plan, one more
  candidate. By default the refinement is the smoothed Lagrangian dual
  (:mod:`carbonsched.plan.colgen.smoothed`, L-BFGS-B on the entropy-smoothed dual;
  docs/benchmarks/planner-log.md#planner-3-15) from the last master's duals, which lifted a
  one-master bound from 3,388.4 to 7,538.1 kg in 2.8 s (LP 7,786.1; 10k x 16 x 48 at load 0.8,
  seed 1) where the Polyak steps reached 3,901.0;
* a budget under :attr:`ColgenOptions.smooth_s_per_job` per job and 48 slots (10k jobs over 48
  hourly slots in 20 s; :func:`~carbonsched.plan.colgen.budget.short_path_s`) solves no master:
  the smoothed dual, started from the warm-up's multipliers, gives the bound (seed 0 at load
  0.3: 0.13 % below the LP in 7 s) and the multipliers the plan is priced with; in a staged
  solve's short path (before the master-LP path) earlier best iterates of it price a greedy
  plan each too (:attr:`ColgenOptions.smooth_draws`), the priced greedy not being monotone in
  its prices;
* the priced greedy (the Lagrangian heuristic every pass starts from) places jobs in
  :func:`~carbonsched.plan.colgen.classes.least_flexible_first` order, most GPU-hours per feasible
  option first: on a loaded fleet, largest-first let flexible jobs take the power and GPUs that
  short-window jobs needed (10k × 16 × 48 at load 0.8: 374 against 326 GPU-hours left out from the
  same duals); up to :attr:`ColgenOptions.both_orders_max_jobs` jobs the largest-first order runs
  too and the better plan is kept;
* :func:`~carbonsched.plan.colgen.repack.unit_repack`, before the passes: the one-GPU, one-slot jobs
  (59 % of the jobs, and 930 of the 1,001 jobs the priced greedy left out at 10k × 16 × 48, load
  0.8, seed 4) re-placed by an LP around the rest of the best plan not repacked yet (in a staged
  solve's master-LP path, not the short path's repacked plan again), with column generation over
  their options — a transportation problem, integral at its vertex unless a power row or a surplus
  limit binds (the rest rounded down); at load 0.8 it took the plan from 2.16 % to 0.35 % above the
  bound (seed 4) and from 3.69 % to 0.92 % (seed 2), where the moves' one-blocker ejections had
  found no chain to place left-out jobs along;
* last, one-job moves, insertions and ejections on the exact objective
  (:mod:`carbonsched.plan.local`) on the best plan, with :attr:`ColgenOptions.moves_share` of the
  budget kept back from the passes for them (and, up to :attr:`ColgenOptions.moves_first_max_jobs`
  jobs, on the best candidate before the passes too): the priced greedy steers jobs by LP prices the
  finished plan does not need, and every pass re-plans one neighbourhood at a time.

The reported gap is (objective − bound) / |objective| with the best of the bounds of step 3
and the split bounds, each valid for any multipliers (tests/plan/test_colgen_bound.py).

Modules, bottom up: :mod:`~.options` (:class:`ColgenOptions`, every tunable, read from the
environment once by :meth:`ColgenOptions.from_env`), :mod:`~.solver` (HiGHS objects),
:mod:`~.classes` (job classes, orders, roundings), :mod:`~.layout` (the master's rows and
column blocks), :mod:`~.pricing`, :mod:`~.lagrangian_dual` (the Lagrangian and its warm-up),
:mod:`~.smoothed` (the smoothed dual), :mod:`~.budget` (time kept back), :mod:`~.status`,
:mod:`~.state` (the state the phases share), :mod:`~.repair_mip` (repair MIP and LP),
:mod:`~.repack`, :mod:`~.bounds` (split bounds), :mod:`~.passes` (type and site passes),
:mod:`~.master` (warm-up, master rounds, refinement, crossover), :mod:`~.incumbents` and
:mod:`~.driver` (:func:`solve_colgen`).
"""

from carbonsched.plan.colgen.bounds import SplitBound, site_bound, split_bound, split_rises
from carbonsched.plan.colgen.budget import moves_hold_s, plan_overhead_s, tail_s
from carbonsched.plan.colgen.classes import (
    Classes,
    count_options,
    expand,
    job_classes,
    least_flexible_first,
    plan_options,
    round_lp,
    unit_classes,
)
from carbonsched.plan.colgen.driver import solve_colgen
from carbonsched.plan.colgen.lagrangian_dual import (
    Warmup,
    duals_from,
    inference_prices,
    job_cost_scale,
    lagrangian,
    lagrangian_warmup,
    multipliers,
)
from carbonsched.plan.colgen.layout import (
    Layout,
    allowed_starts,
    fixed_columns,
    make_layout,
    option_block,
    pricing_duals,
    row_bounds,
    usage,
)
from carbonsched.plan.colgen.master import binding_cells, crossover_pays, usable_interior
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.passes import site_pass, type_pass
from carbonsched.plan.colgen.pricing import candidate_options, price, stack_options
from carbonsched.plan.colgen.repack import complete_plan, unit_repack
from carbonsched.plan.colgen.repair_mip import neighbours, repair
from carbonsched.plan.colgen.smoothed import SmoothedDual, smoothed_ascent
from carbonsched.plan.colgen.status import plan_status

__all__ = [
    "Classes",
    "ColgenOptions",
    "Layout",
    "SmoothedDual",
    "SplitBound",
    "Warmup",
    "allowed_starts",
    "binding_cells",
    "candidate_options",
    "complete_plan",
    "count_options",
    "crossover_pays",
    "duals_from",
    "expand",
    "fixed_columns",
    "inference_prices",
    "job_classes",
    "job_cost_scale",
    "lagrangian",
    "lagrangian_warmup",
    "least_flexible_first",
    "make_layout",
    "moves_hold_s",
    "multipliers",
    "neighbours",
    "option_block",
    "plan_options",
    "plan_overhead_s",
    "plan_status",
    "price",
    "pricing_duals",
    "repair",
    "round_lp",
    "row_bounds",
    "site_bound",
    "site_pass",
    "smoothed_ascent",
    "solve_colgen",
    "split_bound",
    "split_rises",
    "stack_options",
    "tail_s",
    "type_pass",
    "unit_classes",
    "unit_repack",
    "usable_interior",
    "usage",
]
