r"""Network domains: gangs kept inside one (or at most :math:`N`) NVLink/InfiniBand domains.

A site's pool of GPU type :math:`g` has nodes of :math:`q_{sg}` GPUs (``gpus_per_node``)
grouped into domains of :math:`k_{sgd}` nodes (``nodes_per_domain``; the last domain holds
the rest, :attr:`carbonsched.domain.GpuPool.domain_nodes`). A domain is a sub-pool of the
site's GPU type: the pool's GPU capacity row (:func:`carbonsched.plan.model.
define_capacity_constraints`) still holds for all work; in addition, the gangs with a
topology constraint (:attr:`carbonsched.domain.Job.max_domains` :math:`N_j`) hold, in every
slot, at most the GPUs of each domain they are placed in. Work without a constraint (and
inference) may use any GPU of the pool, so it fills what the bound gangs leave; the model
is exact at the level of GPUs per domain (it does not place work on single nodes).

Variables, for each option :math:`o = (j, s, t_0)` of a bound gang of :math:`n_j` nodes at a
pool of more than one domain:

* :math:`N_j = 1` or :math:`n_j = 1`: binaries :math:`b_{od}` over the domains with
  :math:`k_{sgd} \ge n_j`, :math:`\sum_d b_{od} = x_o`; the gang's GPUs in :math:`d` are
  :math:`G_j b_{od}`.
* otherwise: integers :math:`v_{od} \in [0, \min(n_j, k_{sgd})]` (nodes in :math:`d`) and
  binaries :math:`b_{od}`, :math:`v_{od} \le \min(n_j, k_{sgd})\, b_{od}`,
  :math:`\sum_d b_{od} \le N_j x_o`, :math:`\sum_d v_{od} = n_j x_o`; GPUs in :math:`d` are
  :math:`q_{sg} v_{od}`.

Domain capacity: :math:`\sum_{o \ni t} \mathrm{GPUs}_{od} \le q_{sg} k_{sgd}` for every
(site, type, domain, slot), less what running work holds there (:func:`running_by_domain`:
a running gang's domains, a running slice's GPU); other running work is held by the pool's
capacity row only.

Every plan, whatever made it (direct MILP, column generation, the greedy fallback), leaves
the planner through :func:`complete_domains`: placements of bound gangs get their domain per
node (:attr:`carbonsched.domain.Placement.domains`), first-fit where the solver did not say,
and a gang no domain has room for is taken out of the plan with a reason;
:func:`domain_violations` recounts the result for :func:`carbonsched.plan.result.score_plan`.
Dispatch hints: Slurm ``--switches`` (sbatch, "--switches=<count>[@max-time]": the maximum
count of leaf switches desired for the job allocation), Kueue topology-aware scheduling
annotations (``kueue.x-k8s.io/podset-required-topology``); see docs/dispatch.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pulp

from carbonsched.domain import Placement, ReasonCode

DOMAIN_NOTE = ("domains: {n} gang(s) with a topology constraint placed inside their network "
               "domains (Placement.domains: the domain of each node)")


@dataclass(frozen=True)
class DomainPool:
    """The domain shape of one (site, GPU type) pool.

    Attributes
    ----------
    node_gpus
        GPUs per node, :math:`q_{sg}`. [-]
    nodes
        Nodes per domain, shape ``(M,)``, :math:`k_{sgd}`. [-]
    """

    node_gpus: int
    nodes: tuple[int, ...]

    @property
    def gpus(self) -> np.ndarray:
        """GPUs per domain, shape ``(M,)``. [-]"""
        return np.array(self.nodes, dtype=np.int64) * self.node_gpus

    def domain_of(self, gpu_index: int) -> int:
        """The domain holding GPU ``gpu_index`` of the pool (``0 .. count - 1``).

        GPUs are numbered node by node and the nodes domain by domain (domain 0 holds GPUs
        ``0 .. q k_0 - 1``), the numbering :attr:`carbonsched.domain.Placement.gpu_index` of a
        slice uses; an index past the last domain is counted in the last one.
        """
        ends = np.cumsum(self.gpus)
        return min(int(np.searchsorted(ends, gpu_index, side="right")), len(self.nodes) - 1)

    def first_gpu(self, domain: int) -> int:
        """Index of the first GPU of ``domain`` (:meth:`domain_of`'s numbering). [-]"""
        return int(self.gpus[:domain].sum())


def domain_pools(problem: Any) -> dict[tuple[str, str], DomainPool]:
    """Domain shape of every (site id, GPU type) pool of ``problem``'s sites.

    Parameters
    ----------
    problem
        A :class:`~carbonsched.plan.sets.PlanningProblem`.
    """
    return {(s.id, g): DomainPool(pool.node_gpus, pool.domain_nodes)
            for s in problem.sites for g, pool in s.gpus.items()}


def bound_jobs(problem: Any) -> set[str]:
    """Ids of the jobs with a topology constraint (:attr:`Job.max_domains` set)."""
    return {j.id for j in problem.jobs if j.max_domains is not None}


def needs_domain_model(sets: Any) -> bool:
    """True when a bound gang has an option at a pool of more than one domain."""
    prob = sets.problem
    pools = domain_pools(prob)
    for k in sets.placeable:
        job = prob.jobs[int(k)]
        if job.max_domains is None:
            continue
        for s in np.flatnonzero(sets.job_sites[int(k)]):
            if len(pools[(sets.site[int(s)], job.gpu_type)].nodes) > 1:
                return True
    return False


def gang_nodes(job: Any, pool: DomainPool) -> tuple[int, int]:
    """Nodes of a gang and the GPUs it uses on each (the whole gang when it fits one node).

    Returns
    -------
    (nodes, gpus_per_node)
        [-]
    """
    if job.gpus <= pool.node_gpus:
        return 1, job.gpus
    return job.gpus // pool.node_gpus, pool.node_gpus




def fit_gang(job: Any, pool: DomainPool, free_gpus: np.ndarray) -> list[int]:
    """Domains for the nodes of a topology-bound gang, first fit; empty when none holds it.

    Parameters
    ----------
    job
        The gang (:attr:`carbonsched.domain.Job.max_domains` set).
    pool
        Its pool's domain shape.
    free_gpus
        GPUs free in every slot the gang runs, per domain, shape ``(M,)``: what bound gangs
        and GPUs carrying slices leave (:func:`sliced_gpus_by_domain`). [-]

    Returns
    -------
    list of int
        One domain per node: the lowest domain with room for the whole gang, else (a span of
        up to ``max_domains``) the domains with the most room first.
    """
    nodes, per = gang_nodes(job, pool)
    room = np.minimum(np.maximum(free_gpus, 0) // per, np.array(pool.nodes))
    whole = [d for d in range(len(pool.nodes)) if room[d] >= nodes]
    if whole:
        return [whole[0]] * nodes
    doms: list[int] = []
    if nodes > 1 and (job.max_domains or 1) > 1:
        left = nodes
        for d in np.argsort(-room, kind="stable").tolist():
            if left <= 0 or len(set(doms)) >= job.max_domains:
                break
            take = int(min(room[d], left))
            if take > 0:
                doms += [d] * take
                left -= take
        if left > 0:
            doms = []
    return doms


def running_by_domain(sets: Any, problem: Any, slices: bool = True
                      ) -> dict[tuple[str, str], np.ndarray]:
    """GPUs running work holds per domain and slot: gangs in their domains, slices' GPUs.

    A running topology-bound gang (:attr:`carbonsched.domain.RunningWork.domains`) holds its
    GPUs per node in each of its domains; a running slice (``gpu_index``) holds its GPU once
    per slot in that GPU's domain (:meth:`DomainPool.domain_of`), however many slices share
    it. Other running work is held by the pool's row only.

    Parameters
    ----------
    sets
        :class:`~carbonsched.plan.sets.PlanSets` of ``problem`` (its slot axis).
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem` (its ``running``).
    slices
        Count running slices too (``False``: gangs only, for callers that count the running
        slices with the plan's, :func:`sliced_gpus_by_domain`, so a shared GPU counts once).

    Returns
    -------
    dict
        ``(site id, GPU type)`` -> GPUs, shape ``(M, T)`` on ``sets``' slot axis. [-]
    """
    pools = domain_pools(problem)
    n_t = len(sets.slot)
    t0 = sets.slot[0]
    slot = pd.Timedelta(minutes=sets.slot_minutes)
    out: dict[tuple[str, str], np.ndarray] = {}
    seen: set[tuple[str, str, int, int]] = set()
    for r in getattr(problem, "running", ()) or ():
        key = (r.site, r.gpu_type)
        if key not in pools or (not r.domains and (r.gpu_index is None or not slices)):
            continue
        pool = pools[key]
        a = 0 if r.start is None else max(int(np.floor((r.start - t0) / slot)), 0)
        b = min(int(np.ceil((r.end - t0) / slot - 1e-9)), n_t)
        if b <= a:
            continue
        u = out.setdefault(key, np.zeros((len(pool.nodes), n_t), dtype=np.int64))
        if r.gpu_index is not None:
            if not slices:
                continue
            d = pool.domain_of(r.gpu_index)
            for t in range(a, b):
                if (r.site, r.gpu_type, r.gpu_index, t) not in seen:
                    seen.add((r.site, r.gpu_type, r.gpu_index, t))
                    u[d, t] += 1
            continue
        per = r.gpus // len(r.domains)
        for d in r.domains:
            if 0 <= d < len(pool.nodes):
                u[d, a:b] += per
    return out


def _add(a: dict[tuple[str, str], np.ndarray], b: dict[tuple[str, str], np.ndarray]
         ) -> dict[tuple[str, str], np.ndarray]:
    for k, v in b.items():
        a[k] = a[k] + v if k in a else v.copy()
    return a


def sliced_gpus_by_domain(sets: Any, problem: Any, placements: list[Placement]
                          ) -> dict[tuple[str, str], np.ndarray]:
    """GPUs carrying slices per domain and slot, from the placements' ``gpu_index``.

    A GPU carrying one or more MIG or milli slices in a slot is one GPU of its domain in that
    slot (:meth:`DomainPool.domain_of`), which topology-bound gangs cannot use: slices and
    gangs draw from one book of GPUs per domain and slot.

    Parameters
    ----------
    sets
        :class:`~carbonsched.plan.sets.PlanSets` of ``problem`` (its slot axis).
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem`.
    placements
        The plan's placements; those with ``gpu_index`` set are slices. Running slices
        (:attr:`carbonsched.domain.RunningWork.gpu_index`) are counted with them.

    Returns
    -------
    dict
        ``(site id, GPU type)`` -> GPUs carrying slices, shape ``(M, T)``. [-]
    """
    pools = domain_pools(problem)
    n_t = len(sets.slot)
    cells: set[tuple[str, str, int, int]] = set()
    for p in placements:
        if p.gpu_index is None or (p.site, p.gpu_type) not in pools:
            continue
        for t in _slots(sets, p):
            if t < n_t:
                cells.add((p.site, p.gpu_type, int(p.gpu_index), t))
    t0 = sets.slot[0]
    slot = pd.Timedelta(minutes=sets.slot_minutes)
    for r in getattr(problem, "running", ()) or ():
        # slices committed by an earlier run: their GPUs count once with the plan's
        if r.gpu_index is None or (r.site, r.gpu_type) not in pools:
            continue
        a = 0 if r.start is None else max(int(np.floor((r.start - t0) / slot)), 0)
        b = min(int(np.ceil((r.end - t0) / slot - 1e-9)), n_t)
        for t in range(a, b):
            cells.add((r.site, r.gpu_type, int(r.gpu_index), t))
    out: dict[tuple[str, str], np.ndarray] = {}
    for site, g, gi, t in cells:
        pool = pools[(site, g)]
        u = out.setdefault((site, g), np.zeros((len(pool.nodes), n_t), dtype=np.int64))
        u[pool.domain_of(gi), t] += 1
    return out


def define_domain_constraints(m: Any) -> None:
    """Domain variables and one capacity row per (site, type, domain, slot) that can bind.

    Fills ``m.domain_vars``: option position -> list of ``(domain, variable, GPUs per unit,
    nodes per unit)``. See the module docstring for the rows.
    """
    sets = m.sets
    prob = sets.problem
    pools = domain_pools(prob)
    cells: dict[tuple[int, int, int, int], list] = {}
    caps: dict[tuple[int, int, int, int], int] = {}
    held = running_by_domain(sets, prob)     # running gangs and slices in their domains
    add = m.lp.add_variable
    for i, (j, s, t0) in enumerate(m.options.tolist()):
        job = prob.jobs[j]
        if job.max_domains is None:
            continue
        g = int(sets.job_gtype[j])
        pool = pools[(sets.site[s], job.gpu_type)]
        if len(pool.nodes) < 2:
            continue
        nodes, per_node = gang_nodes(job, pool)
        x = m.x[i]
        entries = []
        if job.max_domains == 1 or nodes == 1:
            bs = [(d, add(f"db{i}_{d}", 0, 1, cat=pulp.LpBinary))
                  for d, k in enumerate(pool.nodes) if k >= nodes]
            m.lp.addConstraint(pulp.LpAffineExpression([(b, 1) for _d, b in bs] + [(x, -1)])
                               == 0, name=f"dom1_{i}")
            entries = [(d, b, job.gpus, nodes) for d, b in bs]
        else:
            bs, vs = [], []
            for d, k in enumerate(pool.nodes):
                top = min(nodes, k)
                b = add(f"db{i}_{d}", 0, 1, cat=pulp.LpBinary)
                v = add(f"dv{i}_{d}", 0, top, cat=pulp.LpInteger)
                m.lp.addConstraint(pulp.LpAffineExpression([(v, 1), (b, -top)]) <= 0,
                                   name=f"domon{i}_{d}")
                bs.append(b)
                vs.append((d, v))
            m.lp.addConstraint(pulp.LpAffineExpression(
                [(b, 1) for b in bs] + [(x, -job.max_domains)]) <= 0, name=f"domspan{i}")
            m.lp.addConstraint(pulp.LpAffineExpression(
                [(v, 1) for _d, v in vs] + [(x, -nodes)]) == 0, name=f"domnodes{i}")
            entries = [(d, v, per_node, 1) for d, v in vs]
        m.domain_vars[i] = entries
        for t in range(t0, t0 + int(sets.job_dur[j])):
            for d, var, w, _n in entries:
                key = (s, g, d, t)
                cells.setdefault(key, []).append((var, float(w)))
                run = held.get((sets.site[s], job.gpu_type))
                caps[key] = int(pool.gpus[d]) - (int(run[d, t]) if run is not None
                                                 and t < run.shape[1] else 0)
    for key, terms in sorted(cells.items()):
        load = sum(w * (v.upBound if v.upBound is not None else 1) for v, w in terms)
        if load <= caps[key]:
            continue
        s, g, d, t = key
        m.lp.addConstraint(pulp.LpAffineExpression(terms) <= caps[key],
                           name=f"domcap{s}_{g}_{d}_{t}")


def read_domains(m: Any) -> dict[str, tuple[int, ...]]:
    """The domain of each node of every chosen bound gang in a solved model.

    Returns
    -------
    dict
        Job id -> domain per node (sorted), for the options the solver chose.
    """
    out: dict[str, tuple[int, ...]] = {}
    jobs = m.sets.problem.jobs
    for i, entries in m.domain_vars.items():
        if (m.x[i].varValue or 0.0) < 0.5:
            continue
        per: list[int] = []
        for d, var, _w, n in entries:
            val = int(round(var.varValue or 0.0))
            per += [d] * (val * n)
        out[jobs[int(m.options[i, 0])].id] = tuple(sorted(per))
    return out


def _slots(sets: Any, p: Placement) -> range:
    slot = pd.Timedelta(minutes=sets.slot_minutes)
    a = int(round((p.start - sets.slot[0]) / slot))
    b = a + int(np.ceil((p.end - p.start) / slot - 1e-9))
    return range(max(a, 0), max(b, 0))


def complete_domains(sets: Any, result: Any, given: dict[str, tuple[int, ...]] | None = None
                     ) -> list[str]:
    """Give every placement of a bound gang its domain per node; drop gangs with no room.

    Placements keep domains the solver chose (``given``, or already on the placement); the
    rest are put first-fit (largest gangs first, lowest domain that has room in every slot
    they occupy, within ``max_domains``). A gang that fits no domain is removed from the
    plan and listed unplaced (``InsufficientCapacity``, the detail naming the domains); the
    result's totals are then recomputed from the remaining placements by the caller.

    Parameters
    ----------
    sets
        The compiled :class:`~carbonsched.plan.sets.PlanSets`.
    result
        The :class:`~carbonsched.plan.result.PlanResult`, changed in place.
    given
        Job id -> domain per node from the solver.

    Returns
    -------
    list of str
        Ids of the jobs taken out of the plan (empty in the usual case).
    """
    prob = sets.problem
    bound = bound_jobs(prob)
    if not bound:
        return []
    given = dict(given or {})
    pools = domain_pools(prob)
    jobs = {j.id: j for j in prob.jobs}
    n_t = len(sets.slot)
    # one book per (site, type): GPUs held per domain and slot by bound gangs and by slices
    used: dict[tuple[str, str], np.ndarray] = _add(
        sliced_gpus_by_domain(sets, prob, result.placements),
        running_by_domain(sets, prob, slices=False))

    def usage(p: Placement) -> np.ndarray:
        key = (p.site, p.gpu_type)
        if key not in used:
            used[key] = np.zeros((len(pools[key].nodes), n_t), dtype=np.int64)
        return used[key]

    def charge(p: Placement, doms: tuple[int, ...], sign: int) -> None:
        pool = pools[(p.site, p.gpu_type)]
        _n, per = gang_nodes(jobs[p.job_id], pool)
        u = usage(p)
        rng = [t for t in _slots(sets, p) if t < n_t]
        for d in doms:
            u[d, rng] += sign * per

    todo: list[int] = []
    placements = list(result.placements)
    for i, p in enumerate(placements):
        if p.job_id not in bound:
            continue
        if p.domains:
            charge(p, tuple(p.domains), 1)
        else:
            todo.append(i)
    later: list[int] = []
    for i in todo:
        # the solver's domains, where the book (slices included) still has room for them
        p = placements[i]
        doms = tuple(given.get(p.job_id, ()))
        pool = pools[(p.site, p.gpu_type)]
        rng = [t for t in _slots(sets, p) if t < n_t]
        _n, per = gang_nodes(jobs[p.job_id], pool)
        need = np.bincount(np.array(doms, dtype=np.int64), minlength=len(pool.nodes)) * per \
            if doms else None
        if need is not None and len(need) == len(pool.nodes) and (not rng or (
                usage(p)[:, rng] + need[:, None] <= pool.gpus[:, None]).all()):
            placements[i] = dataclasses.replace(p, domains=doms)
            charge(placements[i], doms, 1)
        else:
            later.append(i)
    todo = later
    dropped: list[str] = []
    for i in sorted(todo, key=lambda i: -placements[i].gpus):
        p = placements[i]
        job = jobs[p.job_id]
        pool = pools[(p.site, p.gpu_type)]
        u = usage(p)
        rng = [t for t in _slots(sets, p) if t < n_t]
        free = (pool.gpus[:, None] - u[:, rng]).min(axis=1) if rng else pool.gpus
        doms = fit_gang(job, pool, free)
        if not doms:
            dropped.append(p.job_id)
            continue
        placements[i] = dataclasses.replace(p, domains=tuple(sorted(doms)))
        charge(placements[i], tuple(doms), 1)
    if dropped:
        gone = set(dropped)
        placements = [p for p in placements if p.job_id not in gone]
        from carbonsched.domain import Unplaced

        result.unplaced += [Unplaced(
            job_id=j, reason=ReasonCode.INSUFFICIENT_CAPACITY,
            detail="placed by the solver, but no network domain had room for the gang in "
                   "every slot it runs (topology constraint); left for a later run")
            for j in dropped]
    result.placements = placements
    return dropped


def domain_violations(sets: Any, problem: Any, result: Any) -> int:
    """Recount a plan's network domains from its placements alone.

    Counts, for placements of gangs with a topology constraint: a domain list that is not
    one entry per node of the gang, names a domain the pool lacks, spans more than
    ``max_domains`` domains, or puts more nodes in a domain than it has; and (site, type,
    domain, slot) cells where the bound gangs and the GPUs carrying slices together hold more
    GPUs than the domain has (:func:`sliced_gpus_by_domain`: a slice's GPU is not free for a
    gang).

    Parameters
    ----------
    sets
        :class:`~carbonsched.plan.sets.PlanSets` of ``problem`` (its slot axis).
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem`.
    result
        The plan.

    Returns
    -------
    int
        Violations. [-]
    """
    pools = domain_pools(problem)
    jobs = {j.id: j for j in problem.jobs}
    n_t = len(sets.slot)
    bad = 0
    load = _add(sliced_gpus_by_domain(sets, problem, result.placements),
                running_by_domain(sets, problem, slices=False))
    for p in result.placements:
        job = jobs.get(p.job_id)
        if job is None or job.max_domains is None or (p.site, p.gpu_type) not in pools:
            continue
        pool = pools[(p.site, p.gpu_type)]
        nodes, per = gang_nodes(job, pool)
        doms = list(p.domains)
        counts = np.bincount([d for d in doms if 0 <= d < len(pool.nodes)],
                             minlength=len(pool.nodes))
        if (len(doms) != nodes or any(not 0 <= d < len(pool.nodes) for d in doms)
                or len(set(doms)) > job.max_domains
                or (counts > np.array(pool.nodes)).any()):
            bad += 1
            continue
        u = load.setdefault((p.site, p.gpu_type), np.zeros((len(pool.nodes), n_t), np.int64))
        rng = [t for t in _slots(sets, p) if t < n_t]
        for d in doms:
            u[d, rng] += per
    for key, u in load.items():
        bad += int((u > pools[key].gpus[:, None]).sum())
    return bad
