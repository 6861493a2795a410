r"""Multipliers and columns carried from one rolling run's column generation to the next.

A rolling run every ``k`` slots plans almost the same problem as the previous one: the same
sites, most of the same jobs, the horizon moved by ``k`` slots. Its Lagrangian multipliers
(prices of the GPU capacity, power and absorption rows of each site-slot) and its column pool
are a near-optimal start for the next run's dual, where a cold solve starts the warm-up's
subgradient ascent from zero (Lagrangian relaxation re-optimisation; Fisher, "The Lagrangian
relaxation method for solving integer programming problems", Management Science 27, 1981,
doi:10.1287/mnsc.27.1.1; the same idea as re-using the dual of a shifted horizon in
receding-horizon control).

The carried state is keyed by what does not change between runs — site names, GPU type
names, absolute slot starts and job ids — never by positions:

* :func:`shift_slots` moves an ``(S, T, ...)`` array onto the new run's slots: the slots
  both runs share keep their value (the old ones shifted by ``k`` positions), the slots
  before the new issue time are dropped and each new slot (at the end) takes the value of
  the *nearest kept slot* in time (the earlier of two at the same distance);
* :func:`carried_multipliers` does that for the three multiplier arrays, matching sites and
  GPU types by name (a site or type the previous run did not have starts at 0);
* :func:`carried_columns` maps the previous pool's ``(job id, site, start)`` columns onto this
  run's class representatives, keeping the options this run has;
* :func:`record` takes them from a finished solve's state for the next run.

Any non-negative multipliers give a valid Lagrangian bound (weak duality), so a carried start
can make the bound weaker only by steering the ascent, never invalid; the warm-up guards
against that by starting from the carried multipliers only when their Lagrangian is above the
cold start's (zero multipliers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from carbonsched.plan.colgen.classes import Classes
from carbonsched.plan.colgen.layout import Layout
from carbonsched.plan.sets import PlanSets

Multipliers = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class CarriedDuals:
    """What one column-generation solve hands to the next rolling run's warm-up.

    Attributes
    ----------
    slot
        ``(T,)`` tz-aware UTC slot starts of the run that produced it.
    slot_minutes
        Its slot length. [min]
    site
        ``(S,)`` site names.
    gpu_type
        ``(G,)`` GPU type names.
    lam_c
        ``(S, T, G)`` GPU capacity multipliers. [kg per GPU-slot]
    lam_p
        ``(S, T)`` power multipliers. [kg per kWh of IT energy]
    lam_a
        ``(S, T)`` absorption multipliers. [kg per kWh]
    job_id, col_site, col_start
        ``(O,)`` the column pool: job id of the class representative, site name and start
        slot (tz-aware UTC) of each column.
    bound
        The Lagrangian bound of these multipliers on the run that produced them. [kg]
    """

    slot: pd.DatetimeIndex
    slot_minutes: int
    site: tuple[str, ...]
    gpu_type: tuple[str, ...]
    lam_c: np.ndarray
    lam_p: np.ndarray
    lam_a: np.ndarray
    job_id: np.ndarray
    col_site: np.ndarray
    col_start: pd.DatetimeIndex
    bound: float


@dataclass(frozen=True)
class PreviousRun:
    """What a column-generation solve starts from when a previous rolling run exists.

    Attributes
    ----------
    positions
        ``(P, 3)`` ``(job, site, start)`` positions of the previous run's plan on this run's
        slots, or None: completed by priced greedy, it is a candidate of the solve.
    label
        What that plan is, for the note.
    carried
        The previous run's multipliers and column pool, or None.
    """

    positions: np.ndarray | None = None
    label: str = ""
    carried: CarriedDuals | None = None

    def state_fields(self) -> dict[str, object]:
        """The :class:`~carbonsched.plan.colgen.state.ColgenState` fields it sets."""
        return {"warm_start": self.positions, "warm_label": self.label,
                "carried": self.carried}


def shift_slots(values: np.ndarray, old_slots: pd.DatetimeIndex,
                new_slots: pd.DatetimeIndex) -> tuple[np.ndarray, int]:
    """Move ``values`` ``(S, T_old, ...)`` from ``old_slots`` onto ``new_slots`` along axis 1.

    A new slot that is also an old one keeps its value; any other new slot (the ones past
    the old horizon's end) takes the value of the nearest old slot that is kept (also a new
    slot), the earlier of two at the same distance. Old slots before the new first slot are
    dropped.

    Parameters
    ----------
    values
        ``(S, T_old, ...)`` array over the old slots.
    old_slots, new_slots
        ``(T_old,)`` and ``(T_new,)`` tz-aware slot starts on the same grid.

    Returns
    -------
    (numpy.ndarray, int)
        ``(S, T_new, ...)`` shifted values, and how many new slots were kept from the old
        run. When no slot is shared the result is all zeros and the count 0 (nothing to
        carry: the caller starts cold).

    Raises
    ------
    ValueError
        ``values``' axis 1 is not as long as ``old_slots``.
    """
    values = np.asarray(values, dtype=float)
    if values.shape[1] != len(old_slots):
        raise ValueError(f"shift_slots: values have {values.shape[1]} slots on axis 1, "
                         f"old_slots {len(old_slots)}")
    old_pos = pd.Index(old_slots).get_indexer(pd.Index(new_slots))
    kept = np.flatnonzero(old_pos >= 0)
    out = np.zeros((values.shape[0], len(new_slots)) + values.shape[2:])
    if not len(kept):
        return out, 0
    # each new slot's source: itself when kept, else the nearest kept new slot
    new_ns = pd.DatetimeIndex(new_slots).asi8
    dist = np.abs(new_ns[:, None] - new_ns[kept][None, :])
    src = np.where(old_pos >= 0, old_pos, old_pos[kept[np.argmin(dist, axis=1)]])
    out[:] = values[:, src]
    return out, int(len(kept))


def carried_multipliers(sets: PlanSets, lay: Layout, carried: CarriedDuals
                        ) -> tuple[Multipliers, int, str]:
    """The previous run's multipliers on this run's sites, GPU types and slots.

    Parameters
    ----------
    sets
        This run's compiled sets.
    lay
        This run's master layout (a site-slot without an absorption row gets no absorption
        multiplier).
    carried
        The previous run's :class:`CarriedDuals`.

    Returns
    -------
    ((lam_c, lam_p, lam_a), int, str)
        Multipliers ``(S, T, G)``, ``(S, T)``, ``(S, T)`` (non-negative; 0 for a site or
        GPU type the previous run did not have), the slots kept, and "" or why nothing was
        carried (another slot length, no shared slot).
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    zero = (np.zeros((n_s, n_t, n_g)), np.zeros((n_s, n_t)), np.zeros((n_s, n_t)))
    if carried.slot_minutes != sets.slot_minutes:
        return zero, 0, (f"the previous run's slots are {carried.slot_minutes} min, this "
                         f"run's {sets.slot_minutes} min")
    c, n_kept = shift_slots(carried.lam_c, carried.slot, sets.slot)
    p, _ = shift_slots(carried.lam_p, carried.slot, sets.slot)
    a, _ = shift_slots(carried.lam_a, carried.slot, sets.slot)
    if not n_kept:
        return zero, 0, "no slot of the previous run is in this run's horizon"
    s_old = pd.Index(carried.site).get_indexer(pd.Index(sets.site))
    g_old = pd.Index(carried.gpu_type).get_indexer(pd.Index(sets.gpu_type))
    s_ok, g_ok = s_old >= 0, g_old >= 0
    lam_c, lam_p, lam_a = zero
    lam_c[np.ix_(s_ok, np.ones(n_t, bool), g_ok)] = c[np.ix_(s_old[s_ok], np.arange(n_t),
                                                             g_old[g_ok])]
    lam_p[s_ok] = p[s_old[s_ok]]
    lam_a[s_ok] = a[s_old[s_ok]]
    lam_a = np.where(lay.absorb_row >= 0, lam_a, 0.0)
    return ((np.maximum(lam_c, 0.0), np.maximum(lam_p, 0.0), np.maximum(lam_a, 0.0)),
            n_kept, "")


