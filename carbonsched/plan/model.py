r"""The planning MILP in PuLP, built in stages: sets → variables → constraints → objective.

Notation (positions, never user ids, name every variable and constraint):

* :math:`o = (j, s, t_0)` a feasible option of job :math:`j` (gang of :math:`n_j` GPUs of type
  :math:`g_j`, :math:`d_j` slots, IT power :math:`P_j` kW) at site :math:`s` starting in slot
  :math:`t_0`; binary :math:`x_o`. It covers slots :math:`t_0 \ldots t_0 + d_j - 1`
  (:math:`d_j = \lceil m_j / L \rceil` for a run of :math:`m_j` minutes on slots of
  :math:`L` minutes, 60 by default, 30 or 15 allowed; slots may lie past the horizon, on
  continued signals), with energy weight :math:`w_{ot} = 1` but in its last slot,
  :math:`w = (m_j - L (d_j - 1)) / L`; a slot's energy is :math:`P_j w_{ot} L / 60` kWh.
  Hourly signals and hourly inference demand hold in every slot of their hour.
* :math:`z_p` binary, a piece pattern of a preemptible job (several runs at one site, each
  resumption paying the checkpoint overhead; :func:`carbonsched.plan.sets.enumerate_patterns`),
  in the job's assignment row and in the capacity, power and absorption rows of every slot it
  covers, like an option.
* :math:`u_j \in \{0, 1\}` job :math:`j` unplaced, or deferred past the horizon.
* :math:`y_{ds} \in \mathbb{Z}_{\ge 0}` GPUs serving inference demand :math:`d` from site
  :math:`s` (only sites within the SLO that have the type).
* :math:`a_{st} \in [0, \bar{a}_{st}]` green surplus absorbed [kW] (only where surplus > 0).

Constraints (one ``define_<family>_constraints`` each):

* assignment: :math:`\sum_{o \ni j} x_o + \sum_{p \ni j} z_p + u_j = 1`;
* inference: :math:`\sum_s y_{ds} = N_d`;
* GPU capacity: :math:`\sum_{o \ni (s,t), g_j = g} n_j x_o + \sum_{d: t_d=t, g_d=g} y_{ds}
  \le C_{sg}`; at a pool that shares GPUs, a fractional job's option counts in a slice row
  and the GPUs cut in valid layouts count here instead (:mod:`carbonsched.plan.slices`);
* power cap: :math:`\sum_{o \ni (s,t)} P_j x_o + \sum_{d: t_d = t} p_d y_{ds} \le \bar{P}_s`;
* absorption: :math:`a_{st} \le \mathrm{PUE}_{st} \cdot E_{st}`.

Objective [kg CO2e]: :math:`\sum_{s,t} \mathrm{CI}_{st} (\mathrm{PUE}_{st} E_{st} -
a_{st}) h / 1000 + \sum_j c_j u_j` with :math:`E_{st} = \sum_{o \ni (s,t)} P_j w_{ot} x_o` the
mean IT power of the slot, :math:`h = L / 60` its length in hours (so :math:`E_{st} h` is the
IT energy) and :math:`c_j` the unplaced penalty per GPU-hour
(:data:`carbonsched.plan.sets.UNPLACED_PENALTY_FACTOR`) × the job's GPU-hours, or, for a job
whose deadline lies beyond the horizon, its terminal value
(:data:`carbonsched.plan.sets.TERMINAL_VALUE_RULE`). Capacity rows use
:math:`C_{stg}` = GPUs less running work, power rows the cap less running work, rounded
down to the site's power unit (:attr:`carbonsched.plan.sets.PlanSets.power_rhs_kw`).
Emissions: GHG Protocol Scope 2 Guidance (2015), location-based method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pulp

from carbonsched.plan.sets import PlanSets, option_costs
from carbonsched.plan.slices import define_slice_constraints, sliced_options

ABSORB_EPS_KW = 1e-9


@dataclass
class CoverIndex:
    """Which option covers which (site, slot): one row per (option, covered hour).

    ``energy`` is the share of the slot the job runs in it (1, or its fraction in the last
    slot): capacity and power rows see the whole gang in every covered slot, energy,
    emissions and absorption only ``energy`` of it.
    """

    option: np.ndarray
    site: np.ndarray
    slot: np.ndarray
    gtype: np.ndarray
    energy: np.ndarray | None = None


def cover_index(sets: PlanSets, options: np.ndarray) -> CoverIndex:
    """Expand options into the (site, slot) cells they occupy (numpy, no Python loop)."""
    dur = sets.job_dur[options[:, 0]]
    rep = np.repeat(np.arange(len(options)), dur)
    offs = np.arange(len(rep)) - np.repeat(np.cumsum(dur) - dur, dur)
    energy = np.ones(len(rep))
    if len(rep):
        last = np.cumsum(dur) - 1
        energy[last] = sets.job_last_frac[options[:, 0]]
    return CoverIndex(option=rep, site=options[rep, 1], slot=options[rep, 2] + offs,
                      gtype=sets.job_gtype[options[rep, 0]], energy=energy)


@dataclass
class PlanModel:
    """A built PuLP model and the maps from its variables back to positions."""

    lp: pulp.LpProblem
    sets: PlanSets
    options: np.ndarray
    x: list[pulp.LpVariable]
    u: dict[int, pulp.LpVariable]
    y: dict[tuple[int, int], pulp.LpVariable]
    a: dict[tuple[int, int], pulp.LpVariable]
    z: list[pulp.LpVariable] = field(default_factory=list)
    """Binary per piece pattern of a preemptible job (:attr:`PlanSets.patterns`)."""
    slice_w: dict[tuple[int, int, int], dict[int, pulp.LpVariable]] = field(
        default_factory=dict)
    """GPUs cut in each layout per sharing (site, slot, type) cell
    (:func:`carbonsched.plan.slices.define_slice_constraints`)."""
    domain_vars: dict[int, list] = field(default_factory=dict)
    """Option position -> its network-domain variables (:mod:`carbonsched.plan.domains`)."""
    fair_vars: dict[str, Any] = field(default_factory=dict)
    """Shortfall variables of the fair-share and quota rows (:mod:`carbonsched.plan.fairness`)."""


def define_variables(m: PlanModel) -> None:
    """Binary options and unplaced flags, integer inference GPUs, continuous absorption."""
    sets = m.sets
    add = m.lp.add_variable
    m.x = [add(f"x{i}", 0, 1, cat=pulp.LpBinary) for i in range(len(m.options))]
    pats = _patterns(m)
    m.z = [add(f"z{i}", 0, 1, cat=pulp.LpBinary) for i in range(len(pats.job))]
    modelled = np.union1d(m.options[:, 0], pats.job) if len(m.options) else pats.job
    for j in np.unique(modelled):
        m.u[int(j)] = add(f"u{int(j)}", 0, 1, cat=pulp.LpBinary)
    for d, s in zip(*np.nonzero(sets.inf_sites), strict=True):
        if sets.inf_gpus[d] > 0:
            m.y[(int(d), int(s))] = add(f"y{d}_{s}", 0, int(sets.inf_gpus[d]),
                                        cat=pulp.LpInteger)
    for s, t in zip(*np.nonzero((sets.surplus_kw > ABSORB_EPS_KW) & (sets.ci_g_per_kwh > 0)),
                    strict=True):
        m.a[(int(s), int(t))] = add(f"a{s}_{t}", 0, float(sets.surplus_kw[s, t]))


def _patterns(m: PlanModel):
    """The piece patterns the model holds: those of jobs with an option in it."""
    from carbonsched.plan.sets import PiecePatterns, empty_patterns

    pats = m.sets.patterns
    if pats is None or len(pats) == 0:
        return empty_patterns()
    keep = np.flatnonzero(np.isin(pats.job, m.options[:, 0]))
    return PiecePatterns(pats.job[keep], pats.site[keep], pats.cost_kg[keep],
                         [pats.pieces[i] for i in keep]) if len(keep) < len(pats) else pats


def define_assignment_constraints(m: PlanModel) -> None:
    """Each placeable job starts once (one option or one piece pattern) or is unplaced."""
    terms: dict[int, list] = {}
    for i, j in enumerate(m.options[:, 0].tolist()):
        terms.setdefault(j, []).append((m.x[i], 1))
    for i, j in enumerate(_patterns(m).job.tolist()):
        terms.setdefault(j, []).append((m.z[i], 1))
    for j in sorted(terms):
        expr = pulp.LpAffineExpression(terms[j] + [(m.u[j], 1)])
        m.lp.addConstraint(expr == 1, name=f"assign{j}")


def define_inference_constraints(m: PlanModel) -> None:
    """Each inference demand is served in full from sites within its SLO."""
    by_d: dict[int, list] = {}
    for (d, _s), var in m.y.items():
        by_d.setdefault(d, []).append((var, 1))
    for d, terms in by_d.items():
        m.lp.addConstraint(pulp.LpAffineExpression(terms) == int(m.sets.inf_gpus[d]),
                           name=f"serve{d}")


def _cell_terms(m: PlanModel, weight_job: np.ndarray, weight_inf: np.ndarray, by_type: bool,
                energy: bool = False, skip: np.ndarray | None = None) -> dict[tuple, list]:
    """Terms per (site, slot[, type]) cell: option weights and inference weights.

    With ``energy`` the option weight is scaled by the share of the slot the job runs; options
    where ``skip`` (shape ``(O,)``) is true are left out.
    """
    sets = m.sets
    cov = cover_index(sets, m.options)
    cells: dict[tuple, list] = {}
    keys = (zip(cov.site.tolist(), cov.slot.tolist(), cov.gtype.tolist(), strict=True) if by_type
            else zip(cov.site.tolist(), cov.slot.tolist(), strict=True))
    w = weight_job[m.options[cov.option, 0]]
    if energy:
        w = w * cov.energy
    drop = skip[cov.option] if skip is not None else None
    for i, (key, o, wo) in enumerate(zip(keys, cov.option.tolist(), w.tolist(), strict=True)):
        if drop is not None and drop[i]:
            continue
        cells.setdefault(key, []).append((m.x[o], wo))
    pats = _patterns(m)
    if len(pats):
        # piece patterns: the whole gang in every covered slot, energy its share
        pp, ps, pt, pg, pe = pats.cover(sets)
        wp = weight_job[pats.job[pp]] * (pe if energy else 1.0)
        pkeys = (zip(ps.tolist(), pt.tolist(), pg.tolist(), strict=True) if by_type
                 else zip(ps.tolist(), pt.tolist(), strict=True))
        for key, p, wo in zip(pkeys, pp.tolist(), np.broadcast_to(wp, pp.shape).tolist(),
                              strict=True):
            cells.setdefault(key, []).append((m.z[p], wo))
    for (d, s), var in m.y.items():
        for t in sets.inf_slots(d):           # every slot of the demand's hour
            key = (s, t, int(sets.inf_gtype[d])) if by_type else (s, t)
            cells.setdefault(key, []).append((var, float(weight_inf[d])))
    return cells


def _max_load(terms: list) -> float:
    """Largest value a cell's left-hand side can take (all variables at their upper bound)."""
    return sum(w * (var.upBound if var.upBound is not None else 1) for var, w in terms)


