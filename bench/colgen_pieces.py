"""Piece patterns in column generation: proven gap and objective against one-piece colgen.

Run (one thread; the machine has 2 cores and is shared)::

    OMP_NUM_THREADS=1 nice -n 19 python bench/colgen_pieces.py \\
        --out bench/results/colgen_pieces.json

Each instance is :func:`carbonsched.plan.instances.make_instance` (``--jobs`` × ``--sites`` ×
``--hours``, load ``--load``, inference on, seeds ``--seeds``) with ``--share`` of its jobs,
drawn at random (seeded), made preemptible: ``checkpoint_overhead_minutes`` ``--overhead`` and
``max_pieces`` ``--pieces``. It is solved twice by :func:`carbonsched.plan.solve_plan` with
``method="colgen"`` and ``--limit`` seconds: as it is (piece patterns as columns, the bound over
piece plans), and with every job whole (``max_pieces`` 1: the one-piece plan, and the bound
column generation proves over one-piece plans). A one-piece plan is also a plan of the instance
with pieces, so the objectives compare directly. The JSON file holds, per seed and run, the
objective and bound [kg CO2e], the proven gap, status, seconds, the jobs run in pieces and the
solver note.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from carbonsched.domain import Job
from carbonsched.plan import solve_plan
from carbonsched.plan.bench import git_commit
from carbonsched.plan.instances import make_instance


def with_preemptible(prob, share: float, overhead_min: int, pieces: int, seed: int):
    """The instance with ``share`` of its jobs (seeded draw) preemptible; the jobs it changed."""
    rng = np.random.default_rng(10_000 + seed)
    pick = rng.random(len(prob.jobs)) < share
    jobs = []
    for j, p in zip(prob.jobs, pick, strict=True):
        if not p:
            jobs.append(j)
            continue
        jobs.append(Job(id=j.id, tenant=j.tenant, gpu_type=j.gpu_type, gpus=j.gpus,
                        duration_minutes=j.duration_minutes,
                        power_per_gpu_kw=j.power_per_gpu_kw, earliest_start=j.earliest_start,
                        deadline=j.deadline, allowed_sites=j.allowed_sites, preemptible=True,
                        checkpoint_overhead_minutes=overhead_min, max_pieces=pieces))
    prob.jobs = jobs
    return prob, int(pick.sum())


def run_one(prob, limit: float) -> dict:
    """Solve ``prob`` with column generation; the measurements."""
    t = time.perf_counter()
    res = solve_plan(prob, method="colgen", time_limit_s=limit, threads=1)
    rec = res.solver
    return {"objective_kg": rec.objective, "bound_kg": rec.bound, "mip_gap": rec.mip_gap,
            "status": str(res.status), "seconds": round(time.perf_counter() - t, 2),
            "jobs_in_pieces": len({p.job_id for p in res.placements if p.pieces > 1}),
            "jobs_unplaced": int(res.totals.get("jobs_unplaced", 0)),
            "method": rec.method, "note": rec.note}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; write the JSON file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--hours", type=int, default=72)
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--share", type=float, default=0.3)
    ap.add_argument("--overhead", type=int, default=10, help="checkpoint overhead [min]")
    ap.add_argument("--pieces", type=int, default=3, help="max_pieces of a preemptible job")
    ap.add_argument("--limit", type=float, default=60.0, help="time limit per solve [s]")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    commit = git_commit()
    out = {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load_average_start": os.getloadavg(), "machine": platform.platform(),
           "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
           "runs": []}
    for seed in a.seeds:
        base = make_instance(a.jobs, a.sites, a.hours, load=a.load, seed=seed)
        prob, n_pre = with_preemptible(base, a.share, a.overhead, a.pieces, seed)
        pieces = run_one(prob, a.limit)
        whole = run_one(make_instance(a.jobs, a.sites, a.hours, load=a.load, seed=seed),
                        a.limit)
        row = {"seed": seed, "preemptible_jobs": n_pre, "pieces": pieces, "one_piece": whole,
               "load_average": os.getloadavg()}
        out["runs"].append(row)
        print(f"seed {seed}: {n_pre} preemptible; pieces {pieces['objective_kg']:.1f} kg, gap "
              f"{pieces['mip_gap']}, {pieces['jobs_in_pieces']} in pieces, "
              f"{pieces['seconds']} s; one piece {whole['objective_kg']:.1f} kg, gap "
              f"{whole['mip_gap']}, {whole['seconds']} s", flush=True)
        a.out.write_text(json.dumps(out, indent=1, default=str))
    out["load_average_end"] = os.getloadavg()
    a.out.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
