"""HiGHS objects as column generation uses them: quiet, time-limited, warm-startable."""

from __future__ import annotations

import highspy
import numpy as np


def set_limit(h: highspy.Highs, seconds: float, mip: bool = False) -> None:
    """Give the next ``run()`` ``seconds`` of HiGHS time.

    HiGHS compares an LP's run time with ``time_limit`` over all runs of one object
    (ERGO-Code/HiGHS#1331, #1477), so for an LP the limit is set past the run time so far;
    a MIP's run is compared from its own start, so for a MIP it is ``seconds`` itself.
    Measured (a second run after a first stopped by its limit): LP cumulative on highspy
    1.8.0 and 1.16.0, MIP per run on 1.8.0, 1.11.0, 1.13.0, 1.15.0 and 1.16.0; the LP
    rule on a MIP gave its second run the first run's time on top of its own.

    Parameters
    ----------
    h
        A HiGHS object.
    seconds
        Time for the next run, at least 0.05 (HiGHS refuses 0). [s]
    mip
        Whether the next run solves a MIP (integer columns).
    """
    base = 0.0 if mip else float(h.getRunTime())
    h.setOptionValue("time_limit", base + max(float(seconds), 0.05))


def new_highs(threads: int, time_limit_s: float) -> highspy.Highs:
    """A quiet HiGHS object with ``threads`` threads and a time limit of ``time_limit_s`` [s].

    The limit is at least 0.05 s (HiGHS refuses 0).

    Parameters
    ----------
    threads
        HiGHS threads.
    time_limit_s
        Time limit. [s]

    Returns
    -------
    highspy.Highs
        With output off.
    """
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", threads)
    h.setOptionValue("time_limit", max(float(time_limit_s), 0.05))
    return h


def highs_solution(x0: np.ndarray) -> highspy.HighsSolution:
    """A HiGHS primal solution (column values ``x0``, flagged valid) for ``setSolution``."""
    sol = highspy.HighsSolution()
    sol.col_value = x0.tolist()
    sol.value_valid = True
    return sol
