"""The master's rows and columns: row numbering, bounds, option and fixed column blocks."""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np

from carbonsched.plan.colgen.classes import Classes
from carbonsched.plan.colgen.grid import absorb_slot_credit, inference_site_cost, kw_slot_cost
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.model import ABSORB_EPS_KW, cover_index
from carbonsched.plan.sets import PlanSets, option_costs

INF = highspy.kHighsInf


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


def make_layout(sets: PlanSets, cls: Classes, flow: bool = ColgenOptions.flow) -> Layout:
    r"""Number the master's rows.

    In the flow form (``flow``, :attr:`ColgenOptions.flow`) the GPUs and IT power running in
    each site-hour are variables :math:`R_{stg}`, :math:`K_{st}` with balance rows
    :math:`R_{stg} = R_{s,t-1,g} + \sum_{o \text{ starts at } t} n_o -
    \sum_{o \text{ ended at } t} n_o` (the same for kW), and the capacity, power and
    absorption rows hold :math:`R`, :math:`K` and inference only. The LP is the same (a
    linear substitution), but an option column has four entries besides its assignment row
    instead of three per covered hour, which measured several times faster in the master's
    interior-point solves (the classical time-indexed "on/off" reformulation; Pochet &
    Wolsey, *Production Planning by Mixed Integer Programming*, Springer 2006, §4).

    Parameters
    ----------
    sets
        Compiled sets.
    cls
        The job classes.
    flow
        Number the flow form's balance rows too.

    Returns
    -------
    Layout
        Row positions: assignment, inference, capacity, power, absorption (and
        balance rows in the flow form).
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

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    fixed_gpus
        ``(S, T, G)`` GPUs of work fixed outside the model, or None. [GPUs]
    fixed_kw
        ``(S, T)`` IT power of that work, whole gangs, or None. [kW]
    fixed_energy_kw
        ``(S, T)`` its power weighted by the share of each slot it runs, or
        None (then ``fixed_kw``). [kW]

    Returns
    -------
    lo, hi
        ``(R,)`` lower and upper row bounds.
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
    """CSC block of option columns ``(rep, site, start)``: costs, starts, rows, values.

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    opts
        ``(O, 3)`` ``(representative, site, start)`` options.

    Returns
    -------
    costs, starts, rows, values
        ``(O,)`` costs [kg], ``(O,)`` column starts, and the row indices and
        coefficients of the block, in HiGHS's column-wise (CSC) form.
    """
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

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    raw
        ``(R,)`` master row duals as HiGHS returns them.

    Returns
    -------
    numpy.ndarray
        ``(R,)`` duals whose assignment, capacity, power and absorption entries price
        an option as in the covering form.
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
    # inference y_ds: its serve row, then the capacity, power and absorption rows of every
    # slot of the demand's hour (one slot on the hourly grid), as the MILP's
    dd, ss = np.nonzero(sets.inf_sites[lay.demands])
    dd = lay.demands[dd]
    g = sets.inf_gtype[dd]
    kw = sets.inf_kw_per_gpu[dd]
    n_h = sets.slots_per_hour
    t = sets.inf_hour[dd][:, None] + np.arange(n_h)[None, :]               # (Y, n_h)
    s2 = np.broadcast_to(ss[:, None], t.shape)
    ab = lay.absorb_row[s2, t]
    costs.append(inference_site_cost(sets, dd, kw_slot_cost(sets))[np.arange(len(dd)), ss])
    lower.append(np.zeros(len(dd)))
    upper.append(sets.inf_gpus[dd].astype(float))
    r_y = np.concatenate([lay.serve_row[dd][:, None], lay.cap_base + (s2 * n_t + t) * n_g
                          + g[:, None], lay.pow_base + s2 * n_t + t, ab], axis=1)
    v_y = np.concatenate([np.ones((len(dd), 1)), np.ones(t.shape),
                          np.broadcast_to(kw[:, None], t.shape),
                          -kw[:, None] * sets.pue[s2, t]], axis=1)
    keep = np.concatenate([np.ones((len(dd), 1 + 2 * n_h), dtype=bool), ab >= 0], axis=1)
    col_nnz.append(keep.sum(axis=1))
    rows.append(r_y[keep])
    vals.append(v_y[keep])
    kinds.append(np.ones(len(dd), dtype=np.int64))
    # absorption a_st: -CI x h / 1000 per kW absorbed through a slot
    sa, ta = np.nonzero(lay.absorb_row >= 0)
    costs.append(-absorb_slot_credit(sets)[sa, ta])
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


WINDOW_ROWS = 64
"""Classes per window when a class group is priced (:func:`carbonsched.plan.colgen.pricing.price`,
the smoothed dual's evaluation): a group's classes, ordered by their first and last allowed
start, are cut into windows of this many, each priced only over the starts between its
first and last (a class has no option outside its window, so nothing is priced differently).
On the 10k × 16 × 72 h rolling step (96 slots with the tail, 6,350 classes in 178 groups) 64
prices 2.6 times fewer (class, site, start) cells than the whole grid (128: 2.2, 512: 1.6);
on 10k × 16 × 48 h 1.6 times fewer. [classes]"""


def allowed_starts(sets: PlanSets, jobs: np.ndarray) -> np.ndarray:
    """``(n, S, T)``: the job may start at the site and slot (allowed site, inside its window).

    The horizon's end is not checked here (:func:`price` prices a start that overruns it at
    +inf).

    Parameters
    ----------
    sets
        Compiled sets.
    jobs
        Job positions, ``(n,)``.

    Returns
    -------
    numpy.ndarray
        Boolean ``(n, S, T)``.
    """
    starts = np.arange(sets.pue.shape[1])
    return (sets.job_sites[jobs][:, :, None]
            & (starts[None, None, :] >= sets.job_first[jobs][:, None, None])
            & (starts[None, None, :] <= sets.job_last[jobs][:, None, None]))


def usage(sets: PlanSets, opts: np.ndarray, counts: np.ndarray, energy: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """GPUs ``(S, T, G)`` and IT kW ``(S, T)`` used by ``counts`` jobs on each option.

    With ``energy`` the kW are weighted by the share of each slot the job runs (its partial
    last slot), as the absorption rows count them.

    Parameters
    ----------
    sets
        Compiled sets.
    opts
        ``(O, 3)`` ``(job, site, start)`` options.
    counts
        ``(O,)`` jobs on each option.
    energy
        Weight the kW by the share of each slot run.

    Returns
    -------
    gpus, kw
        ``(S, T, G)`` GPUs and ``(S, T)`` IT power. [GPUs, kW]
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