def carried_columns(sets: PlanSets, cls: Classes, carried: CarriedDuals) -> np.ndarray:
    """The previous pool's columns that are options of this run, on its class representatives.

    A column ``(job id, site, start)`` of the previous run becomes ``(rep, s, t)`` with
    ``rep`` the representative of the job's class in this run; columns of jobs no longer
    planned, of sites not planned now, of starts before this run's issue time, and any that is
    not a feasible option of this run's sets, are dropped.

    Parameters
    ----------
    sets
        This run's compiled sets (``options``: the feasible ``(job, site, start)``).
    cls
        This run's job classes.
    carried
        The previous run's :class:`CarriedDuals`.

    Returns
    -------
    numpy.ndarray
        ``(O, 3)`` int64 ``(rep, site, start)`` positions, unique.
    """
    empty = np.zeros((0, 3), dtype=np.int64)
    if not len(carried.job_id) or not len(sets.options):
        return empty
    jobs = pd.Index([jb.id for jb in sets.problem.jobs])
    j = jobs.get_indexer(pd.Index(carried.job_id))
    s = pd.Index(sets.site).get_indexer(pd.Index(carried.col_site))
    t = pd.Index(sets.slot).get_indexer(pd.Index(carried.col_start))
    ok = (j >= 0) & (s >= 0) & (t >= 0)
    j, s, t = j[ok], s[ok], t[ok]
    c = cls.of_job[j]
    keep = c >= 0
    rep, s, t = cls.rep[c[keep]], s[keep], t[keep]
    n_s, n_t = sets.pue.shape
    key = (rep * n_s + s) * n_t + t
    o = np.asarray(sets.options, dtype=np.int64)
    have = np.sort((o[:, 0] * n_s + o[:, 1]) * n_t + o[:, 2])
    at = np.minimum(np.searchsorted(have, key), len(have) - 1)
    feasible = have[at] == key
    out = np.stack([rep[feasible], s[feasible], t[feasible]], axis=1).astype(np.int64)
    return np.unique(out, axis=0) if len(out) else empty