def define_capacity_constraints(m: PlanModel) -> None:
    """GPUs used by jobs and inference per (site, slot, type) within the site's count.

    Cells whose largest possible load fits are skipped (they can never bind). A fractional
    job at a site that shares its GPUs takes a slice, not a GPU: its cells get the layout
    rows of :func:`carbonsched.plan.slices.define_slice_constraints` instead.
    """
    sets = m.sets
    sliced = sliced_options(sets, m.options)
    cells = _cell_terms(m, sets.job_gpus.astype(float), np.ones(len(sets.inf_gpus)), True,
                        skip=sliced if sliced.any() else None)
    done = define_slice_constraints(m, cells) if sliced.any() else set()
    for (s, t, g), terms in sorted(cells.items()):
        if (s, t, g) in done:
            continue
        cap = int(sets.gpu_cap[s, t, g])
        if _max_load(terms) <= cap:
            continue
        m.lp.addConstraint(pulp.LpAffineExpression(terms) <= cap, name=f"cap{s}_{t}_{g}")


def define_power_constraints(m: PlanModel) -> None:
    """IT power of jobs and inference per (site, slot) within the site-hour's cap [kW].

    The cap is :attr:`PlanSets.power_cap_kw`: the IT cap, or the facility (grid-connection)
    cap divided by the PUE's upper 95 % bound where that is lower (facility = IT × PUE),
    rounded down to the site's power unit (:attr:`PlanSets.power_rhs_kw`).
    """
    sets = m.sets
    inf_w = sets.inf_kw_per_gpu  # per GPU; y counts GPUs
    cells = _cell_terms(m, sets.job_kw, inf_w, False)
    rhs = sets.power_rhs_kw
    for (s, t), terms in sorted(cells.items()):
        if _max_load(terms) <= rhs[s, t] + 1e-9:
            continue
        m.lp.addConstraint(pulp.LpAffineExpression(terms) <= float(rhs[s, t]),
                           name=f"pow{s}_{t}")


