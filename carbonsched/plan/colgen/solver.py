"""HiGHS objects as column generation uses them: quiet, time-limited, warm-startable."""

from __future__ import annotations

import highspy
import numpy as np


def set_limit(h: highspy.Highs, seconds: float) -> None:
    """Give the next ``run()`` ``seconds`` of HiGHS time.

    HiGHS 1.x counts its time limit over all runs of one object (ERGO-Code/HiGHS#1331,
    #1477), so the limit is set past the run time so far.

    Parameters
    ----------
    h
        A HiGHS object.
    seconds
        Time for the next run. [s]
    """
    h.setOptionValue("time_limit", float(h.getRunTime()) + max(float(seconds), 0.05))


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
