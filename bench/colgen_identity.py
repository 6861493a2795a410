"""Identity gate for column generation: fixed instances, solved with ``method="colgen"``.

Run (one thread; the machine has 2 cores)::

    OMP_NUM_THREADS=1 python bench/colgen_identity.py --out /tmp/colgen_before.json
    OMP_NUM_THREADS=1 python bench/colgen_identity.py --out /tmp/colgen_after.json \\
        --compare /tmp/colgen_before.json

Each instance is :func:`carbonsched.plan.instances.make_instance` (``jobs`` × 8 sites × 24 h,
load 0.3, seeds 0-2, inference on) solved by :func:`carbonsched.plan.solve_plan` with
``method="colgen"``, one thread, ``mip_gap`` 1e-4 and a generous time limit (``--limit``,
default 600 s) so that the path taken does not depend on the clock. Per instance the JSON file
holds the objective and bound [kg CO2e], the status, the solver note with its timings removed,
and a SHA-256 of the sorted (job, site, start, GPU type, GPUs) placements.

``--compare`` reads an earlier file and exits 1 unless every instance present in both has
the same placements hash and status and its objective and bound agree within 1e-6 relative.
Instances listed with ``--exclude`` (``jobs:seed``) are left out of the comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

from carbonsched.plan import solve_plan
from carbonsched.plan.instances import make_instance

SIZES = (200, 1000, 3000)
SEEDS = (0, 1, 2)
REL_TOL = 1e-6


def placements_hash(res) -> str:
    """SHA-256 of the sorted (job, site, start, GPU type, GPUs, piece) tuples of a plan."""
    rows = sorted((p.job_id, p.site, p.start.isoformat(), p.gpu_type, int(p.gpus), int(p.piece))
                  for p in res.placements)
    inf = sorted(str(a) for a in res.inference)
    text = json.dumps([rows, inf])
    return hashlib.sha256(text.encode()).hexdigest()


def untimed(note: str | None) -> str:
    """The solver note with every number followed by a time unit blanked (``12.3 s`` → ``# s``)."""
    return re.sub(r"\d+(\.\d+)?(e-?\d+)? ?(s|ms)\b", "# s", note or "")


def run_one(jobs: int, seed: int, limit: float) -> dict:
    """Solve one instance and return its record."""
    prob = make_instance(jobs, 8, 24, load=0.3, seed=seed)
    t0 = time.perf_counter()
    res = solve_plan(prob, method="colgen", time_limit_s=limit, mip_gap=1e-4, threads=1)
    return {"jobs": jobs, "seed": seed, "status": str(res.status),
            "objective": res.totals["objective"], "bound": res.solver.bound,
            "placements": len(res.placements), "hash": placements_hash(res),
            "note": untimed(res.solver.note), "seconds": time.perf_counter() - t0}


def close(a: float | None, b: float | None) -> bool:
    """Equal within :data:`REL_TOL` relative (both None counts as equal)."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1.0)


def compare(now: list[dict], before: list[dict], exclude: set[str]) -> list[str]:
    """Differences between two runs, one line each (empty when identical)."""
    old = {f"{r['jobs']}:{r['seed']}": r for r in before}
    out = []
    for r in now:
        key = f"{r['jobs']}:{r['seed']}"
        if key in exclude or key not in old:
            continue
        o = old[key]
        if r["hash"] != o["hash"]:
            out.append(f"{key}: placements differ")
        if r["status"] != o["status"]:
            out.append(f"{key}: status {o['status']} -> {r['status']}")
        for f in ("objective", "bound"):
            if not close(r[f], o[f]):
                out.append(f"{key}: {f} {o[f]} -> {r[f]}")
        if r["note"] != o["note"]:
            out.append(f"{key}: note differs:\n  before {o['note']}\n  after  {r['note']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--limit", type=float, default=600.0)
    ap.add_argument("--exclude", nargs="*", default=[])
    a = ap.parse_args(argv)
    rows = []
    for jobs in a.sizes:
        for seed in a.seeds:
            r = run_one(jobs, seed, a.limit)
            print(f"{jobs}:{seed} {r['status']} obj {r['objective']:.6f} bound {r['bound']} "
                  f"{r['seconds']:.1f} s {r['hash'][:12]}", flush=True)
            rows.append(r)
            a.out.write_text(json.dumps(rows, indent=1))
    if a.compare is None:
        return 0
    diffs = compare(rows, json.loads(a.compare.read_text()), set(a.exclude))
    for d in diffs:
        print(d)
    print("identical" if not diffs else f"{len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