def define_absorption_constraints(m: PlanModel) -> None:
    """Absorbed surplus at most the site-hour's facility power, PUE × IT [kW]."""
    sets = m.sets
    if not m.a:
        return
    cells = _cell_terms(m, sets.job_kw, sets.inf_kw_per_gpu, False, energy=True)
    for (s, t), var in m.a.items():
        terms = [(v, -w * float(sets.pue[s, t])) for v, w in cells.get((s, t), [])]
        m.lp.addConstraint(pulp.LpAffineExpression([(var, 1.0)] + terms) <= 0,
                           name=f"absorb{s}_{t}")


def define_objective(m: PlanModel) -> None:
    """Emissions net of absorbed surplus plus the unplaced penalty. [kg CO2e]"""
    sets = m.sets
    cost = option_costs(sets, m.options)
    terms = list(zip(m.x, cost.tolist(), strict=True))
    terms += list(zip(m.z, _patterns(m).cost_kg.tolist(), strict=True))
    # unplaced penalty, or the terminal value of a job deferred past the horizon
    terms += [(v, float(sets.unplaced_cost[j])) for j, v in m.u.items()]
    cpk = sets.cost_per_kwh
    if sets.slots_per_hour == 1:
        terms += [(v, float(sets.inf_kw_per_gpu[d] * cpk[s, sets.inf_hour[d]]))
                  for (d, s), v in m.y.items()]
        terms += [(v, -float(sets.ci_g_per_kwh[s, t]) / 1000.0) for (s, t), v in m.a.items()]
    else:
        # sub-hour slots: a demand's GPUs run in every slot of its hour, each slot_hours long;
        # absorbed surplus a [kW] over a slot is a × slot_hours kWh
        h = sets.slot_hours
        terms += [(v, float(sets.inf_kw_per_gpu[d] * h * sum(cpk[s, t]
                                                              for t in sets.inf_slots(d))))
                  for (d, s), v in m.y.items()]
        terms += [(v, -float(sets.ci_g_per_kwh[s, t]) * h / 1000.0)
                  for (s, t), v in m.a.items()]
    m.lp.setObjective(pulp.LpAffineExpression(terms))


