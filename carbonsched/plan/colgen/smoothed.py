r"""The Lagrangian dual of the planning LP, smoothed and climbed by L-BFGS-B.

The Lagrangian of the capacity, power and absorption rows (:func:`carbonsched.plan.colgen.
lagrangian_dual.lagrangian`) is a valid lower bound for any multipliers :math:`\lambda \ge 0`, and
its maximum is the LP's value. It is piecewise linear: every class jumps between options, and the
subgradient ascent of the warm-up (Polyak's steps) creeps towards the maximum — on 10k × 16 × 48 at
load 0.3, seed 0, 150 steps reach 1,940.1 kg of an LP value of 2,080.6 (6.8 % short).

Here each class's minimum over its options (and staying unplaced) is replaced by the
soft-minimum at temperature :math:`\mu`,

.. math::

   \operatorname{softmin}_\mu(\bar c) = -\mu \log \sum_o e^{-\bar c_o/\mu},
   \qquad \min_o \bar c_o - \mu \log |O| \le \operatorname{softmin}_\mu(\bar c)
   \le \min_o \bar c_o,

(the same for each inference demand over its sites and each absorption variable over its two
bounds), which makes the dual concave and smooth with gradient "expected usage under the soft-max
weights minus capacity" — the entropy-regularised LP's dual (Nesterov, "Smooth minimization of
non-smooth functions", Math. Programming 103, 2005, doi:10.1007/s10107-004-0552-5). L-BFGS-B (Byrd,
Lu, Nocedal & Zhu, SIAM J. Sci. Comput. 16, 1995, doi:10.1137/0916069; SciPy's implementation)
climbs it with the bounds :math:`\lambda \ge 0`, and :math:`\mu` is lowered when it converges or its
value stalls (:attr:`ColgenOptions.smooth_stall_evals`, :attr:`ColgenOptions.smooth_stall_rel`).
Every evaluation also computes the exact Lagrangian at the same multipliers — the bound reported is
the best exact one, valid whatever the smoothing did. Measured on the instance above from the
warm-up's multipliers: 2,077.9 kg (0.13 % short) in 7 s; at one temperature it plateaus near 2,075
(docs/benchmarks/planner-log.md#planner-3-15).

The usage of all the options of a class group (same duration and GPU type) is the soft-max
weights summed over the classes, then spread over the covered hours by a box filter along
:math:`t` (cumulative sums); the reduced costs of a group and its expected use are one
matrix product each. A group's classes are priced in windows of
:data:`~carbonsched.plan.colgen.layout.WINDOW_ROWS`, each
over only the starts its classes allow (:func:`_windows`). One evaluation took 29 ms at 10k jobs
over 48 h (4,632 classes, 124 groups) on the whole grid, 43 ms with the products written out
elementwise.

The reduced costs, each class's minimum and so the exact Lagrangian (the bound) are computed in
double precision; the soft-max weights :math:`e^{-(\bar c_o - \min_o \bar c_o)/\mu} \in [0, 1]`
and the expected use they sum to in double too, or in single precision with
:attr:`ColgenOptions.smooth_weights` ``= "single"``, whose ``exp`` and matrix product NumPy runs
several times faster per element (AVX-512): one evaluation at the multipliers a 3 s ascent
reaches on 10k × 16 × 48 and × 72 took 0.71-0.75 of the double one's time
(``bench/smoothed_eval.py``, BENCHMARKS.md section 3). In single precision each weight errs by
about its exponent times float32's :math:`1.2 \cdot 10^{-7}`; measured there at the ascent's
first, a middle and its last temperature, the smoothed value moved by at most
:math:`2.6 \cdot 10^{-10}` (relative) and the gradient by at most :math:`1.5 \cdot 10^{-4}` of the
gross use it sums (:meth:`_Evaluator.gross_use`; not of the gradient, which tends to 0 at the
optimum). They steer the climb, which then takes another path; the bound is exact either way.
A temperature whose reciprocal single precision cannot hold (below about
:math:`3 \cdot 10^{-39}` kg) is refused; the temperatures the ascent uses stay above
:math:`10^{-17}` kg (:func:`~carbonsched.plan.colgen.lagrangian_dual.job_cost_scale`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from carbonsched.plan.colgen.grid import absorb_slot_credit, kw_slot_cost
from carbonsched.plan.colgen.lagrangian_dual import duals_from, inference_prices
from carbonsched.plan.colgen.layout import WINDOW_ROWS, Layout, allowed_starts
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.sets import PlanSets


@dataclass
class SmoothedDual:
    """Result of :func:`smoothed_ascent`.

    Attributes
    ----------
    bound
        Best exact Lagrangian value seen (a valid lower bound on the LP and the MILP). [kg]
    duals
        Row duals (HiGHS signs, as the master's) of the multipliers that gave ``bound``,
        shape ``(rows,)``.
    pool
        ``(O, 3)`` ``(representative, site, start)`` options the exact Lagrangian chose.
    evaluations
        Function and gradient evaluations.
    temperatures
        The temperatures used, in order. [kg]
    earlier
        Row duals of earlier best exact iterates, newest first, each ``(rows,)``: the best
        iterate every :attr:`ColgenOptions.smooth_draw_every` evaluations, at most
        :attr:`ColgenOptions.smooth_draws`, none equal to ``duals``'.
    marks
        Row duals of the best exact iterate at evaluations ``e, 2e, 4e, 8e, ...``
        (``e`` = :attr:`ColgenOptions.smooth_draw_every`), newest first, each ``(rows,)``,
        at most :attr:`ColgenOptions.smooth_draws`, none equal to ``duals``': where an
        ascent stopped by a shorter limit would have ended, within a factor of two in
        evaluations (:attr:`ColgenOptions.smooth_marks_alone`).
    seconds
        Wall time. [s]
    """

    bound: float
    duals: np.ndarray
    pool: np.ndarray
    evaluations: int
    temperatures: list
    seconds: float
    earlier: list = field(default_factory=list)
    marks: list = field(default_factory=list)


def _windows(sel: np.ndarray, j: np.ndarray, ok: np.ndarray, coef: np.ndarray, use: np.ndarray
             ) -> list[tuple]:
    """One class group cut into windows of :data:`WINDOW_ROWS` classes over their starts.

    Parameters
    ----------
    sel, j
        The group's positions among the representatives and their job indices, ``(n,)``.
    ok
        Allowed starts, ``(n, S, T)`` bool.
    coef, use
        Per class, ``(n, 3)``: the reduced-cost coefficients and the use weights.

    Returns
    -------
    list of tuple
        ``(sel, j, a, b, off, coef, use)`` per window: its classes, the starts ``a..b-1``
        every one of its options lies in, and ``off`` ``(n_w, S * (b - a))`` (0 where a start
        is allowed, ``inf`` where not).
    """
    n, n_s, n_t = ok.shape
    by_t = ok.any(axis=1)                                           # (n, T)
    has = by_t.any(axis=1)
    first = np.where(has, by_t.argmax(axis=1), 0)
    last = np.where(has, n_t - 1 - by_t[:, ::-1].argmax(axis=1), 0)
    order = np.lexsort((last, first))
    out = []
    for k in range(0, n, WINDOW_ROWS):
        o = order[k:k + WINDOW_ROWS]
        a, b = int(first[o].min()), int(last[o].max()) + 1
        off = np.where(ok[o][:, :, a:b].reshape(len(o), -1), 0.0, np.inf)
        out.append((sel[o], j[o], a, b, off, coef[o], use[o]))
    return out


WEIGHT_DTYPES = {"double": np.float64, "single": np.float32}
"""NumPy type of the soft-max weights for each :attr:`ColgenOptions.smooth_weights`."""


class _Evaluator:
    """Smoothed and exact Lagrangian with the smoothed one's gradient, in one pass.

    Parameters
    ----------
    sets, lay
        Compiled sets and the master's row layout.
    weight_dtype
        NumPy type of the options' soft-max weights and the use they sum to (module
        docstring; :data:`WEIGHT_DTYPES` of :attr:`ColgenOptions.smooth_weights`).
    """

    def __init__(self, sets: PlanSets, lay: Layout, weight_dtype: type = np.float64):
        self.sets, self.lay = sets, lay
        self.weight_dtype = weight_dtype
        n_s, n_t = sets.pue.shape
        n_g = len(sets.gpu_type)
        self.shape = (n_s, n_t, n_g)
        self.n_c, self.n_p = n_s * n_t * n_g, n_s * n_t
        self.n = self.n_c + 2 * self.n_p
        reps = lay.reps
        self.mult = lay.mult.astype(float)
        self.pen = sets.unplaced_cost[reps].astype(float)
        self.has_abs = lay.absorb_row >= 0
        self.surplus = np.where(self.has_abs, sets.surplus_kw, 0.0)
        self.ci_kg = absorb_slot_credit(sets)    # kg per kW absorbed through a slot
        dur, gt = sets.job_dur[reps], sets.job_gtype[reps]
        self.groups = []
        for d in np.unique(dur):
            for g in np.unique(gt[dur == d]):
                sel = np.flatnonzero((dur == d) & (gt == g))
                j = reps[sel]
                ok = allowed_starts(sets, j)
                ok[:, :, n_t - d + 1:] = False          # would overrun the horizon
                kw, gp = sets.job_kw[j], sets.job_gpus[j].astype(float)
                kw_unused = kw * (1.0 - sets.job_last_frac[j])
                # reduced costs = coef @ (whole-slot energy, last slot's unused part, GPU-hours
                # price) by start; use = (n/Z · use) @ weights: one matrix product each
                coef = np.stack([kw, -kw_unused, gp], axis=1)            # (n, 3)
                use = np.stack([gp, kw, kw_unused], axis=1)              # (n, 3)
                self.groups.append((int(d), int(g), _windows(sel, j, ok, coef, use)))

    def gross_use(self, grad: np.ndarray) -> np.ndarray:
        """The use each gradient entry sums before capacity is taken off.

        The scale of the single-precision error of ``grad`` (module docstring).

        Parameters
        ----------
        grad
            A gradient of the smoothed value, shape of ``x`` (``__call__``'s third output).

        Returns
        -------
        numpy.ndarray
            Shape of ``x``: GPUs and IT kW running for the capacity and power multipliers; for
            an absorption multiplier, PUE x the IT kW running plus the surplus, since its
            gradient is their difference and may cancel to 0. At ``grad = 0``: the capacities
            themselves. [GPUs, kW]
        """
        n_s, n_t, n_g = self.shape
        g_c, g_p, _ = self.split(grad)
        run_c = np.abs(g_c + self.sets.gpu_cap.astype(float))
        run_kw = np.abs(g_p + self.sets.power_rhs_kw.astype(float))
        absorb = np.where(self.has_abs, self.sets.pue * run_kw + self.surplus, 0.0)
        return np.concatenate([np.broadcast_to(run_c, (n_s, n_t, n_g)).ravel(),
                               np.broadcast_to(run_kw, (n_s, n_t)).ravel(), absorb.ravel()])

    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n_s, n_t, n_g = self.shape
        return (x[: self.n_c].reshape(n_s, n_t, n_g),
                x[self.n_c: self.n_c + self.n_p].reshape(n_s, n_t),
                x[self.n_c + self.n_p:].reshape(n_s, n_t))

    def join(self, lam_c, lam_p, lam_a) -> np.ndarray:
        return np.concatenate([np.ravel(lam_c), np.ravel(lam_p),
                               np.where(self.has_abs, lam_a, 0.0).ravel()])

    def __call__(self, x: np.ndarray, mu: float, want_opts: bool = False):
        """Evaluate at multipliers ``x`` and temperature ``mu``.

        Parameters
        ----------
        x
            ``(lam_c (S*T*G), lam_p (S*T), lam_a (S*T))`` concatenated, each ``>= 0``
            [kg per GPU-hour, kg per kWh of IT energy, kg per kWh absorbed].
        mu
            Temperature. [kg]
        want_opts
            Also return the options the exact Lagrangian chooses.

        Returns
        -------
        tuple
            Smoothed value [kg], exact Lagrangian [kg], gradient of the smoothed value
            (shape of ``x``) and, with ``want_opts``, the ``(O, 3)`` chosen options.
        """
        with np.errstate(over="ignore"):        # a cast past the type's range: inf, refused
            scale = self.weight_dtype(-1.0 / mu) if mu > 0 else self.weight_dtype(np.nan)
        if not (np.isfinite(scale) and scale != 0):
            # -1/mu must be a finite, non-zero weight_dtype, or 0 x inf makes a weight NaN
            raise ValueError(f"smoothed dual: temperature {mu!r} kg is outside what "
                             f"{np.dtype(self.weight_dtype).name} weights resolve (1/mu must be "
                             f"finite and non-zero in it); raise ColgenOptions.smooth_mu_min_rel "
                             f"or use smooth_weights='double'")
        # far-off options' weights underflow to 0 (their exponent to -inf): as intended
        with np.errstate(over="ignore", under="ignore"):
            return self._eval(x, mu, want_opts)

    def _eval(self, x: np.ndarray, mu: float, want_opts: bool):
        sets, lay = self.sets, self.lay
        n_s, n_t, n_g = self.shape
        lam_c, lam_p, lam_a = self.split(x)
        lam_a = np.where(self.has_abs, lam_a, 0.0)     # no absorption row: no multiplier
        per_slot = kw_slot_cost(sets)                      # kg per kW through a slot
        per_kw = per_slot + lam_p - sets.pue * lam_a
        per_kwh = per_slot - sets.pue * lam_a     # the partial last slot's energy
        cum_kw = np.concatenate([np.zeros((n_s, 1)), np.cumsum(per_kw, axis=1)], axis=1)
        cum_c = np.concatenate([np.zeros((n_s, 1, n_g)), np.cumsum(lam_c, axis=1)], axis=1)
        g_c = np.zeros((n_s, n_t, n_g))
        g_p = np.zeros((n_s, n_t))
        g_a = np.zeros((n_s, n_t))
        v_s = v_e = 0.0
        opts = []
        for d, g, chunks in self.groups:
            m_t = n_t - d + 1
            prices = np.zeros((3, n_s, n_t))     # whole-slot kWh, last slot, GPU-hours
            prices[0, :, :m_t] = cum_kw[:, d:] - cum_kw[:, :m_t]
            prices[1, :, :m_t] = per_kwh[:, d - 1:]
            prices[2, :, :m_t] = cum_c[:, d:, g] - cum_c[:, :m_t, g]
            w_all = np.zeros((3, n_s, n_t))      # expected use by start
            for sel, j, a, b, off, coef, use in chunks:
                rc = coef @ prices[:, :, a:b].reshape(3, -1)
                rc += off                               # (n, S*(b-a)), inf: infeasible
                best = rc.min(axis=1)
                pen = self.pen[sel]
                low = np.minimum(best, pen)
                n = self.mult[sel]
                v_e += float((n * low).sum())
                if want_opts:
                    place = best < pen
                    at = np.argmin(rc[place], axis=1)
                    opts.append(np.stack([j[place], at // (b - a), a + at % (b - a)], axis=1))
                rc -= low[:, None]                              # >= 0 (inf: infeasible)
                # the weights exp(-(rc - low) / mu) in [0, 1], in single precision if asked
                # (module docstring): the bound above stays double
                z = (np.multiply(rc, -1.0 / mu, out=rc) if self.weight_dtype is np.float64
                     else np.multiply(rc, -1.0 / mu, dtype=self.weight_dtype))  # double: in place
                np.exp(z, out=z)
                zz = z.sum(axis=1).astype(float, copy=False) + np.exp(-(pen - low) / mu)
                v_s += float((n * (low - mu * np.log(zz))).sum())
                wu = (use * (n / zz)[:, None]).T.astype(self.weight_dtype, copy=False)
                w_all[:, :, a:b] += (wu @ z).reshape(3, n_s, b - a)
            w_g, w_k, w_e = w_all[0], w_all[1], w_all[2]
            cw = np.concatenate([np.zeros((n_s, 1, 2)), np.cumsum(
                np.stack([w_g, w_k], axis=2), axis=1)], axis=1)
            tau = np.arange(n_t)
            run = cw[:, tau + 1] - cw[:, np.maximum(tau - d + 1, 0)]   # (S, T, 2) covering
            g_c[:, :, g] += run[:, :, 0]
            g_p += run[:, :, 1]
            last = np.zeros((n_s, n_t))
            last[:, d - 1:] = w_e[:, :m_t]
            g_a -= sets.pue * (run[:, :, 1] - last)
        dem = lay.demands
        if len(dem):
            g_d = sets.inf_gtype[dem]
            kw_d = sets.inf_kw_per_gpu[dem]
            per_gpu = inference_prices(sets, lay, lam_c, lam_p, lam_a)     # (D', S)
            n_d = sets.inf_gpus[dem].astype(float)
            low = per_gpu.min(axis=1)
            v_e += float((n_d * low).sum())
            z = np.exp(-(per_gpu - low[:, None]) / mu)
            zz = z.sum(axis=1)
            v_s += float((n_d * (low - mu * np.log(zz))).sum())
            w = z * (n_d / zz)[:, None]                                     # (D', S)
            s_idx = np.broadcast_to(np.arange(n_s)[None, :], w.shape)
            for i in range(sets.slots_per_hour):    # every slot of the demand's hour
                cell = s_idx * n_t + (sets.inf_hour[dem] + i)[:, None]
                g_c += np.bincount((cell * n_g + g_d[:, None]).ravel(), weights=w.ravel(),
                                   minlength=n_s * n_t * n_g).reshape(n_s, n_t, n_g)
                g_p += np.bincount(cell.ravel(), weights=(w * kw_d[:, None]).ravel(),
                                   minlength=n_s * n_t).reshape(n_s, n_t)
                g_a -= np.bincount(cell.ravel(), weights=(w * kw_d[:, None]).ravel(),
                                   minlength=n_s * n_t).reshape(n_s, n_t) * sets.pue
        # absorption a in [0, surplus] at cost (lambda_a - CI) a: a soft choice of the bounds
        q = self.surplus * (lam_a - self.ci_kg)
        low = np.minimum(q, 0.0)
        z1 = np.exp(-(q - low) / mu)
        zz = z1 + np.exp(low / mu)
        v_e += float(low[self.has_abs].sum())
        v_s += float((low - mu * np.log(zz))[self.has_abs].sum())
        g_a += np.where(self.has_abs, self.surplus * z1 / zz, 0.0)
        cap = sets.gpu_cap.astype(float)
        pcap = sets.power_rhs_kw.astype(float)
        lin = float((lam_c * cap).sum() + (lam_p * pcap).sum())
        grad = self.join(g_c - cap, g_p - pcap, g_a)
        out = (v_s - lin, v_e - lin, grad)
        if want_opts:
            return out + (np.concatenate(opts) if opts else np.zeros((0, 3), np.int64),)
        return out


def smoothed_ascent(sets: PlanSets, lay: Layout, seconds: float, job_cost_kg: float,
                    start: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                    options: ColgenOptions | None = None) -> SmoothedDual:
    """Maximise the smoothed Lagrangian dual for ``seconds`` (module docstring).

    Parameters
    ----------
    sets, lay
        Compiled sets and the master's row layout.
    seconds
        Time budget; the ascent stops at the first evaluation past it. [s]
    job_cost_kg
        Mean cost of a placed job (greedy objective / placeable jobs): the temperature
        scale. [kg]
    start
        Multipliers ``(lam_c (S, T, G), lam_p (S, T), lam_a (S, T))`` to start from (the
        warm-up's), projected to ``>= 0``; default zero.
    options
        The temperatures, stall test, L-BFGS-B memory and pool sampling
        (``ColgenOptions.smooth_*``; defaults when None).

    Returns
    -------
    SmoothedDual
        The best exact Lagrangian bound seen and its duals (HiGHS row-dual signs, as the
        master's), the options it chose, the evaluations and temperatures used.

    Raises
    ------
    ValueError
        If ``job_cost_kg`` is not positive and finite (no temperature scale).
    """
    if not (np.isfinite(job_cost_kg) and job_cost_kg > 0):
        raise ValueError(f"smoothed_ascent: job_cost_kg must be positive, got {job_cost_kg}")
    opt = ColgenOptions() if options is None else options
    t0 = time.perf_counter()
    t_end = t0 + seconds
    ev = _Evaluator(sets, lay, WEIGHT_DTYPES[opt.smooth_weights])
    x = np.zeros(ev.n) if start is None else np.maximum(0.0, ev.join(*start))
    best = {"value": -np.inf, "x": x.copy()}
    kept: list[np.ndarray] = []
    count = [0]
    drawn: list[tuple[float, np.ndarray]] = []   # (value, best x) snapshots, rising
    marked: list[tuple[float, np.ndarray]] = []  # the same at evaluations e, 2e, 4e, ...
    mus: list[float] = []
    mu = opt.smooth_mu_start_rel * job_cost_kg

    class _Stop(Exception):
        pass

    class _OutOfTime(_Stop):
        pass

    class _Stalled(_Stop):
        pass

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        if time.perf_counter() > t_end:
            raise _OutOfTime
        count[0] += 1
        if (opt.smooth_draws > 0 and count[0] % opt.smooth_draw_every == 0
                and best["value"] > (drawn[-1][0] if drawn else -np.inf)):
            drawn.append((best["value"], best["x"]))
            del drawn[:-(opt.smooth_draws + 1)]
        k, r = divmod(count[0], opt.smooth_draw_every)
        if (opt.smooth_marks_alone and r == 0 and k & (k - 1) == 0
                and best["value"] > (marked[-1][0] if marked else -np.inf)):
            marked.append((best["value"], best["x"]))
        keep = count[0] % opt.smooth_keep_pool_every == 1
        out = ev(x, mu, want_opts=keep)
        if keep:
            kept.append(out[3])
        if out[1] > best["value"]:
            best["value"], best["x"] = out[1], x.copy()
        if out[0] > here["value"]:
            here["value"], here["x"] = out[0], x.copy()
        trail.append(here["value"])
        if (len(trail) > opt.smooth_stall_evals
                and here["value"] - trail[-opt.smooth_stall_evals - 1]
                <= opt.smooth_stall_rel * abs(here["value"])):
            raise _Stalled
        return -out[0], -out[2]

    while mu >= opt.smooth_mu_min_rel * job_cost_kg and time.perf_counter() < t_end:
        mus.append(mu)
        here = {"value": -np.inf, "x": x}     # best smoothed value at this temperature
        trail: list[float] = []
        try:
            r = minimize(fun, x, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * ev.n,
                         options={"maxiter": 100_000, "maxcor": opt.smooth_lbfgs_memory,
                                  "gtol": 1e-10, "ftol": 1e-13})
            x = r.x
        except _OutOfTime:
            break
        except _Stalled:
            x = here["x"]
        mu *= opt.smooth_mu_factor
    lam = ev.split(best["x"])
    pool = np.unique(np.concatenate(kept), axis=0) if kept else np.zeros((0, 3), np.int64)
    earlier = [duals_from(lay, *ev.split(dx)) for v, dx in reversed(drawn)
               if v < best["value"]][:opt.smooth_draws]
    marks = [duals_from(lay, *ev.split(mx)) for v, mx in reversed(marked)
             if v < best["value"]][:opt.smooth_draws]
    return SmoothedDual(bound=float(best["value"]), duals=duals_from(lay, *lam), pool=pool,
                        evaluations=count[0], temperatures=mus,
                        seconds=time.perf_counter() - t0, earlier=earlier, marks=marks)


__all__ = ["SmoothedDual", "smoothed_ascent"]
