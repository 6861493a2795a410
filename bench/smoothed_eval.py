"""One evaluation of the smoothed Lagrangian dual with double and with single-precision weights.

Run (prefix with ``nice -n 19`` on a shared machine)::

    CARBONSCHED_SHARED_DATA=../shared/data python bench/smoothed_eval.py --jobs 10000 \\
        --sites 16 --hours 48 72 --seeds 0 1 2 3 4 --out bench/results/smoothed_eval.json

Per instance (:func:`carbonsched.plan.instances.make_instance`, load ``--load``), the
evaluator of :mod:`carbonsched.plan.colgen.smoothed` is built twice, with double
(``numpy.float64``, the default) and with single-precision (``numpy.float32``,
``ColgenOptions.smooth_weights = "single"``) soft-max weights, and both are timed side by
side in one process, ``--evals`` times each, the order of the two alternating, at the
multipliers and temperature a short ascent with the default options (``--ascent-s``; 0: zero
multipliers) reached. Reported per instance: the median
milliseconds of each, their ratio, and what single precision changes at that point: the exact
Lagrangian (the bound; must be equal), the smoothed value (relative difference) and the
gradient (largest difference relative to the gross use it sums, ``_Evaluator.gross_use``,
past the rounding of "use less capacity" in double), each the worst over the timed
temperature and ``--precision-mu-rel`` times the mean job cost (default 5e-3, 1e-4, 1e-5: the
ascent's first, a middle and its last temperature).
``weight_slots`` counts the weights one evaluation computes (each window's classes times its
sites and starts, disallowed starts included). The summary gives the median and the worst
ratio over the instances. A JSON file (one row per instance) and a Markdown table next to it
are written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from carbonsched.plan.baselines import greedy_from_sets
from carbonsched.plan.colgen import ColgenOptions, job_classes, make_layout, multipliers
from carbonsched.plan.colgen import smoothed as sm
from carbonsched.plan.colgen.lagrangian_dual import job_cost_scale
from carbonsched.plan.instances import make_instance
from carbonsched.plan.sets import compile_sets


def measure(jobs: int, sites: int, hours: int, load: float, seed: int, evals: int,
            ascent_s: float, mu_rel: tuple[float, ...] = (5e-3, 1e-4, 1e-5)) -> dict:
    """Time both evaluators on one instance; see the module docstring."""
    sets = compile_sets(make_instance(jobs, sites, hours, load=load, seed=seed))
    lay = make_layout(sets, job_classes(sets))
    double = sm._Evaluator(sets, lay, np.float64)
    single = sm._Evaluator(sets, lay, np.float32)
    cost = job_cost_scale(sets, greedy_from_sets(sets).totals["objective"])   # as the solver
    start_mu = ColgenOptions().smooth_mu_start_rel * cost
    if ascent_s > 0:
        sd = sm.smoothed_ascent(sets, lay, ascent_s, cost)
        x = double.join(*multipliers(sets, lay, sd.duals))
        mu = sd.temperatures[-1] if sd.temperatures else start_mu
    else:
        x, mu = np.zeros(double.n), start_mu
    times: dict[str, list[float]] = {"double": [], "single": []}
    arms = [("double", double), ("single", single)]
    for k in range(evals):
        for name, ev in (arms if k % 2 == 0 else arms[::-1]):
            t = time.perf_counter()
            ev(x, mu)
            times[name].append(time.perf_counter() - t)
    # what single precision changes, at the timed temperature and down to the last one the
    # ascent may use: the gradient against the use it sums, past the rounding of "use less
    # capacity" in double (a few units of the capacity's last place)
    floor = 1e-12 * (1.0 + double.gross_use(np.zeros(double.n)))
    precision = {}
    for m in sorted({mu, *(r * cost for r in mu_rel)}, reverse=True):
        d, s = double(x, m), single(x, m)
        precision[f"{m / cost:.0e}"] = {
            "exact_equal": bool(d[1] == s[1]),
            "smoothed_rel_diff": abs(d[0] - s[0]) / max(abs(d[0]), 1e-12),
            "gradient_rel_diff": float((np.abs(d[2] - s[2])
                                        / (double.gross_use(d[2]) + floor)).max())}
    ms_d = 1e3 * statistics.median(times["double"])
    ms_s = 1e3 * statistics.median(times["single"])
    return {
        "jobs": jobs, "sites": sites, "hours": hours, "load": load, "seed": seed,
        "classes": len(lay.reps), "weight_slots": int(sum(c[4].size for _, _, ch in
                                                        double.groups for c in ch)),
        "mu_kg": mu, "double_ms": ms_d, "single_ms": ms_s, "ratio": ms_s / ms_d,
        "exact_equal": all(p["exact_equal"] for p in precision.values()),
        "smoothed_rel_diff": max(p["smoothed_rel_diff"] for p in precision.values()),
        "gradient_rel_diff": max(p["gradient_rel_diff"] for p in precision.values()),
        "precision_by_mu_rel": precision,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--hours", type=int, nargs="+", default=[48, 72])
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--evals", type=int, default=30)
    ap.add_argument("--ascent-s", type=float, default=3.0)
    ap.add_argument("--precision-mu-rel", type=float, nargs="+", default=[5e-3, 1e-4, 1e-5])
    ap.add_argument("--out", type=Path, default=Path("bench/results/smoothed_eval.json"))
    a = ap.parse_args()
    if a.evals < 1 or a.ascent_s < 0:
        ap.error(f"--evals must be >= 1 and --ascent-s >= 0, got {a.evals} and {a.ascent_s}")
    rows = []
    for hours in a.hours:
        for seed in a.seeds:
            r = measure(a.jobs, a.sites, hours, a.load, seed, a.evals, a.ascent_s,
                        tuple(a.precision_mu_rel))
            r["date"] = datetime.now(UTC).isoformat(timespec="seconds")
            r["machine"] = (f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
                            f"Python {platform.python_version()}, NumPy {np.__version__}")
            rows.append(r)
            print(f"{a.jobs} x {a.sites} x {hours} seed {seed}: double {r['double_ms']:.1f} ms, "
                  f"single {r['single_ms']:.1f} ms ({r['ratio']:.2f}), bound equal "
                  f"{r['exact_equal']}, smoothed {r['smoothed_rel_diff']:.1e}, gradient "
                  f"{r['gradient_rel_diff']:.1e}", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# Smoothed dual: one evaluation, double vs single-precision weights", "",
             "| instance | seed | classes | weight slots | double ms | single ms | single/double"
             " | bound equal | smoothed rel. diff | gradient rel. diff |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['jobs']} x {r['sites']} x {r['hours']} | {r['seed']} | "
                     f"{r['classes']} | {r['weight_slots']:,} | {r['double_ms']:.1f} | "
                     f"{r['single_ms']:.1f} | {r['ratio']:.2f} | {r['exact_equal']} | "
                     f"{r['smoothed_rel_diff']:.1e} | {r['gradient_rel_diff']:.1e} |")
    ratios = [r["ratio"] for r in rows]
    lines += ["", f"single/double: median {statistics.median(ratios):.2f}, worst "
              f"{max(ratios):.2f} over {len(rows)} instance(s); {rows[0]['machine']}, "
              f"{rows[0]['date']}"]
    a.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(lines[-1])


if __name__ == "__main__":
    main()
