"""The proven gap of a plan: absolute tolerance and relative gap to a bound.

Shared by the direct MILP path (:mod:`carbonsched.plan.solve`) and column generation
(:mod:`carbonsched.plan.colgen`), which both report ``(objective − bound) / |objective|``.
"""

from __future__ import annotations

ABS_GAP_KG = 1e-6
"""An absolute gap this small counts as closed (HiGHS's default ``mip_abs_gap``, 1e-6, with
which it reports a plan of objective 0 and bound -5e-7 optimal). [kg]"""


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """Relative gap of a plan to a lower bound.

    Parameters
    ----------
    objective
        The plan's objective, or None when there is no plan. [kg]
    bound
        A proven lower bound, or None when there is none. [kg]

    Returns
    -------
    float or None
        (objective − bound) / |objective|, clipped at 0; 0 when the absolute gap is within
        :data:`ABS_GAP_KG` (a plan of objective 0 has no relative gap otherwise); None when
        either is unknown, or when the objective is 0 and the gap larger. [-]
    """
    if objective is None or bound is None:
        return None
    if objective - bound <= ABS_GAP_KG:
        return 0.0
    if abs(objective) < 1e-12:
        return None
    return max(0.0, (objective - bound) / abs(objective))


GAP_TOL = 1e-9
"""Slack on the requested relative gap when a plan's proven gap is compared with it, for
floating-point round-off in ``relative_gap``. [-]"""


def within_gap(gap: float | None, mip_gap: float) -> bool:
    """Whether a proven relative gap meets the requested one.

    Parameters
    ----------
    gap
        The plan's proven relative gap (:func:`relative_gap`), None when there is no bound. [-]
    mip_gap
        The requested relative gap. [-]

    Returns
    -------
    bool
        ``gap <= mip_gap`` within :data:`GAP_TOL`; False without a gap.
    """
    return gap is not None and gap <= mip_gap + GAP_TOL
