"""Fast refusal of bad ``carbonsched plan`` options, before any heavy import.

The ``carbonsched`` console script enters here: :func:`main` reads the ``plan`` options from the
command line with the standard library only and refuses a bad ``--date``, ``--solver``,
``--time-limit`` or ``--hours`` at once (exit 2, one ``error:`` line), before Typer (which imports
pydantic to coerce values), pandas, the solvers or any data are loaded. Measured on the shared
2-core machine: about 0.3 s for a bad value, against about 2 s through Typer alone (its value
coercion imports pydantic). The console script (:func:`carbonsched.cli.entry.main`) runs it before
importing the CLI.
"""

from __future__ import annotations

import math
from datetime import datetime

MAX_HOURS = 168
"""Longest ``--hours`` accepted (:data:`carbonsched.pipeline.daily.MAX_HORIZON_HOURS`). [h]"""

SOLVER_NAMES = ("highs", "cbc")


def check_plan_options(date: str, solver: str, time_limit: float, hours: int) -> str | None:
    """The first problem with ``plan``'s options as one message, or ``None`` if they are fine."""
    if date:
        d = date.strip()
        try:
            datetime.strptime(d, "%Y-%m-%d")
            ok = len(d) == 10
        except ValueError:
            ok = False
        if not ok:
            return (f"date {date!r} is not YYYY-MM-DD (a calendar day); give e.g. "
                    "--date 2023-07-15")
    if solver not in SOLVER_NAMES:
        return f"unknown solver {solver!r}; use --solver highs (default) or --solver cbc"
    if not (math.isfinite(time_limit) and time_limit > 0):
        return (f"solver time limit must be > 0 s, got {time_limit}; give a finite "
                "--time-limit in seconds, e.g. --time-limit 60")
    if not 1 <= hours <= MAX_HOURS:
        return (f"horizon of {hours} h is outside 1..{MAX_HOURS} h; the daily plan is "
                "day-ahead: use --hours 24 (the default)")
    return None


def _option_values(args: list[str], names: tuple[str, ...]) -> dict[str, str]:
    """``--name value`` and ``--name=value`` pairs (the last one wins, as in Click)."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        name, eq, value = a.partition("=")
        if name in names:
            if eq:
                out[name] = value
            elif i + 1 < len(args):
                out[name] = args[i + 1]
                i += 1
        i += 1
    return out


def precheck(argv: list[str]) -> str | None:
    """Check a ``carbonsched plan ...`` command line; the error message, or ``None``."""
    if not argv or argv[0] != "plan" or "--help" in argv:
        return None
    opts = _option_values(argv[1:], ("--date", "--solver", "--time-limit", "--hours"))
    try:
        time_limit = float(opts.get("--time-limit", "60"))
    except ValueError:
        return (f"--time-limit {opts['--time-limit']!r} is not a number of seconds; give e.g. "
                "--time-limit 60")
    try:
        hours = int(opts.get("--hours", "24"))
    except ValueError:
        return f"--hours {opts['--hours']!r} is not a whole number of hours; give e.g. --hours 24"
    return check_plan_options(opts.get("--date", ""), opts.get("--solver", "highs"),
                              time_limit, hours)
