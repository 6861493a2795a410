"""GPU power caps as run options: a job may run slower and leaner at one of its type's cap levels.

A cap level (:class:`carbonsched.flex.PowerCapLevel`) scales a job's IT power by
``power_fraction`` and its run time by ``time_factor`` (``energy_factor = power_fraction ×
time_factor < 1``). The table with its sources ships as ``carbonsched.data/gpu_power_caps.toml``
(McDonald et al. 2022, arXiv:2205.09646: a 150 W cap on a 250 W V100 saved 13.7 % energy at
6.8 % longer training; the frontier's shape after Zeus, NSDI 2023, and Perseus, SOSP 2024).

The choice is made before the MILP (:func:`choose_power_caps`), per job, from the job's own
window: a job runs at the deepest cap whose longer run still leaves ``slack_factor`` × the run
time between its earliest start and its deadline, so the planner keeps freedom to place it in
clean hours. The planner then places the capped job like any other (its duration and power are
the capped ones), so deadlines, GPU capacity and the power caps hold for the run actually made.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from carbonsched.domain import Job
from carbonsched.errors import InputError
from carbonsched.flex import GridFlexError, PowerCapLevel

CAPS_FILE = "gpu_power_caps.toml"
"""The shipped cap table in :mod:`carbonsched.data`."""

DEFAULT_SLACK_FACTOR = 2.0
"""A job is capped only when its window (deadline − earliest start) is at least this many
times the capped run time: the cap then never removes the planner's choice of hours (a job with
a window of exactly its run time has one start; with twice its run time it keeps as many starts
as its run has hours). A rule of this project, not a published figure. [-]"""


def load_power_caps(path: str | Path | None = None) -> list[PowerCapLevel]:
    """Cap levels from a TOML table (default: the shipped ``gpu_power_caps.toml``).

    Parameters
    ----------
    path
        A TOML file with ``[[levels]]`` tables (``gpu_type``, ``cap_fraction``,
        ``power_fraction``, ``time_factor``, ``source``); ``None`` for the shipped table.

    Returns
    -------
    list of PowerCapLevel
        Sorted by GPU type, then from the mildest cap to the deepest.

    Raises
    ------
    GridFlexError
        A missing file, an unknown key, a level out of range (named with its position), a
        level that saves no energy (``energy_factor >= 1``), or two levels of one type at
        the same cap.
    """
    if path is None:
        text = resources.files("carbonsched.data").joinpath(CAPS_FILE).read_text("utf-8")
        where = f"carbonsched.data/{CAPS_FILE}"
    else:
        p = Path(path)
        if not p.is_file():
            raise GridFlexError(f"power-cap table {p} does not exist")
        text, where = p.read_text("utf-8"), str(p)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GridFlexError(f"{where}: not TOML ({e})") from None
    keys = {"gpu_type", "cap_fraction", "power_fraction", "time_factor", "source"}
    out: list[PowerCapLevel] = []
    seen: set[tuple[str, float]] = set()
    for i, row in enumerate(raw.get("levels", []), start=1):
        extra = sorted(set(row) - keys)
        if extra:
            raise GridFlexError(f"{where}: [[levels]] {i}: unknown keys {extra}; known: "
                                f"{sorted(keys)}")
        try:
            lvl = PowerCapLevel(**row)
        except (InputError, TypeError) as e:
            raise GridFlexError(f"{where}: [[levels]] {i}: {e}") from None
        if lvl.energy_factor >= 1.0:
            raise GridFlexError(
                f"{where}: [[levels]] {i} ({lvl.gpu_type} at {lvl.cap_fraction:g}): "
                f"power_fraction × time_factor = {lvl.energy_factor:.4f} saves no energy; a "
                "cap level must use less energy than running uncapped")
        if (lvl.gpu_type, lvl.cap_fraction) in seen:
            raise GridFlexError(f"{where}: [[levels]] {i}: a second level for "
                                f"{lvl.gpu_type} at cap {lvl.cap_fraction:g}")
        seen.add((lvl.gpu_type, lvl.cap_fraction))
        out.append(lvl)
    return sorted(out, key=lambda c: (c.gpu_type, -c.cap_fraction))


def levels_for(gpu_type: str, table: list[PowerCapLevel]) -> list[PowerCapLevel]:
    """The cap levels of ``gpu_type`` (its own rows, else the ``"*"`` rows), mildest first."""
    own = [c for c in table if c.gpu_type == gpu_type]
    return own or [c for c in table if c.gpu_type == "*"]


def capped_job(job: Job, level: PowerCapLevel) -> Job:
    """The job run at ``level``: power × ``power_fraction``, run time × ``time_factor``.

    The run time is rounded up to whole minutes (plans count whole minutes), so the energy of
    the capped job is at most one minute's worth above ``energy_factor`` × the uncapped
    energy.

    Parameters
    ----------
    job
        The uncapped job.
    level
        A cap level.

    Returns
    -------
    Job
        Same id, gang, window and terms; ``duration_minutes = ceil(duration × time_factor)``
        [min] and ``power_per_gpu_kw × power_fraction`` [kW].
    """
    minutes = math.ceil(job.duration_minutes * level.time_factor - 1e-9)
    return replace(job, duration_minutes=minutes,
                   power_per_gpu_kw=job.power_per_gpu_kw * level.power_fraction)


@dataclass(frozen=True)
class CapChoice:
    """The cap a job runs at (see :func:`choose_power_caps`)."""

    job_id: str
    level: PowerCapLevel
    uncapped_minutes: int
    """Run time uncapped. [min]"""
    uncapped_it_kw: float
    """IT power of the gang uncapped. [kW]"""


def choose_power_caps(jobs: list[Job], table: list[PowerCapLevel],
                      slack_factor: float = DEFAULT_SLACK_FACTOR
                      ) -> tuple[list[Job], dict[str, CapChoice]]:
    """Run each job at the deepest cap level its window leaves room for.

    Parameters
    ----------
    jobs
        The jobs (uncapped).
    table
        Cap levels (:func:`load_power_caps`); empty: no job is capped.
    slack_factor
        A job is capped at a level only when ``deadline - earliest_start >= slack_factor ×``
        the capped run time. [-] (:data:`DEFAULT_SLACK_FACTOR`)

    Returns
    -------
    jobs, choices
        The jobs with capped ones replaced (same order), and the choice per capped job id.

    Raises
    ------
    GridFlexError
        ``slack_factor < 1`` (a capped run that cannot fit its window).
    """
    if not slack_factor >= 1.0:
        raise GridFlexError(f"slack_factor must be >= 1 (a capped run must fit its window), "
                            f"got {slack_factor!r}")
    out: list[Job] = []
    choices: dict[str, CapChoice] = {}
    for job in jobs:
        window_min = (job.deadline - job.earliest_start).total_seconds() / 60.0
        pick = None
        for lvl in levels_for(job.gpu_type, table):     # mildest first: keep the deepest fit
            if window_min >= slack_factor * math.ceil(job.duration_minutes * lvl.time_factor
                                                      - 1e-9):
                pick = lvl
        if pick is None:
            out.append(job)
            continue
        out.append(capped_job(job, pick))
        choices[job.id] = CapChoice(job.id, pick, job.duration_minutes, job.it_power_kw)
    return out, choices