def build_model(sets: PlanSets, options: np.ndarray | None = None) -> PlanModel:
    """Build the PuLP model over ``options`` (default: every feasible option).

    Parameters
    ----------
    sets
        Compiled sets.
    options
        ``(O, 3)`` ``(job, site, start)`` positions to model; jobs without an option here are
        not modelled (they stay unplaced).

    Returns
    -------
    PlanModel
    """
    opts = sets.options if options is None else options
    m = PlanModel(lp=pulp.LpProblem("carbonsched_plan", pulp.LpMinimize), sets=sets,
                  options=opts, x=[], u={}, y={}, a={}, z=[])
    define_variables(m)
    define_assignment_constraints(m)
    define_inference_constraints(m)
    define_capacity_constraints(m)
    define_power_constraints(m)
    define_absorption_constraints(m)
    define_objective(m)
    if any(j.max_domains is not None for j in sets.problem.jobs):
        from carbonsched.plan.domains import define_domain_constraints

        define_domain_constraints(m)
    if getattr(sets.problem, "fair_targets", None) is not None:
        from carbonsched.plan.fairness import define_fairness_constraints

        define_fairness_constraints(m, _patterns(m))
    return m


INTEGRALITY_TOL = 1e-5
"""Largest distance of an integer variable's value from a whole number that is read as that
number (HiGHS's ``mip_feasibility_tolerance`` is 1e-6, CBC's ``integerTolerance`` 1e-7; a
little slack for the values PuLP reads back from CBC's text solution file). [-]"""


