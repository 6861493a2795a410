"""Decision-focused scores of a carbon-intensity forecast: the regret of the starts it picks.

A plan acts on the *order* of the hours inside each job's waiting window, not on their level: a
forecast that is 20 % too high everywhere picks the same starts as a perfect one. The start
regret scores that directly. For every issue (a row of ``forecast`` and ``actual``), every
arrival hour ``a`` in ``arrivals`` and every job length ``L`` in ``lengths_hours``, the start the
forecast picks is the one with the least forecast sum over ``L`` hours among the starts
``a .. min(a + wait_hours, H - L)``; its actual sum is compared with the least actual sum over the
same starts:

``regret % = 100 * sum(actual[picked] - actual[best]) / sum(actual[best])``

over every (issue, arrival, length) whose window has complete actual values. This is the
excess emissions of a capacity-free, non-preemptive deferral policy over its perfect-foresight
ideal (the "regret" of a predict-then-optimise decision: Elmachtoub & Grigas, "Smart 'Predict,
then Optimize'", *Management Science* 68(1), 2022, doi:10.1287/mnsc.2020.3922).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from carbonsched.errors import ForecastError


def start_regret(forecast: np.ndarray, actual: np.ndarray, wait_hours: int = 24,
                 lengths_hours: Iterable[int] = (1, 3),
                 arrivals: Iterable[int] | None = None) -> tuple[float, float]:
    """Excess and ideal emissions of the starts picked on ``forecast``, scored on ``actual``.

    Parameters
    ----------
    forecast, actual
        Shape ``(n_issues, H)``: hourly values from each issue time [g/kWh]. ``forecast`` must
        be finite; NaN in ``actual`` leaves out the windows that read it.
    wait_hours
        How long a job may wait after its arrival [h] (starts ``a .. a + wait_hours``).
    lengths_hours
        Job lengths [h], each ``1 .. H``.
    arrivals
        Arrival hours after the issue (default ``0 .. 23``, each ``< H``).

    Returns
    -------
    (float, float)
        ``(excess, ideal)``: the sums of ``actual[picked] - actual[best]`` and of
        ``actual[best]`` [g/kWh·h]; ``100 * excess / ideal`` is the regret in %. Sums (not
        the ratio) so that several sites or months pool exactly.

    Raises
    ------
    ForecastError
        Shapes differ, a non-finite forecast, a length or arrival outside the horizon.
    """
    f = np.asarray(forecast, dtype=float)
    a = np.asarray(actual, dtype=float)
    if f.ndim != 2 or f.shape != a.shape:
        raise ForecastError(f"start_regret: forecast {f.shape} and actual {a.shape} must be "
                            "the same (n_issues, H) shape")
    if not np.isfinite(f).all():
        raise ForecastError("start_regret: the forecast has non-finite values; a forecast "
                            "must give every hour")
    H = f.shape[1]
    arr = list(range(24)) if arrivals is None else [int(x) for x in arrivals]
    excess = ideal = 0.0
    for L in lengths_hours:
        L = int(L)
        if not 1 <= L <= H:
            raise ForecastError(f"start_regret: job length {L} h outside 1..{H} h")
        kernel = np.ones(L)
        fs = np.stack([np.convolve(r, kernel, "valid") for r in f])
        acs = np.stack([np.convolve(r, kernel, "valid") for r in a])
        for s0 in arr:
            if not 0 <= s0 <= H - L:
                raise ForecastError(f"start_regret: arrival {s0} h leaves no {L}-hour start "
                                    f"inside the {H}-hour horizon")
            hi = min(s0 + int(wait_hours), H - L) + 1
            window = acs[:, s0:hi]
            ok = np.isfinite(window).all(axis=1)
            if not ok.any():
                continue
            pick = s0 + np.argmin(fs[ok, s0:hi], axis=1)
            chosen = acs[np.flatnonzero(ok), pick]
            best = window[ok].min(axis=1)
            excess += float((chosen - best).sum())
            ideal += float(best.sum())
    return excess, ideal


__all__ = ["start_regret"]
