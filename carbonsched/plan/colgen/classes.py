"""Job classes (jobs identical for the model) and the job orders and roundings over them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from carbonsched.plan.result import PlanResult
from carbonsched.plan.sets import PlanSets, placement_positions


@dataclass
class Classes:
    """Jobs grouped into interchangeable classes."""

    rep: np.ndarray            # representative job position per class, (C,)
    mult: np.ndarray           # jobs per class, (C,)
    of_job: np.ndarray         # class of each job position, -1 if not placeable, (J,)
    members: list[np.ndarray]  # job positions per class


def job_classes(sets: PlanSets) -> Classes:
    """Group placeable jobs by (type, gang, minutes, power, window, sites, unplaced cost).

    Parameters
    ----------
    sets
        Compiled sets.

    Returns
    -------
    Classes
        Representative job, multiplicity and member jobs of every class, and each
        placeable job's class (-1 for a job that cannot be placed).
    """
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


def unit_classes(sets: PlanSets, cls: Classes) -> np.ndarray:
    """Positions of the classes whose jobs take one GPU for one slot, ``(K,)``.

    Parameters
    ----------
    sets
        Compiled sets.
    cls
        The job classes (:func:`job_classes`).

    Returns
    -------
    numpy.ndarray
        Class positions, ``(K,)``.
    """
    reps = cls.rep
    return np.flatnonzero((sets.job_gpus[reps] == 1) & (sets.job_dur[reps] == 1))


def plan_options(sets: PlanSets, cls: Classes, plan: PlanResult) -> np.ndarray:
    """``(P, 3)`` ``(representative, site, start)`` of every placement of a plan.

    Parameters
    ----------
    sets
        Compiled sets.
    cls
        The job classes (:func:`job_classes`).
    plan
        A plan of ``sets``' problem.

    Returns
    -------
    numpy.ndarray
        ``(P, 3)`` int64, one row per placement, the job replaced by its class's
        representative.
    """
    pos = placement_positions(sets, plan.placements)
    pos[:, 0] = cls.rep[cls.of_job[pos[:, 0]]]
    return pos


def count_options(sets: PlanSets) -> int:
    """Number of feasible (job, site, start) options of the full model.

    Parameters
    ----------
    sets
        Compiled sets.

    Returns
    -------
    int
        Options of every placeable job: allowed sites × starts in its window.
    """
    n_t = len(sets.slot)
    j = sets.placeable
    win = np.clip(sets.job_last[j] - sets.job_first[j] + 1, 0, n_t)
    return int((sets.job_sites[j].sum(axis=1) * win).sum())


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

    Parameters
    ----------
    sets
        Compiled sets.

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


def round_lp(cls: Classes, pool: np.ndarray, xo: np.ndarray) -> np.ndarray:
    """Round a fractional class solution to jobs: options by decreasing LP value.

    Each option gets round(x) of its class's jobs (largest x first, never more jobs than the
    class has); what is left is for the completion heuristic.

    Parameters
    ----------
    cls
        The job classes (:func:`job_classes`).
    pool
        ``(O, 3)`` ``(representative, site, start)`` options of the LP's columns.
    xo
        ``(O,)`` LP values of those columns. [jobs]

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

    Parameters
    ----------
    cls
        The job classes (:func:`job_classes`).
    opts
        ``(O, 3)`` ``(representative, site, start)`` options.
    counts
        ``(O,)`` jobs of the option's class placed on each option. [jobs]

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