def integrality_issues(m: PlanModel, tol: float = INTEGRALITY_TOL) -> list[str]:
    """Integer variables whose solved value is not a whole number within ``tol``.

    Returns
    -------
    list of str
        One line per offending variable (at most 5, then a count), naming the job or demand;
        empty when every option is 0 or 1 and every inference allocation whole and >= 0.
    """
    prob = m.sets.problem
    out: list[str] = []
    for i, v in enumerate(m.x):
        val = v.varValue
        if val is None or abs(val - round(val)) > tol or round(val) not in (0, 1):
            j = int(m.options[i, 0])
            out.append(f"option {i} of job {prob.jobs[j].id!r} = {val!r}, not 0 or 1")
    pats = _patterns(m)
    for i, v in enumerate(m.z):
        val = v.varValue
        if val is None or abs(val - round(val)) > tol or round(val) not in (0, 1):
            j = int(pats.job[i])
            out.append(f"piece pattern {i} of job {prob.jobs[j].id!r} = {val!r}, not 0 or 1")
    for (d, s), v in m.y.items():
        val = v.varValue
        if val is None or abs(val - round(val)) > tol or val < -tol:
            out.append(f"inference GPUs of demand {d} at site {m.sets.site[s]!r} = {val!r}, "
                       "not a whole number >= 0")
    if len(out) > 5:
        out = out[:5] + [f"and {len(out) - 5} more"]
    return out


def read_patterns(m: PlanModel) -> np.ndarray:
    """Positions (in :attr:`PlanSets.patterns`) of the chosen piece patterns."""
    pats = m.sets.patterns
    held = _patterns(m)
    if not m.z:
        return np.zeros(0, dtype=np.int64)
    vals = np.array([v.varValue if v.varValue is not None else 0.0 for v in m.z])
    chosen = np.flatnonzero(vals > 0.5)
    if held is pats:
        return chosen.astype(np.int64)
    keep = np.flatnonzero(np.isin(pats.job, m.options[:, 0]))
    return keep[chosen].astype(np.int64)


def read_solution(m: PlanModel) -> tuple[np.ndarray, np.ndarray]:
    """Chosen options ``(P, 3)`` and inference allocation ``(D, S)`` from solved variables."""
    vals = np.array([v.varValue if v.varValue is not None else 0.0 for v in m.x])
    chosen = m.options[vals > 0.5] if len(vals) else np.zeros((0, 3), dtype=np.int64)
    alloc = np.zeros(m.sets.inf_sites.shape, dtype=np.int64)
    for (d, s), v in m.y.items():
        alloc[d, s] = int(round(v.varValue or 0.0))
    return chosen, alloc
