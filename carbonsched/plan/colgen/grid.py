"""The slot grid in column generation: per-slot prices and inference over every slot of its hour.

On a grid of ``L`` = 60, 30 or 15 minutes (:attr:`~carbonsched.plan.sets.PlanSets.slot_minutes`)
the direct MILP (:mod:`carbonsched.plan.model`) charges a kW run through a whole slot
``h = L / 60`` hours of energy, credits absorbed surplus ``a`` [kW] over a slot with
``a h`` kWh, and holds an inference demand's GPUs in every slot of its hour
(:meth:`~carbonsched.plan.sets.PlanSets.inf_slots`: one allocation, ``60 / L`` slots, each
in the capacity, power and absorption rows of its slot). Column generation prices, packs and
bounds with the same terms through these helpers, so its master LP is the MILP's LP
relaxation on any grid and its bounds stay valid. On the hourly grid ``h`` = 1 and a demand
covers one slot: every helper returns exactly the hourly numbers (a product with 1.0).
"""

from __future__ import annotations

import numpy as np

from carbonsched.plan.sets import PlanSets


def kw_slot_cost(sets: PlanSets) -> np.ndarray:
    """Grid emissions of one kW of IT power run through a whole slot, ``(S, T)``. [kg/kW]

    PUE × CI / 1000 × ``h`` (:attr:`~carbonsched.plan.sets.PlanSets.slot_hours`): the
    per-slot term of :func:`~carbonsched.plan.sets.option_costs` (a partial last slot is
    charged its share of this).
    """
    return sets.cost_per_kwh * sets.slot_hours


def kw_slot_price(sets: PlanSets, lam_p: np.ndarray, lam_a: np.ndarray) -> np.ndarray:
    """Price of one kW of IT power through a whole slot at multipliers, ``(S, T)``. [kg/kW]

    :func:`kw_slot_cost` plus the power row's multiplier, less PUE × the absorption row's:
    the per-kW term of an option's reduced cost in the Lagrangian
    (:func:`~carbonsched.plan.colgen.lagrangian_dual.lagrangian`).

    Parameters
    ----------
    lam_p, lam_a
        Power ``(S, T)`` [kg per kWh of IT energy] and absorption ``(S, T)`` [kg per kWh]
        multipliers.
    """
    return kw_slot_cost(sets) + lam_p - sets.pue * lam_a


def absorb_slot_credit(sets: PlanSets) -> np.ndarray:
    """Emissions saved by one kW of surplus absorbed through a whole slot, ``(S, T)``. [kg/kW]

    CI / 1000 × ``h``: the absorption variable's cost is minus this (as
    :func:`~carbonsched.plan.model.define_objective`'s).
    """
    return sets.ci_g_per_kwh / 1000.0 * sets.slot_hours


def inference_cells(sets: PlanSets, dem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (demand, slot) an inference allocation occupies.

    Parameters
    ----------
    sets
        Compiled sets.
    dem
        ``(D',)`` demand positions.

    Returns
    -------
    k, t
        ``(D' × n,)`` positions into ``dem`` and the slots they cover, ``n`` =
        :attr:`~carbonsched.plan.sets.PlanSets.slots_per_hour`, demand by demand.
    """
    n = sets.slots_per_hour
    k = np.repeat(np.arange(len(dem)), n)
    t = np.repeat(sets.inf_hour[dem], n) + np.tile(np.arange(n), len(dem))
    return k, t


def inference_site_cost(sets: PlanSets, dem: np.ndarray, per_kw: np.ndarray,
                        per_gpu: np.ndarray | None = None) -> np.ndarray:
    """Cost of one GPU of each demand at each site, summed over the slots it covers, ``(D', S)``.

    Parameters
    ----------
    sets
        Compiled sets.
    dem
        ``(D',)`` demand positions.
    per_kw
        ``(S, T)`` price of one kW through a slot (carbon and multipliers). [kg/kW]
    per_gpu
        ``(S, T, G)`` price of one GPU through a slot (capacity multipliers), or None. [kg]

    Returns
    -------
    numpy.ndarray
        ``(D', S)`` Σ over the demand's slots of kW per GPU × ``per_kw`` + ``per_gpu`` of its
        type. [kg per GPU] (Sites it may not use are not masked here.)
    """
    n_s = per_kw.shape[0]
    out = np.zeros((len(dem), n_s))
    kw_d, g_d = sets.inf_kw_per_gpu[dem], sets.inf_gtype[dem]
    t0 = sets.inf_hour[dem]
    for i in range(sets.slots_per_hour):
        t = t0 + i
        out += kw_d[:, None] * per_kw[:, t].T
        if per_gpu is not None:
            out += per_gpu[:, t, g_d].T
    return out


def inference_usage(sets: PlanSets, dem: np.ndarray, site: np.ndarray, gpus: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """GPUs ``(S, T, G)`` and IT kW ``(S, T)`` of ``gpus`` of each demand at ``site``.

    Parameters
    ----------
    sets
        Compiled sets.
    dem, site, gpus
        ``(N,)`` demand positions, their sites and GPU counts (repeats add up).

    Returns
    -------
    gpus, kw
        Use in every slot of each demand's hour. [GPUs, kW]
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    k, t = inference_cells(sets, dem)
    s = np.asarray(site)[k]
    n = np.asarray(gpus, dtype=float)[k]
    cell = s * n_t + t
    g = np.bincount(cell * n_g + sets.inf_gtype[dem][k], weights=n,
                    minlength=n_s * n_t * n_g).reshape(n_s, n_t, n_g)
    kw = np.bincount(cell, weights=n * sets.inf_kw_per_gpu[dem][k],
                     minlength=n_s * n_t).reshape(n_s, n_t)
    return g, kw
