"""Scale benchmark of the planner against the straightforward per-option PuLP model.

``run_plan_benchmark`` builds one instance from the real traces
(:func:`carbonsched.plan.instances.make_instance`), solves it with :func:`solve_plan` and, with
``reference=True``, with the straightforward model (one PuLP binary per feasible job, site and
start, HiGHS with the same time limit after the build) on the SAME instance. Each run happens
in its own subprocess so that its peak memory (``ru_maxrss``) is its own; a reference that
exceeds its wall or memory allowance is killed and reported as such.

Command (wired by the CLI)::

    carbonsched bench plan --jobs N --sites S --hours H [--load F] [--reference] [--seed N]
        --out FILE.json
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KEYS = ("build_seconds", "solve_seconds", "seconds", "peak_memory_mb", "status", "mip_gap",
        "objective", "bound")
FALLBACK_WORDS = ("fall", "instead", "only", "greedy", "in one piece", "as whole GPUs",
                  "no incumbent", "cold:", "stopped", "skipped", "not modelled", "unplaced")
"""Words that mark a clause of the solver's note as a fallback (what the solve did instead of
what was asked, or modelled more coarsely)."""
PROVENANCE_PREFIXES = ("plan from ", "the short path (")
"""Clauses that say which candidate or path the plan came from (``plan from priced greedy +
moves (...)``, the staged solve's ``the short path (...) ran first ...``): provenance, not a
fallback, although they name a greedy candidate."""


def solve_fallbacks(requested: str, res: Any) -> list[str]:
    """Every fallback a solve names: method switched, greedy plan, the note's fallback clauses.

    Parameters
    ----------
    requested
        The method asked for (``auto``, ``milp``, ``colgen``).
    res
        The :class:`~carbonsched.plan.result.PlanResult`.

    Returns
    -------
    list of str
        One line per fallback, in the order found; empty when the solve did what was asked.
        Clauses are the note's ``;``-separated parts that contain one of
        :data:`FALLBACK_WORDS` and do not start with one of :data:`PROVENANCE_PREFIXES`.
    """
    rec = res.solver
    out = []
    if requested != "auto" and rec.method != requested:
        out.append(f"method: asked {requested}, ran {rec.method}")
    if str(res.status) == "heuristic":
        out.append(f"greedy plan (status heuristic, {rec.greedy_unplaced} job(s) it left out)")
    for clause in (c.strip() for c in (rec.note or "").split(";")):
        if clause and not clause.startswith(PROVENANCE_PREFIXES) \
                and any(w in clause for w in FALLBACK_WORDS):
            out.append(clause)
    return out


def git_commit(cwd: str | Path | None = None) -> str:
    """The short commit hash of the checkout at ``cwd`` (default: the working directory).

    Returns
    -------
    str
        ``git rev-parse --short HEAD``, or ``"unknown"`` outside a Git checkout or without git.
    """
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=cwd).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def format_gap(gap: float | None) -> str:
    """A proven gap (a fraction) as a table cell: ``"0.25 %"``; ``"no bound"`` for infinity.

    Parameters
    ----------
    gap
        (objective − bound) / objective, a fraction; None when not measured; ``inf`` when no
        bound was proven.

    Returns
    -------
    str
        ``"—"`` for None, ``"no bound"`` for ``inf``, else the percentage to two decimals.
    """
    if gap is None:
        return "—"
    return "no bound" if gap == float("inf") else f"{100 * gap:.2f} %"


REFERENCE_MEMORY_GB = float(os.environ.get("CARBONSCHED_BENCH_REF_GB", "12"))
"""Address-space limit of the reference subprocess (the machine is shared). [GiB]"""


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _child(kind: str, jobs: int, sites: int, hours: int, load: float, seed: int,
           data_dir: str | None, time_limit_s: float, threads: int,
           mip_gap: float = 0.01) -> dict[str, Any]:
    """Run one solve in this process and return its measurements."""
    from carbonsched.plan.instances import make_instance
    from carbonsched.plan.result import PlanStatus
    from carbonsched.plan.solve import relative_gap, solve_plan

    t = time.perf_counter()
    prob = make_instance(jobs, sites, hours, load=load, seed=seed, data_dir=data_dir)
    instance_s = time.perf_counter() - t
    out: dict[str, Any] = {"instance_seconds": round(instance_s, 3)}
    if kind == "planner":
        t = time.perf_counter()
        res = solve_plan(prob, time_limit_s=time_limit_s, threads=threads, mip_gap=mip_gap)
        rec = res.solver
        out.update(build_seconds=rec.build_seconds, solve_seconds=rec.solve_seconds,
                   seconds=time.perf_counter() - t, status=str(res.status),
                   mip_gap=rec.mip_gap, objective=rec.objective, bound=rec.bound,
                   method=rec.method, note=rec.note)
    else:
        from carbonsched.plan.model import build_model, read_solution
        from carbonsched.plan.result import build_plan_result
        from carbonsched.plan.sets import compile_sets
        from carbonsched.plan.solve import run_milp

        t = time.perf_counter()
        sets = compile_sets(prob)
        m = build_model(sets)
        build_s = time.perf_counter() - t
        o = run_milp(m.lp, "highs", time_limit_s, mip_gap, threads)
        status, obj = PlanStatus.NO_SOLUTION, None
        if o.infeasible:
            status = PlanStatus.INFEASIBLE
        elif o.has_solution:
            chosen, alloc = read_solution(m)
            obj = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE,
                                    _dummy_record()).totals["objective"]
            gap = relative_gap(obj, o.bound)
            status = (PlanStatus.OPTIMAL if o.proven and gap is not None and gap <= mip_gap
                      else PlanStatus.FEASIBLE)
        out.update(build_seconds=build_s, solve_seconds=o.seconds,
                   seconds=time.perf_counter() - t, status=str(status),
                   mip_gap=relative_gap(obj, o.bound), objective=obj, bound=o.bound,
                   method="milp (reference: one PuLP binary per job, site and start)",
                   options=int(len(sets.options)), note=f"solver status {o.raw}")
    out["peak_memory_mb"] = round(_peak_mb(), 1)
    return out


def _dummy_record():
    from carbonsched.plan.result import PlanStatus, SolverRecord

    return SolverRecord(name="highs", status=PlanStatus.FEASIBLE)


def _run_sub(kind: str, args: dict[str, Any], wall_s: float, mem_gb: float | None
             ) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "carbonsched.plan.bench", kind, json.dumps(args)]

    def limit() -> None:  # pragma: no cover - runs in the child
        if mem_gb:
            b = int(mem_gb * 1024 ** 3)
            resource.setrlimit(resource.RLIMIT_AS, (b, b))

    env = dict(os.environ, OMP_NUM_THREADS="1")
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_s,
                           preexec_fn=limit, env=env)
    except subprocess.TimeoutExpired:
        return {k: None for k in KEYS} | {
            "status": "aborted", "seconds": round(time.perf_counter() - t, 1),
            "note": f"killed after the {wall_s:.0f} s wall allowance"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or "").strip().splitlines()[-3:]
        oom = "MemoryError" in (p.stderr or "") or p.returncode in (-9, 137)
        return {k: None for k in KEYS} | {
            "status": "aborted", "seconds": round(time.perf_counter() - t, 1),
            "note": ("out of memory under the " f"{mem_gb:.0f} GiB limit" if oom else
                     "failed: " + " | ".join(tail))}
    return json.loads(lines[-1])


def run_plan_benchmark(jobs: int, sites: int, hours: int, load: float = 0.3,
                       reference: bool = False, seed: int = 0,
                       data_dir: str | Path | None = None, time_limit_s: float = 60.0,
                       threads: int = 1, mip_gap: float = 0.01) -> dict[str, Any]:
    """Plan one real-trace instance and report time, memory, status and proven gap.

    Parameters
    ----------
    jobs, sites, hours
        Instance size (``sites`` ≤ 16).
    load
        Share of the fleet's GPU-hours the batch work uses. [-]
    reference
        Also run the straightforward per-(job, site, start)-binary PuLP model on the same
        instance, with the same solver time limit after its build.
    seed
        Instance seed.
    data_dir
        Shared data directory (default ``$CARBONSCHED_SHARED_DATA``).
    time_limit_s
        Planner budget (build + solve) and the reference's solver limit. [s]
    threads
        Solver threads.
    mip_gap
        Relative gap at which the planner (and the reference) may stop. [-]

    Returns
    -------
    dict
        ``jobs, sites, hours, load, build_seconds, solve_seconds, seconds, peak_memory_mb,
        status, mip_gap, objective, bound`` (+ ``method``, ``note``), and with ``reference``
        the same keys under ``"reference"`` plus ``ratios`` (reference / planner seconds,
        memory, objective).
    """
    args = {"jobs": jobs, "sites": sites, "hours": hours, "load": load, "seed": seed,
            "data_dir": None if data_dir is None else str(data_dir),
            "time_limit_s": time_limit_s, "threads": threads, "mip_gap": mip_gap}
    out: dict[str, Any] = {"jobs": jobs, "sites": sites, "hours": hours, "load": load,
                           "seed": seed, "time_limit_s": time_limit_s, "threads": threads,
                           "mip_gap_target": mip_gap}
    load_before = [round(x, 2) for x in os.getloadavg()]
    mine = _run_sub("planner", args, wall_s=time_limit_s * 3 + 120, mem_gb=None)
    out.update(mine)
    if reference:
        ref = _run_sub("reference", args, wall_s=max(time_limit_s * 4, 300.0),
                       mem_gb=REFERENCE_MEMORY_GB)
        out["reference"] = {"jobs": jobs, "sites": sites, "hours": hours, "load": load} | ref
        ratios = {}
        for k in ("seconds", "peak_memory_mb", "objective"):
            a, b = ref.get(k), mine.get(k)
            ratios[k] = round(a / b, 3) if a is not None and b not in (None, 0) else None
        out["ratios"] = ratios
    out["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                      "load_average_1m": round(os.getloadavg()[0], 2),
                      "load_average_before": load_before,
                      "load_average_after": [round(x, 2) for x in os.getloadavg()],
                      "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return out


if __name__ == "__main__":  # the subprocess entry point
    kind, raw = sys.argv[1], json.loads(sys.argv[2])
    result = _child(kind, raw["jobs"], raw["sites"], raw["hours"], raw["load"], raw["seed"],
                    raw["data_dir"], raw["time_limit_s"], raw["threads"],
                    raw.get("mip_gap", 0.01))
    print(json.dumps(result, default=float))
