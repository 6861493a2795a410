"""Pricing: every option's reduced cost under the master's duals, in numpy."""

from __future__ import annotations

import numpy as np

from carbonsched.plan.colgen.grid import kw_slot_cost
from carbonsched.plan.colgen.layout import WINDOW_ROWS, Layout, allowed_starts
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.sets import PlanSets


def price(sets: PlanSets, lay: Layout, duals: np.ndarray, reps: np.ndarray, k: int = 1,
          chunk: int = ColgenOptions.price_chunk
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` best options of each class under the duals: reduced cost, site, start.

    Parameters
    ----------
    duals
        Row duals of the master, shape ``(rows,)`` (HiGHS sign convention: reduced cost =
        cost − Aᵀ·duals).
    reps
        Representative job positions of the classes to price.
    k
        Options kept per class.
    chunk
        At most this many classes priced per numpy block (:attr:`ColgenOptions.price_chunk`);
        a class group is priced in windows of at most
        :data:`~carbonsched.plan.colgen.layout.WINDOW_ROWS` classes with near starts (ordered
        by first and last start), each over only the starts its classes allow.

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
    per_slot = kw_slot_cost(sets)                    # kg per kW through a slot, any grid
    per_kw = per_slot - nu + sets.pue * rho                              # (S, T)
    per_kwh = per_slot + sets.pue * rho    # the energy part: last slot × its fraction
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
            # windows of classes with near starts, each priced over the starts it allows
            sel_all = sel_all[np.lexsort((sets.job_last[reps[sel_all]],
                                          sets.job_first[reps[sel_all]]))]
            win = max(1, min(chunk, WINDOW_ROWS))
            for c0 in range(0, len(sel_all), win):
                sel = sel_all[c0: c0 + win]
                j = reps[sel]
                a = int(np.clip(sets.job_first[j].min(), 0, n_t - 1))
                b = int(np.clip(sets.job_last[j].max() + 1, a + 1, n_t))
                unused = (1.0 - sets.job_last_frac[j])[:, None, None]
                rc = (sets.job_kw[j][:, None, None] * (wk[None, :, a:b] - unused * el[None, :, a:b])
                      - sets.job_gpus[j][:, None, None] * wm[None, :, a:b, g]
                      - pi[sel][:, None, None])                        # (n, S, b - a)
                rc = np.where(allowed_starts(sets, j)[:, :, a:b], rc,
                              np.inf).reshape(len(sel), -1)
                kk = min(k, rc.shape[1])
                if kk == 1:
                    best = np.argmin(rc, axis=1)[:, None]
                else:
                    part = np.argpartition(rc, kk - 1, axis=1)[:, :kk]
                    best = np.take_along_axis(
                        part, np.argsort(np.take_along_axis(rc, part, 1), axis=1), 1)
                rows = np.arange(len(sel))[:, None]
                out_rc[sel, :kk] = rc[rows, best]
                out_s[sel, :kk] = best // (b - a)
                out_t[sel, :kk] = a + best % (b - a)
    return out_rc, out_s, out_t


def stack_options(reps: np.ndarray, rc: np.ndarray, ss: np.ndarray, tt: np.ndarray,
                  mask: np.ndarray) -> np.ndarray:
    """``(O, 3)`` ``(representative, site, start)`` of :func:`price`'s output where ``mask``.

    Parameters
    ----------
    reps
        ``(C,)`` representative jobs of the priced classes.
    rc, ss, tt
        ``(C, k)`` reduced costs [kg], sites and starts from :func:`price`.
    mask
        ``(C, k)`` entries to keep.

    Returns
    -------
    numpy.ndarray
        ``(O, 3)`` int64 options.
    """
    jj = np.repeat(reps[:, None], rc.shape[1], axis=1)
    return np.stack([jj[mask], ss[mask], tt[mask]], axis=1).astype(np.int64)


def candidate_options(sets: PlanSets, lay: Layout, duals: np.ndarray, reps: np.ndarray,
                      pool: np.ndarray, k: int, chunk: int = ColgenOptions.price_chunk
                      ) -> np.ndarray:
    """The generated options of the classes of ``reps`` plus each one's ``k`` best-priced.

    ``chunk``: classes priced per numpy block (:attr:`ColgenOptions.price_chunk`).

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    duals
        ``(R,)`` row duals (HiGHS signs) in the covering form's layout.
    reps
        Representative jobs of the classes.
    pool
        ``(O, 3)`` generated options.
    k
        Best-priced options per class.
    chunk
        Classes priced per numpy block.

    Returns
    -------
    numpy.ndarray
        ``(O', 3)`` unique options.
    """
    in_set = np.zeros(len(sets.job_gpus), dtype=bool)
    in_set[reps] = True
    out = [pool[in_set[pool[:, 0]]]]
    if len(reps):
        rc, ss, tt = price(sets, lay, duals, reps, k=k, chunk=chunk)
        out.append(stack_options(reps, rc, ss, tt, np.isfinite(rc)))
    return np.unique(np.concatenate(out), axis=0)
