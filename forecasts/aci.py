"""Adaptive conformal inference: the miscoverage levels of the 80 % and 95 % intervals adapt.

One step of adaptive conformal inference (ACI; Gibbs & Candès, "Adaptive Conformal Inference
Under Distribution Shift", NeurIPS 2021, arXiv:2106.00170, Eq. 2):

``alpha <- alpha + gamma * (alpha_target - miss)``

with ``miss`` the share of a period's realised outcomes that fell outside the interval they were
given at level ``1 - alpha``. A period that under-covers lowers ``alpha`` (wider intervals next
time), one that over-covers raises it. The levels are clipped to :data:`ALPHA_MIN`..
:data:`ALPHA_MAX` (the 95 % interval's level never above the 80 % one's, so the intervals stay
nested). Shared by the DACF models (:mod:`carbonsched.forecasts.dacf_models`, one step per day
since the fit) and the per-site choice (:mod:`carbonsched.forecasts.registry`, one step per
issue day replayed from the realised residuals before the issue time).
"""

from __future__ import annotations

import numpy as np

from carbonsched.errors import ForecastError

#: Target miscoverage of the 80 % and 95 % intervals. [-]
ALPHA_TARGET = np.array([0.20, 0.05])
#: Lowest adapted miscoverage of the 80 % and 95 % intervals. [-]
ALPHA_MIN = np.array([0.02, 0.005])
#: Highest adapted miscoverage of the 80 % and 95 % intervals. [-]
ALPHA_MAX = np.array([0.6, 0.3])


def aci_step(alphas: np.ndarray, miss: np.ndarray, gamma: float) -> np.ndarray:
    """One ACI update of the 80 % and 95 % miscoverage levels (module docstring).

    Parameters
    ----------
    alphas
        Current miscoverage levels ``(alpha_80, alpha_95)`` [-].
    miss
        Realised miscoverage of the intervals given at ``alphas`` (share of outcomes outside),
        ``(miss_80, miss_95)`` [-], each in [0, 1].
    gamma
        Step size [-] (> 0).

    Returns
    -------
    ndarray
        The next levels, clipped to ``[ALPHA_MIN, ALPHA_MAX]``, ``alpha_95 <= alpha_80``.

    Raises
    ------
    ForecastError
        A non-finite level or miss, a miss outside [0, 1], or ``gamma <= 0``.
    """
    a = np.asarray(alphas, float)
    m = np.asarray(miss, float)
    if not (np.isfinite(a).all() and np.isfinite(m).all()):
        raise ForecastError(f"ACI step: non-finite level {a.tolist()} or miss {m.tolist()}")
    if ((m < 0) | (m > 1)).any():
        raise ForecastError(f"ACI step: miss {m.tolist()} outside [0, 1]")
    if not gamma > 0:
        raise ForecastError(f"ACI step: gamma must be > 0, got {gamma}")
    nxt = np.clip(a + gamma * (ALPHA_TARGET - m), ALPHA_MIN, ALPHA_MAX)
    nxt[1] = min(nxt[1], nxt[0])
    return nxt


__all__ = ["ALPHA_MAX", "ALPHA_MIN", "ALPHA_TARGET", "aci_step"]
