"""Network domains after solving: every plan's topology-bound gangs put in their domains.

Whatever made a plan (the direct MILP, column generation, a baseline or the greedy fallback), it
leaves the planner through :func:`with_domains`: :func:`carbonsched.plan.domains.
complete_domains` gives each bound gang its domain per node, and a gang no domain has room for
is unplaced, named, with the plan's totals recomputed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from carbonsched.plan.domains import DOMAIN_NOTE, bound_jobs, complete_domains
from carbonsched.plan.result import build_plan_result
from carbonsched.plan.sets import inference_positions, placement_positions


def with_domains(sets: Any, res: Any, given: dict[str, tuple[int, ...]] | None = None) -> Any:
    """``res`` with every topology-bound gang in its network domains.

    :func:`carbonsched.plan.domains.complete_domains` (the solver's domains, first-fit for
    the rest); when a gang had no room it is unplaced and the plan's totals are recomputed
    from the remaining placements, with a note naming how many.

    Raises
    ------
    ValueError
        Rebuilding the plan, when ``res`` names a job or site the sets do not know or serves
        an inference (area, hour, GPU type) with more GPUs than demanded
        (:func:`~carbonsched.plan.sets.inference_positions`).
    """
    if not bound_jobs(sets.problem):
        return res
    before = list(res.placements)
    dropped = complete_domains(sets, res, given)
    if dropped and any(p.pieces > 1 for p in res.placements):
        # pieces cannot be rebuilt from positions: take the dropped gangs' own numbers off
        gone = [p for p in before if p.job_id in set(dropped)]
        kg = sum(p.emissions_kg for p in gone)
        res.totals["energy_kwh"] -= sum(p.energy_kwh for p in gone)
        res.totals["emissions_kg"] -= kg
        res.totals["objective"] += sum(float(sets.unplaced_cost[k]) for k, j in
                                       enumerate(sets.problem.jobs) if j.id in set(dropped)) - kg
        res.totals["jobs_placed"] -= len(dropped)
        res.totals["jobs_unplaced"] += len(dropped)
        res.notes.append(f"domains: {len(dropped)} gang(s) found no network domain with room "
                         "after solving and were left unplaced (InsufficientCapacity)")
    elif dropped:
        keep = {p.job_id: p.domains for p in res.placements}
        extra = {u.job_id: (u.reason, u.detail) for u in res.unplaced if u.job_id in dropped}
        jpos = {j.id: k for k, j in enumerate(sets.problem.jobs)}
        chosen = placement_positions(sets, res.placements)
        alloc = inference_positions(sets, res.inference)
        new = build_plan_result(sets, chosen, alloc, res.status, res.solver,
                                {jpos[j]: extra[j] for j in dropped})
        new.placements = [dataclasses.replace(p, domains=keep.get(p.job_id, ()))
                          for p in new.placements]
        new.notes.append(f"domains: {len(dropped)} gang(s) found no network domain with room "
                         "after solving and were left unplaced (InsufficientCapacity)")
        res = new
    n = sum(1 for p in res.placements if p.domains)
    if n and not any(x.startswith("domains:") for x in res.notes):
        res.notes.append(DOMAIN_NOTE.format(n=n))
    return res