def record(sets: PlanSets, lay: Layout, lam: Multipliers, pool: np.ndarray,
           bound: float) -> CarriedDuals:
    """What the next rolling run needs from this solve: multipliers and pool, by name.

    Parameters
    ----------
    sets, lay
        This solve's compiled sets and layout.
    lam
        The multipliers of this solve's best bound ``(lam_c, lam_p, lam_a)``.
    pool
        ``(O, 3)`` ``(rep, site, start)`` columns of the last master (or the seeds).
    bound
        Their Lagrangian bound. [kg]

    Returns
    -------
    CarriedDuals
    """
    pool = np.asarray(pool, dtype=np.int64).reshape(-1, 3)
    ids = np.array([jb.id for jb in sets.problem.jobs], dtype=object)
    return CarriedDuals(
        slot=pd.DatetimeIndex(sets.slot), slot_minutes=int(sets.slot_minutes),
        site=tuple(str(s) for s in sets.site), gpu_type=tuple(str(g) for g in sets.gpu_type),
        lam_c=np.array(lam[0], dtype=float), lam_p=np.array(lam[1], dtype=float),
        lam_a=np.array(lam[2], dtype=float), job_id=ids[pool[:, 0]],
        col_site=np.array([str(sets.site[s]) for s in pool[:, 1]], dtype=object),
        col_start=pd.DatetimeIndex(sets.slot[pool[:, 2]]), bound=float(bound))


__all__ = ["CarriedDuals", "carried_columns", "carried_multipliers", "record", "shift_slots"]
