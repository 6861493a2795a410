"""Every tunable of column generation in one frozen dataclass, read from the environment once.

:class:`ColgenOptions` holds the budget shares, size limits, tolerances and solver settings
of :func:`carbonsched.plan.colgen.solve_colgen`; its defaults are the measured ones (each
field names the measurement, mostly sections of BENCHMARKS.md). :meth:`ColgenOptions.from_env`
reads the ``CARBONSCHED_CG_*`` variables (:data:`ENV`) at the edge, in
:func:`carbonsched.plan.solve.solve_plan`; nothing in the package reads the environment.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

import numpy as np

MASTER_SOLVERS = ("auto", "ipm", "simplex")
"""Accepted values of :attr:`ColgenOptions.master_solver`."""
REFINE_METHODS = ("smoothed", "subgradient")
"""Accepted values of :attr:`ColgenOptions.refine_method`."""
SMOOTH_WEIGHTS = ("double", "single")
"""Accepted values of :attr:`ColgenOptions.smooth_weights`."""


@dataclass(frozen=True)
class ColgenOptions:
    r"""Tunables of column generation (budget shares, limits, tolerances, solver settings).

    A share is of the whole solve's time limit unless said otherwise; "10k × 16 × 48" is
    :func:`carbonsched.plan.instances.make_instance` with 10,000 jobs, 16 sites and 48 hourly
    slots. Fields marked with an environment variable are read by :meth:`from_env`.
    Every field is range-checked when the options are built, from code or from the
    environment: a ``bool`` is a bool and a number a number, a field with a variable against
    that variable's range, every count (``int``), time (``*_s``, ``*_s_per_*``) and share
    (``*_share*``) finite and not negative, a share at most 1 (``ValueError`` naming the
    field). Thresholds and tolerances are not range-checked: a value out of their range turns
    their step off (``crossover_at=-1``: no crossover in the loop; ``crossover_min_left=2``:
    no final crossover).

    Attributes
    ----------
    rc_tol : float
        Reduced-cost tolerance, relative to the largest option cost. [-] Default 1e-7.
    price_chunk : int
        Classes priced per numpy block (memory: chunk × S × T floats). [-] Default 4000.
    columns_per_round : int
        Negative-reduced-cost options added per class and round. [-] Default 2;
        ``CARBONSCHED_CG_K`` (≥ 1).
    master_solver : str
        LP method of the master: ``"ipm"`` (interior point without crossover; measured 3–5×
        faster than simplex re-solves on the 10k instance, and its central duals stabilise
        the pricing, with one crossover at the end), ``"simplex"`` (warm-started primal
        simplex) or ``"auto"`` (IPM above :attr:`ipm_min_classes` classes). Default
        ``"auto"``; ``CARBONSCHED_CG_MASTER``.
    ipm_min_classes : int
        Above this many classes ``master_solver="auto"`` takes the interior point. [-]
        Default 2000.
    cg_share : float
        Least share of the budget column generation may use (it may use up to
        ``max(cg_share, cg_extend_share)``, one master at a time, each started only if the
        time its predecessor took is left); the rest is for the fix-and-optimise pass, the
        split bound and the repair MIP. [-] Default 0.65; ``CARBONSCHED_CG_SHARE`` (0..1).
    ipm_tol : float
        Optimality tolerance of the master's interior-point solves: measured 59 iterations
        to 1e-5 where the default 1e-8 had not finished after 90 s on the 10k × 16 × 48
        master at load 0.6 (the bound is the Lagrangian of whatever duals come out). [-]
        Default 1e-5; ``CARBONSCHED_CG_IPM_TOL`` (> 0).
    flow : bool
        Master and repair in the start/end (flow) form: an option enters the balance rows
        of its first and one-past-last hour instead of every hour it covers (see
        :func:`~carbonsched.plan.colgen.layout.make_layout`). Off by default: with
        partial last slots charged to the absorption rows, on 10k × 16 × 48 the covering form
        proved 2.6 % and 3.4 % (load 0.3, seeds 0 and 1) and 5.5 % (load 0.6) against the
        flow form's 5.9 %, 6.1 % and 6.4 %, same bound, a better repair
        (docs/benchmarks/planner-log.md#planner-3-1).
        Default False; ``CARBONSCHED_CG_FLOW`` (``0`` or ``1``).
    refine_rounds : int
        Subgradient (Polyak) steps from the best multipliers when column generation stops
        before converging, towards the last master's LP value, with :attr:`refine_method`
        ``"subgradient"``; 0 turns the refinement off, whichever the method. [-] Default 60;
        ``CARBONSCHED_CG_REFINE`` (≥ 0).
    refine_method : str
        How the bound is refined when column generation stops before converging:
        ``"smoothed"`` (:mod:`carbonsched.plan.colgen.smoothed`, from the last master's
        duals; 10k × 16 × 48 at load 0.8, seed 1, one master in a 24 s budget: 3,388.4 ->
        7,538.1 kg in 2.8 s, LP 7,786.1, where 60 Polyak steps reached 3,901.0;
        docs/benchmarks/planner-log.md#planner-3-15) or ``"subgradient"`` (:attr:`refine_rounds`
        Polyak steps from the best multipliers; on 10k × 16 × 48 at load 0.6 they lift the bound
        from 3305.6 to 3396.6 kg, LP 3408.9, in 3–4 s). Default ``"smoothed"``;
        ``CARBONSCHED_CG_REFINE_METHOD``.
    refine_share : float
        Most of the budget the refinement may take. [-] Default 0.1.
    refine_keep_share : float
        Least share of the budget the refinement leaves to the plan. [-] Default 0.08.
    tail_s_per_job : float
        Seconds per placeable job kept after the last master for what always follows it:
        pricing, the priced greedy plan, the plan's build and the independent recount
        (:func:`~carbonsched.plan.colgen.budget.tail_s`; on 10k × 16 × 48 at load 0.3 with a
        20 s limit they took about 4.5 s after a master that ended at 85 % of the limit,
        docs/benchmarks/planner-log.md#planner-3-13). [s] Default 5e-4.
    round_growth : float
        A master round is not started unless ``round_growth`` × the last one's time is left
        before the plan's least share of the budget (a cut interior-point round yields no
        duals; on 10k × 16 × 48 at load 0.3, seed 2, the second master improved the plan
        from 2212.2 to 2114.3). [-] Default 1.0.
    cg_rel_tol : float
        Column generation stops when (LP − Lagrangian bound) / LP is below this. [-]
        Default 1e-4.
    cg_gap_share : float
        Column generation also stops once (LP − bound) / LP is below this share of the
        requested MIP gap: the rest of the budget goes to the plan, not to the last 0.1 % of
        the bound. [-] Default 0.2.
    cg_extend_share : float
        Column generation (the first master included) may use up to this share of the
        budget, one master at a time, each started only if the time its predecessor took is
        left (:attr:`round_growth`): the plan is rounded from the last master solved. A cut
        first master leaves the warm-up's bound (10k × 16 × 48 at load 0.6, seed 0, two
        solves sharing the 2 cores: 2754.9 against 3396.9 when it ends). [-] Default 0.85;
        ``CARBONSCHED_CG_EXTEND`` (0..1).
    crossover_at : float
        Once (LP − bound) / LP is below this, master solves end with a crossover to a
        vertex. [-] Default 5e-3.
    integral_tol : float
        An LP count within this of an integer counts as integral (interior-point
        solutions). [-] Default 1e-4.
    simplex_strategy : int
        HiGHS simplex strategy of the master (4 = primal: added columns keep the basis
        primal feasible, so each re-solve starts where the last one ended). [-] Default 4;
        ``CARBONSCHED_CG_SIMPLEX`` (0..4, HiGHS's range).
    warmup_share : float
        Largest share of the time budget spent on the Lagrangian warm-up that seeds the
        master (measured on 10k × 16 × 48 at load 0.6: after 117–162 rounds the first master
        solved in 10–20 s; when a busy machine cut the warm-up at 39 rounds, the first
        master had not finished after 39 s — so the cap is generous and the round count
        decides); 0 turns the warm-up off. [-] Default 0.20; ``CARBONSCHED_CG_WARMUP``
        (0..1).
    warmup_max_rounds : int
        Warm-up rounds (a fixed count keeps runs reproducible; the time share is only a
        cap). [-] Default 150.
    warmup_big_classes : int
        Above this many classes (50k jobs) the longer warm-up of
        :attr:`warmup_share_big` and :attr:`warmup_max_rounds_big`. [-] Default 10,000.
    warmup_share_big : float
        Warm-up share above :attr:`warmup_big_classes` classes: measured, with 200 rounds
        the first interior-point masters of the 50k instance ended in status Unknown. [-]
        Default 0.15.
    warmup_max_rounds_big : int
        Warm-up rounds above :attr:`warmup_big_classes` classes (same measurement). [-]
        Default 600.
    warmup_carried_share : float
        Share of the budget for the smoothed dual (:mod:`carbonsched.plan.colgen.smoothed`)
        from the previous rolling run's multipliers, in place of the Lagrangian warm-up, when
        they are carried in (:mod:`carbonsched.plan.colgen.warm`) and bound above the cold
        start, on a budget with a master LP (the short path runs the smoothed dual from them
        anyway). Measured on 2,000 jobs × 8 sites × 72 h: 30 Polyak rounds from the carried
        start, aimed at the greedy plan, never rose above it; with no warm-up at all the bound
        stayed at the carried start's when the master did not finish (BENCHMARKS.md section
        16). 0: none (the carried multipliers alone price the seeds). [-] Default 0.1;
        ``CARBONSCHED_CG_CARRIED_WARMUP`` (0..1).
    warmup_stall : int
        Warm-up rounds without improvement before the step factor is halved. [-] Default
        10; ``CARBONSCHED_CG_STALL`` (≥ 1).
    warmup_keep_rounds : int
        The options chosen in the last this many warm-up rounds seed the master. [-]
        Default 30.
    warmup_top_k : int
        Best options per class under the warm-up's best multipliers added to the master.
        [-] Default 2.
    repair_share : float
        Share of the budget kept for the repair MIP after the crossover. [-] Default 0.15.
    finish_s : float
        Seconds kept for building the plan after the last MIP (HiGHS overruns its limit by
        up to a second on the larger repair MIPs, measured at 10k). [s] Default 2.0.
    finish_plain_s : float
        Fewest seconds kept at the end by the phases that run no MIP (priced greedy plans,
        the one-slot repack's LP, the moves): building and checking the plan, 0.02 s and
        0.30-0.35 s on 9.2k jobs × 16 sites × 72 slots (2026-12-06), where HiGHS's MIP overrun
        (:attr:`finish_s`) does not arise. They keep the larger of this and one priced greedy
        plan's time, which grows with the instance as the check does (0.4 s at 9.2k jobs; at
        50k jobs × 32 sites × 72 slots, seed 0, 120 s: one priced greedy plan 2.70 s, building
        and checking the plan 0.12 s and 1.79 s, 2026-12-06)
        (:meth:`~carbonsched.plan.colgen.state.ColgenState.plain_reserve_s`). [s] Default 0.5.
    step_margin_s : float
        The split bound, the site bound, the site and type passes and the repair MIP start
        only with more than :attr:`step_min_left_s` = ``finish_s + step_margin_s`` of the
        limit left, and the one-slot repack with this margin past its own reserve
        (:meth:`~carbonsched.plan.colgen.state.ColgenState.plain_reserve_s`): they build their
        models over every class before any solver limit applies. [s] Default 0.5.
    crossover_min_left : float
        The final crossover of an interior master runs only with this share of the budget
        left (measured: 12 s on the 10k × 16 × 48 master, as long as an interior solve).
        [-] Default 0.5.
    binding_dual_rel : float
        A capacity, power or absorption row counts as binding at an interior LP point when
        its multiplier (−dual) exceeds this share of ``scale``, the largest cost of the
        master's initial columns (:func:`~carbonsched.plan.colgen.master.binding_cells`;
        measured on 10k × 16 × 48 at load 0.8, seed 4: 695 rows above it at the interior
        point, 689 binding at the vertex crossover reached). [-] Default 1e-6.
    imprecise_primal_tol : float
        Largest primal infeasibility (HiGHS ``max_primal_infeasibility``, absolute, over
        rows and column bounds: jobs, GPUs, kW) of an imprecise interior master kept as its
        solution. Default 1e-6.
    repair_top_k : int
        Options per repair class added by reduced cost under the final duals. [-] Default 3.
    repair_heuristic_effort : float
        HiGHS ``mip_heuristic_effort`` of the repair MIPs (HiGHS's default 0.05). [-]
        Default 0.05; ``CARBONSCHED_CG_HEUR`` (0..1, HiGHS's range).
    repair_all_options : int
        When every class fits in the repair and the instance has at most this many options,
        the repair MIP gets all of them. [-] Default 50,000.
    repair_max_classes : int
        Largest repair MIP, in classes (fractional classes plus freed neighbours); measured
        on the 10k × 16 × 48 instance: 500 classes → 0.70 % in 9 s, 800 → 0.51 % in 29 s
        (loaded machine). [-] Default 500.
    repair_all_classes : int
        Up to this many classes the repair MIP frees every class (starting from the best
        plan). [-] Default 1000.
    repack_max_options : int
        Most options (every start of every one-GPU, one-slot class)
        :func:`~carbonsched.plan.colgen.repack.unit_repack` takes on; 0 turns it off. [-]
        Default 2,000,000; ``CARBONSCHED_CG_REPACK`` (≥ 0).
    repack_share : float
        Largest share of the time left (less the finish) the repack may take; it runs before
        the passes, which get the rest: on 10k × 16 × 48 at load 0.8, seed 2, with half it
        did not fit (3.8 s for 4.0 expected) and the plan ended 3.92 % above the bound, with
        0.9 it took 4.0 s, 5,925.6 -> 5,473.6 kg, and the plan ended at 0.92 %
        (docs/benchmarks/planner-log.md#planner-3-14). [-] Default 0.9.
    repack_s_per_option : float
        Time the repack expects per option of those classes; it is skipped when that exceeds
        the time it is given. The typical time, not the worst: the LP has its own limit and a
        pricing round cut short by it keeps the last LP solved, so an estimate short of a slow
        case costs at most the time it was given, while one too long skips the repack where it
        gains most. Measured on 10k × 16 × 48 at 20 s (BENCHMARKS.md section 3's cells,
        2026-12-06): 0.4-0.5 s for 320k-344k options at load 0.3 (1.2-1.5e-6 s each),
        0.5-1.1 s for 280k-298k at 0.6, 0.5-0.7 s for 252k-269k at 0.8 (2.0-2.8e-6; 2.1-4.8 s
        on the planner of 2026-12-02, docs/benchmarks/planner-log.md#planner-3-14); 0.9-1.3 s
        for 456k (2.0-2.9e-6) on the 10k rolling step's run 2 (72 slots). An estimate of 1e-5
        skips it in that step's 15 s solves (4.3-4.6 s expected, 3.0-3.6 s available), whose
        plans then end 0.4-0.9 % above their bound against 0.3-0.8 % with it (BENCHMARKS.md
        section 16). [s] Default 3e-6;
        ``CARBONSCHED_CG_REPACK_S`` (≥ 0).
    repack_price_k : int
        Options per class the repack starts from and adds per pricing round (0: the LP gets
        every option at once): 2, 5, 10, 20 and every option at once reached the same
        objective on seed 4 (2, 5 and every option on seed 2), 2 the fastest. [-] Default 2;
        ``CARBONSCHED_CG_REPACK_K`` (≥ 0).
    repack_rc_tol : float
        Reduced cost below which the repair's pricing adds an option (the LP's own options
        stay above -1e-7, HiGHS's dual feasibility tolerance). [kg] Default 1e-6.
    repack_round_tol : float
        An LP value this close to an integer counts as that integer when rounding down. [-]
        Default 1e-6.
    repack_more : int
        In a staged solve (:attr:`short_first_share`), how many more plans the master-LP
        path's one-slot repack starts from after its first, best first among the candidates
        not repacked yet, while one fits the time left before the passes
        (:func:`~carbonsched.plan.colgen.incumbents.repack_more`); with it above 0 the short
        path keeps the priced greedy plan of every earlier smoothed-dual iterate
        (:attr:`smooth_draws`) as its own candidate, not only the best, and the master-LP
        path gets every one of its plans the repack neither started from nor produced. The
        repack gains 170-215 kg on 10k × 16 × 72 h at load 0.8 and mostly, not always, keeps
        the priced greedy plans' order, so which iterate's plan is repacked decides the plan
        (BENCHMARKS.md section 3). 0: one repack per path. [-] Default 0;
        ``CARBONSCHED_CG_REPACK_MORE`` (≥ 0).
    repack_more_rel : float
        A plan more than this share above the best plan so far is not a start of
        :attr:`repack_more`'s repacks (the repack gains 2-4 % of the plan on a loaded
        fleet). [-] Default 0.05.
    split_share : float
        Share of the budget for the type-split bound
        (:func:`~carbonsched.plan.colgen.bounds.split_bound`); 0 turns it off. [-] Default
        0.25; ``CARBONSCHED_CG_SPLIT`` (0..1).
    site_share : float
        Share of the budget for the site-split bound
        (:func:`~carbonsched.plan.colgen.bounds.site_bound`); 0 (default) turns it off:
        measured on 1k × 16 × 48 at load 0.6 it raised the bound by 0.3 kg (229.74 → 230.02)
        against 13.3 kg for the GPU-type split, with the master's duals as multipliers. [-]
        Default 0; ``CARBONSCHED_CG_SITE`` (0..1).
    split_enum_max : int
        GPU types with more feasible options than this keep their Lagrangian term in the
        split bound (enumerating them costs more than it can prove in the budget). [-]
        Default 400,000.
    split_min_delta : float
        A type's (site's) MIP is skipped when the option cap forces its reduced-cost
        threshold below this share of the gap (it could then raise the bound by little more
        than the threshold). [-] Default 0.1.
    split_mip_max : int
        Most options in one GPU type's subproblem MIP; the reduced-cost threshold is lowered
        to keep it there (the bound stays valid). [-] Default 40,000.
    site_enum_max : int
        The site split enumerates every option; above this many it is not tried. [-] Default
        2,500,000.
    site_mip_max : int
        Most options in one site's MIP (the reduced-cost threshold is lowered to keep it).
        [-] Default 25,000.
    split_note_min_kg : float
        A type's split bound must rise by this over its Lagrangian share to count (and be
        named in the plan note): below it the total's rise is summation noise. [kg] Default
        1e-3.
    smooth_s_per_job : float
        Below this many seconds of budget per placeable job no master LP is solved: the bound
        comes from the smoothed Lagrangian dual (:mod:`carbonsched.plan.colgen.smoothed`) and
        the plan from its multipliers (10k × 16 × 48 in 20 s, load 0.3, seed 0: one
        interior-point master took 6 s and bounded 6.8 % below the LP; the smoothed dual
        reached 0.13 % below it in 7 s, docs/benchmarks/planner-log.md#planner-3-15). [s] Default
        3e-3; ``CARBONSCHED_CG_SMOOTH`` (≥ 0).
    smooth_plan_share : float
        Share of the budget the smoothed dual leaves to the plan: 8 s of 20 for the priced
        greedy, the repack and its completion and the site pass. Against 0.3, side by side
        on 10k jobs × 16 sites (BENCHMARKS.md sections 3 and 16): at 60 s over 48 h the same
        plans at loads 0.3 and 0.6 and a worst gap of 0.21 against 0.35 % at 0.8; warm-started
        12 s rolling steps over 72 h 0.1-1.7 % lower. 0.3 gave lower plans at 60 s over 72 h
        (worst gaps 0.23 / 0.36 / 0.70 % against 0.41 / 0.43 / 1.76 % at loads 0.3 / 0.6 / 0.8,
        one run each) and better bounds at 20 s and load 0.8. [-] Default 0.4;
        ``CARBONSCHED_CG_SMOOTH_PLAN`` (0..1).
    short_first_share : float
        On a budget long enough for the master-LP path, whatever the instance's size, the short
        path (smoothed dual, no master LP) runs first with this share of the budget (at most the
        :attr:`smooth_s_per_job` budget) and its plan and bound are kept as the incumbent; the
        master-LP path then gets the rest, started from the short path's warm-up, multipliers
        and plan, and the better plan and the larger bound are returned, so a longer limit never
        returns a worse plan or bound than the short path found. 0 turns it off. Measured on 10k
        × 16 × 48 at load 0.3 with a 60 s limit (seeds 1 / 2, a shared machine): 0.25 gave 1.02
        / 1.32 %, 0.33 gave 0.41 / 0.47 %, 0.45 gave 0.17 / 0.26 %, 0.5 (the short path's whole
        30 s budget) 0.18 / 0.14 %; the master-LP path alone (main) 0.47 / 0.09 %
        (docs/benchmarks/planner-log.md#planner-3-16). On 1,853-1,890 jobs × 8 sites × 72 slots
        the master-LP path alone at 15 s was above the short path alone at 7.5 s in 9 of 10
        solves (up to 1.15 %), staged at most 0.02 %; 1k × 16 × 48 at load 0.6 stays within 1 %
        at 20 s and 60 s (BENCHMARKS.md sections 16 and 3). [-]
        Default 0.5; ``CARBONSCHED_CG_SHORT_FIRST`` (0..1).
    short_first_passes : bool
        Whether the short path, when the master-LP path follows it, runs its passes, split
        bounds, repair and moves; off, it stops after its priced greedy plan and one-slot
        repack, and the master-LP path gets that time (6-8 s of 60 on 10k jobs): its master
        then has the LP bound early and its passes and moves start from the short path's
        plan. Measured on 10k × 16 × 72 at load 0.8, seeds 0-4, each seed on and off side by
        side (60 s, idle machine): 0.31 / 0.47 / 0.34 / 1.32 / 0.40 % against 0.96 / 2.02 /
        0.52 / 1.33 / 0.94 %; at load 0.6 and on 48 slots at load 0.8 within the noise of
        the smoothed dual's time-cut iterates (BENCHMARKS.md section 3). Default False;
        ``CARBONSCHED_CG_SHORT_PASSES`` (``0`` or ``1``).
    moves_share : float
        Most of the budget kept back from the passes for
        :func:`carbonsched.plan.local.improve` on the final plan
        (:func:`~carbonsched.plan.colgen.budget.moves_hold_s`; it gets whatever is left
        then); 0 turns the moves off. [-] Default 0.1; ``CARBONSCHED_CG_MOVES`` (0..1).
    moves_first_max_jobs : int
        Up to this many placeable jobs the moves also run on the best plan before the passes
        (1k × 16 × 48 at load 0.6, seed 2: 0.55 % against 0.86 % with the final moves
        alone). [-] Default 2,000.
    moves_s_per_job : float
        Time kept back per placeable job when that is less: a pass of moves over 10,000 jobs
        took about 2 s (10k × 16 × 48, idle machine), the blocker check of the ejections
        about 1 s more and the rebuild of the plan 0.5 s; room for two passes. [s] Default
        8e-4.
    type_pass_share : float
        Share of the budget for the fix-and-optimise pass by GPU type
        (:func:`~carbonsched.plan.colgen.passes.type_pass`); 0 turns it off. [-] Default
        0.3; ``CARBONSCHED_CG_TYPE_PASS`` (0..1).
    type_pass_first_share : float
        Share of the type pass's time for the types the plan leaves work of. [-] Default
        0.7.
    type_pass_max_options : int
        A GPU type with more options than this gets the generated and best-priced ones only.
        [-] Default 60,000.
    type_pass_neighbours : int
        Most classes of other types freed with a type whose work the plan leaves out. [-]
        Default 250.
    own_pass_overhead_s : float
        Seconds of a type's share kept for building the plan of its own-classes MIP
        (measured on 10k × 16 × 48: 1.2 s for the plan of 10,000 jobs, and HiGHS overruns a
        2 s limit by 0.9 s in its cut loop), scaled with the jobs above 10,000
        (:func:`~carbonsched.plan.colgen.budget.plan_overhead_s`). [s] Default 1.2.
    site_pass_share : float
        When no repair MIP follows, the site pass
        (:func:`~carbonsched.plan.colgen.passes.site_pass`) gets this share of 0.8 × (time
        left − :attr:`finish_s`) and the type pass 0.8 × what is left after it; 0 turns the
        site pass off. [-] Default 0.8; ``CARBONSCHED_CG_SITE_PASS`` (0..1).
    site_pass_max_left_out : int
        Most classes with left-out work added to one site's neighbourhood (a loaded fleet
        leaves many out; those that may run at the site first, then the costliest to leave
        out). [-] Default 300.
    site_pass_max_s : float
        Most seconds for one site's MIP (measured on 10k × 16 × 48 at load 0.6, the machine
        shared by three solves: the neighbourhoods that improved the plan proved optimal in
        0.8–5.6 s). [s] Default 5.0.
    both_orders_max_jobs : int
        Up to this many placeable jobs the priced greedy also runs largest first (GPU-hours)
        and the better plan is kept: on 1k × 16 × 48 at load 0.6 neither order wins every
        seed (seed 2: 405.1 kg least flexible first, 333.4 largest first; seed 0: 268.3 and
        303.1), and a run there takes ~0.1 s. At 10k jobs least flexible first gave the
        better plan from the same duals in all four off-line comparisons (loads 0.6 and 0.8,
        docs/benchmarks/planner-log.md#planner-3-7), and a second run would cost 1.3-2.5 s (idle
        to loaded machine) of the ~10 s the plan has after two master LPs. [-] Default 2,000.
    smooth_mu_start_rel : float
        First temperature of the smoothed dual, relative to the mean cost of a placeable
        job. On 10k × 16 × 48 at load 0.3, seed 1, 7 s from the warm-up: 5e-3 reached
        2,075.1 kg, 2e-3 2,074.5 and 1e-3 2,067 at one temperature (BENCHMARKS.md section
        3.15). [-] Default 5e-3.
    smooth_mu_factor : float
        The temperature is multiplied by this each time L-BFGS-B converges or stalls: 0.2
        reached 2,080.6 kg where 0.1 reached 2,080.2 and 0.3 2,079.1 (same instance, 7 s).
        [-] Default 0.2.
    smooth_mu_min_rel : float
        No temperature below this share of the mean job cost: the ascent ends there (the
        smoothing is then far below the bound's precision). [-] Default 1e-5.
    smooth_stall_evals : int
        The temperature is lowered when the smoothed value rose by less than
        :attr:`smooth_stall_rel` (relative) over the last this many evaluations; L-BFGS-B's
        own tests stop much later. Same instance, 7 s: 8 and 1e-4 reached 2,080.6 kg, 5 and
        1e-4 2,080.3, 8 and 3e-4 2,077.9, 8 and 1e-3 2,073.8, 10 and 5e-5 2,079.4, 15 and
        1e-6 (never lowered) 2,075.1 (docs/benchmarks/planner-log.md#planner-3-15). [-] Default 8.
    smooth_stall_rel : float
        See :attr:`smooth_stall_evals`. [-] Default 1e-4.
    smooth_lbfgs_memory : int
        Correction pairs kept by L-BFGS-B (SciPy's ``maxcor``; its default is 10), not
        tuned. [-] Default 20.
    smooth_keep_pool_every : int
        Every this many evaluations the exact Lagrangian's chosen options join the pool that
        seeds the master and the repair's options (as the warm-up's last rounds do), not
        tuned. [-] Default 10.
    smooth_draws : int
        Earlier iterates of the smoothed dual that price a priced greedy plan of their own
        in a staged solve's short path
        (:func:`~carbonsched.plan.colgen.incumbents.earlier_draws`): the best exact iterate every
        :attr:`smooth_draw_every` evaluations, the last this many kept; the best plan is a
        candidate. Priced greedy is not monotone in its prices: on 10k × 16 × 72 h at load
        0.8, seed 0, the smoothed dual stopped after 300, 320, 340, 344, 349, 360 and 400
        evaluations gave 5,797, 5,710, 5,699, 5,769, 5,855, 5,907 and 5,645 kg. The same
        cell at 60 s, ten paired runs side by side: mean gap 0.57 % with three draws, 0.74 %
        without, worst 1.09 and 2.31 % (BENCHMARKS.md section 3). [-] Default 3;
        ``CARBONSCHED_CG_SMOOTH_DRAWS`` (0 turns them off).
    smooth_draw_every : int
        Evaluations between the iterates of :attr:`smooth_draws`. [-] Default 15.
    smooth_marks_alone : bool
        In a short path alone (a limit under the short budget, no master LP), the best
        exact iterates at evaluations ``e, 2e, 4e, ...`` (``e`` =
        :attr:`smooth_draw_every`), the newest :attr:`smooth_draws` of them, price a
        priced greedy plan each after the one-slot repack while one fits the time left
        (:func:`~carbonsched.plan.colgen.incumbents.marked_draws`), newest first, so a
        longer limit keeps, within a factor of two in evaluations, the plan a shorter one
        would have priced: on the 10k rolling step (9,200 pending jobs × 16 sites × 72 slots,
        seed 1) the smoothed dual's last iterate priced 2,159.6 kg after 201 evaluations at
        a 15 s limit and 2,143.6 kg after 59 at 6 s, its iterates at 10-40 evaluations
        2,139.7-2,149.7 kg (BENCHMARKS.md section 16). Default True;
        ``CARBONSCHED_CG_SMOOTH_MARKS`` (0 turns them off).
    smooth_weights : str
        Precision of the smoothed dual's soft-max weights and the use they sum to
        (:mod:`~carbonsched.plan.colgen.smoothed`): ``"double"`` or ``"single"``; the bound is
        double either way. Single takes 0.71-0.75 of double's time per evaluation at the
        multipliers an ascent reaches on 10k jobs (``bench/smoothed_eval.py``). Side by side
        with double it moved the ascent's path and so the priced greedy plans, whose quality
        is not monotone in their prices: on the planner matrix at 60 s (10k × 16 × 48 and
        × 72, seeds 0-4) the worst gaps went 0.25 → 0.78 % (48 h @ 0.3) and 0.69 → 1.16 %
        (72 h @ 0.8, where the ascent runs longest: worse on 3 of 5 seeds),
        0.41 → 0.25 % at 72 h @ 0.6; on the 10k rolling step the warm start's worst ratio
        that reached the cold plan went 0.28 → 0.22 (BENCHMARKS.md sections 3 and 16). An
        option to measure with, not a recommendation. Default ``"double"``;
        ``CARBONSCHED_CG_SMOOTH_WEIGHTS``.
    write_master : str or None
        Debugging aid: write the first master LP to this path (HiGHS ``writeModel``; the
        format follows the suffix). Default None; ``CARBONSCHED_CG_WRITE``.
    dump_state : str or None
        Debugging aid: pickle the state before the repair MIP (pool, LP values, duals,
        residual, fixed options, candidates, bound) to this path. Default None;
        ``CARBONSCHED_CG_DUMP``.
    repair_log : str or None
        Debugging aid: HiGHS log file of the repair MIPs. Default None;
        ``CARBONSCHED_CG_REPAIR_LOG``.

    Raises
    ------
    ValueError
        :attr:`master_solver` or :attr:`refine_method` is not one of the accepted values.
    """

    rc_tol: float = 1e-7
    price_chunk: int = 4000
    columns_per_round: int = 2
    master_solver: str = "auto"
    ipm_min_classes: int = 2000
    cg_share: float = 0.65
    ipm_tol: float = 1e-5
    flow: bool = False
    refine_rounds: int = 60
    refine_method: str = "smoothed"
    refine_share: float = 0.1
    refine_keep_share: float = 0.08
    tail_s_per_job: float = 5e-4
    round_growth: float = 1.0
    cg_rel_tol: float = 1e-4
    cg_gap_share: float = 0.2
    cg_extend_share: float = 0.85
    crossover_at: float = 5e-3
    integral_tol: float = 1e-4
    simplex_strategy: int = 4
    warmup_share: float = 0.20
    warmup_max_rounds: int = 150
    warmup_big_classes: int = 10_000
    warmup_share_big: float = 0.15
    warmup_max_rounds_big: int = 600
    warmup_carried_share: float = 0.1
    warmup_stall: int = 10
    warmup_keep_rounds: int = 30
    warmup_top_k: int = 2
    repair_share: float = 0.15
    finish_s: float = 2.0
    finish_plain_s: float = 0.5
    step_margin_s: float = 0.5
    crossover_min_left: float = 0.5
    binding_dual_rel: float = 1e-6
    imprecise_primal_tol: float = 1e-6
    repair_top_k: int = 3
    repair_heuristic_effort: float = 0.05
    repair_all_options: int = 50_000
    repair_max_classes: int = 500
    repair_all_classes: int = 1000
    repack_max_options: int = 2_000_000
    repack_share: float = 0.9
    repack_s_per_option: float = 3e-6
    repack_price_k: int = 2
    repack_rc_tol: float = 1e-6
    repack_round_tol: float = 1e-6
    repack_more: int = 0
    repack_more_rel: float = 0.05
    split_share: float = 0.25
    site_share: float = 0.0
    split_enum_max: int = 400_000
    split_min_delta: float = 0.1
    split_mip_max: int = 40_000
    site_enum_max: int = 2_500_000
    site_mip_max: int = 25_000
    split_note_min_kg: float = 1e-3
    smooth_s_per_job: float = 3e-3
    smooth_plan_share: float = 0.4
    short_first_share: float = 0.5
    short_first_passes: bool = False
    moves_share: float = 0.1
    moves_first_max_jobs: int = 2_000
    moves_s_per_job: float = 8e-4
    type_pass_share: float = 0.3
    type_pass_first_share: float = 0.7
    type_pass_max_options: int = 60_000
    type_pass_neighbours: int = 250
    own_pass_overhead_s: float = 1.2
    site_pass_share: float = 0.8
    site_pass_max_left_out: int = 300
    site_pass_max_s: float = 5.0
    both_orders_max_jobs: int = 2_000
    smooth_mu_start_rel: float = 5e-3
    smooth_mu_factor: float = 0.2
    smooth_mu_min_rel: float = 1e-5
    smooth_stall_evals: int = 8
    smooth_stall_rel: float = 1e-4
    smooth_lbfgs_memory: int = 20
    smooth_keep_pool_every: int = 10
    smooth_draws: int = 3
    smooth_draw_every: int = 15
    smooth_marks_alone: bool = True
    smooth_weights: str = "double"
    write_master: str | None = None
    dump_state: str | None = None
    repair_log: str | None = None

    def __post_init__(self) -> None:
        # the same ranges whether an option comes from code or from its CARBONSCHED_CG_*
        # variable (ENV's parsers); every count, time and share without a variable finite and
        # not negative, a share at most 1 (thresholds and tolerances are not: -1 or inf turns
        # a step off, e.g. crossover_at=-1)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{f.name} must be True or False, got {value!r}")
            if f.type in ("int", "float") and (isinstance(value, (bool, np.bool_))
                                               or not isinstance(value, numbers.Real)):
                raise ValueError(f"{f.name} must be a number, got {value!r}")
        for var, (name, parse) in ENV.items():
            value = getattr(self, name)
            if parse is _path or isinstance(value, str):
                continue
            try:
                parse(str(int(value)) if isinstance(value, (bool, np.bool_)) else str(value))
            except ValueError as exc:
                raise ValueError(f"{name} {exc}, got {value!r} (the option of {var})") from None
        for f in fields(self):
            value = getattr(self, f.name)
            if not _counted(f.name, f.type):
                continue
            if not math.isfinite(value):
                raise ValueError(f"{f.name} not finite, got {value!r}")
            if value < 0:
                raise ValueError(f"{f.name} must be >= 0, got {value!r}")
            if "_share" in f.name and value > 1:
                raise ValueError(f"{f.name} must be <= 1, got {value!r}")
        for name, accepted in (("master_solver", MASTER_SOLVERS),
                               ("refine_method", REFINE_METHODS),
                               ("smooth_weights", SMOOTH_WEIGHTS)):
            if getattr(self, name) not in accepted:
                raise ValueError(f"{name} must be one of {', '.join(accepted)}, "
                                 f"got {getattr(self, name)!r}")
        if self.smooth_draw_every < 1:
            raise ValueError(f"smooth_draw_every must be >= 1, got {self.smooth_draw_every}")
        # the ascent lowers the temperature down to smooth_mu_min_rel x the job cost; at 0 it
        # would go on until 1/mu leaves single precision (smoothed.py)
        for name in ("smooth_mu_start_rel", "smooth_mu_min_rel"):
            if not 0.0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be positive and finite, got {getattr(self, name)}")
        if self.smooth_mu_start_rel < self.smooth_mu_min_rel:
            raise ValueError(f"smooth_mu_start_rel ({self.smooth_mu_start_rel}) must be at least "
                             f"smooth_mu_min_rel ({self.smooth_mu_min_rel}): no temperature "
                             "would be tried")
        if not 0.0 < self.smooth_mu_factor < 1.0:
            raise ValueError(f"smooth_mu_factor must be in (0, 1), got {self.smooth_mu_factor}")

    @property
    def step_min_left_s(self) -> float:
        """Time left at or below which no MIP step (bounds, passes, repair) starts. [s]

        :attr:`finish_s` + :attr:`step_margin_s` (2.5 s by default).
        """
        return self.finish_s + self.step_margin_s

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ColgenOptions:
        """Options from the ``CARBONSCHED_CG_*`` variables of ``environ``, defaults otherwise.

        Parameters
        ----------
        environ
            The environment (``os.environ`` at the caller's edge). Variables listed in
            :data:`ENV` are parsed and range-checked; an empty value counts as unset.

        Returns
        -------
        ColgenOptions
            The defaults with every variable set in ``environ`` applied.

        Raises
        ------
        ValueError
            A ``CARBONSCHED_CG_*`` variable that is not in :data:`ENV`, or a value that does
            not parse or is out of its range; the message names the variable.
        """
        changes: dict[str, object] = {}
        for var in sorted(k for k in environ if k.startswith(ENV_PREFIX)):
            if var not in ENV:
                raise ValueError(f"{var}: unknown column-generation variable; known: "
                                 + ", ".join(sorted(ENV)))
            raw = environ[var]
            if raw == "":
                continue
            name, parse = ENV[var]
            try:
                changes[name] = parse(raw)
            except ValueError as exc:
                raise ValueError(f"{var}={raw!r}: {exc}") from None
        return cls(**changes)


def _counted(name: str, kind: str) -> bool:
    """Whether field ``name`` of type ``kind`` is a count, a time or a share (checked >= 0)."""
    return kind == "int" or (kind == "float" and (
        name.endswith("_s") or "_s_per_" in name or "_share" in name))


ENV_PREFIX = "CARBONSCHED_CG_"


def _number(kind: type, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False) -> Callable[[str], float]:
    """A parser of one number of ``kind`` in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""

    def parse(text: str):
        try:
            value = kind(text.strip())
        except ValueError:
            raise ValueError(f"not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value):
            raise ValueError("not finite")
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise ValueError(f"must be {'>' if lo_open else '>='} {lo:g}")
        if hi is not None and value > hi:
            raise ValueError(f"must be <= {hi:g}")
        return value

    return parse


def _choice(values: tuple[str, ...]) -> Callable[[str], str]:
    """A parser accepting one of ``values``."""

    def parse(text: str) -> str:
        if text not in values:
            raise ValueError(f"must be one of {', '.join(values)}")
        return text

    return parse


def _flag(text: str) -> bool:
    """``"1"`` → True, ``"0"`` → False."""
    if text not in ("0", "1"):
        raise ValueError("must be 0 or 1")
    return text == "1"


def _path(text: str) -> str:
    return text


ENV: dict[str, tuple[str, Callable[[str], object]]] = {
    "CARBONSCHED_CG_K": ("columns_per_round", _number(int, 1)),
    "CARBONSCHED_CG_MASTER": ("master_solver", _choice(MASTER_SOLVERS)),
    "CARBONSCHED_CG_SHARE": ("cg_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_EXTEND": ("cg_extend_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_IPM_TOL": ("ipm_tol", _number(float, 0.0, lo_open=True)),
    "CARBONSCHED_CG_FLOW": ("flow", _flag),
    "CARBONSCHED_CG_REFINE": ("refine_rounds", _number(int, 0)),
    "CARBONSCHED_CG_REFINE_METHOD": ("refine_method", _choice(REFINE_METHODS)),
    "CARBONSCHED_CG_SIMPLEX": ("simplex_strategy", _number(int, 0, 4)),
    "CARBONSCHED_CG_WARMUP": ("warmup_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_STALL": ("warmup_stall", _number(int, 1)),
    "CARBONSCHED_CG_HEUR": ("repair_heuristic_effort", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_REPACK": ("repack_max_options", _number(int, 0)),
    "CARBONSCHED_CG_REPACK_K": ("repack_price_k", _number(int, 0)),
    "CARBONSCHED_CG_REPACK_S": ("repack_s_per_option", _number(float, 0)),
    "CARBONSCHED_CG_REPACK_MORE": ("repack_more", _number(int, 0)),
    "CARBONSCHED_CG_SPLIT": ("split_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_SITE": ("site_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_SMOOTH": ("smooth_s_per_job", _number(float, 0.0)),
    "CARBONSCHED_CG_SMOOTH_PLAN": ("smooth_plan_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_SMOOTH_DRAWS": ("smooth_draws", _number(int, 0)),
    "CARBONSCHED_CG_SMOOTH_MARKS": ("smooth_marks_alone", _flag),
    "CARBONSCHED_CG_SMOOTH_WEIGHTS": ("smooth_weights", _choice(SMOOTH_WEIGHTS)),
    "CARBONSCHED_CG_SHORT_FIRST": ("short_first_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_SHORT_PASSES": ("short_first_passes", _flag),
    "CARBONSCHED_CG_CARRIED_WARMUP": ("warmup_carried_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_MOVES": ("moves_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_TYPE_PASS": ("type_pass_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_SITE_PASS": ("site_pass_share", _number(float, 0.0, 1.0)),
    "CARBONSCHED_CG_WRITE": ("write_master", _path),
    "CARBONSCHED_CG_DUMP": ("dump_state", _path),
    "CARBONSCHED_CG_REPAIR_LOG": ("repair_log", _path),
}
"""Environment variable → (:class:`ColgenOptions` field, parser raising ValueError)."""
