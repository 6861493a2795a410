"""Fractional GPUs and network domains at fleet scale (issue 37 target: 10k jobs, ≤ 1 % in 60 s).

Run (project root; one solver thread; prefix with ``nice -n 19`` on a shared machine)::

    CARBONSCHED_SHARED_DATA=../shared/data python bench/fractional_scale.py --jobs 10000 \\
        --sites 16 --hours 48 --load 0.3 --limit 60 --seeds 0 1 2 \\
        --out bench/results/fractional_scale.json

Per seed, a real-trace instance (:func:`carbonsched.plan.instances.make_instance`: GAIA PAI
arrivals and lengths, Alibaba GPU v2023 gangs and GPU models, Electricity Maps 2023 carbon
intensity of 16 zones) made to share GPUs as the shipped ``global`` catalog does
(:func:`make_fractional`):

* the instance's most common GPU type (the trace's anonymised ``G2``, at every site, also
  carrying inference) stands in for the catalog's ``A100``: pools of 8-GPU nodes (HGX A100,
  the count rounded *up* to whole nodes), cut into MIG instances (``A100-40GB``) at the
  green hubs and time-sliced in ``gpu_milli`` shares at the edges (the catalog's rule, an
  assumption there as here); the other types do not share (as the catalog's V100 and T4);
* ``--fractional-share`` (default half) of the single-GPU jobs ask part of a GPU, their
  ``gpu_milli`` drawn from the Alibaba 2023 GPU-sharing trace's fractional pods
  (``alibaba_gpu_v2023_openb_pod_list_default.csv``, ``num_gpu`` 1, ``gpu_milli`` < 1000;
  the same file and columns as ``bench/gpu_sharing.py``); of the fractional A100 jobs whose
  share fits a ``4g.20gb``, ``--mig-share`` ask instead the smallest A100-40GB MIG profile
  with at least their share of compute slices (a job of 250 milli: ``2g.10gb``). A fractional
  job at a site that does not offer its kind takes a whole GPU (the planner's rule,
  ``carbonsched.plan.slices``), so its share left idle is stranded;
* the A100 pools of the sites in ``--domain-zones`` (default the catalog's Toronto and London
  zones, ``CA-ON`` and ``GB``) declare network domains of ``--nodes-per-domain`` nodes (the
  catalog: one 8-GPU NVLink board per domain), and ``--same-domain-share`` of the A100 gangs
  of two GPUs or more ask ``topology = "same-domain"`` (``max_domains = 1``).

Each seed is solved by :func:`carbonsched.plan.solve.solve_plan` (``--method``, default
``auto``) at ``--limit`` with one thread, and its plan recounted by
:func:`carbonsched.plan.result.score_plan` (capacity, power, deadlines, gangs, slices,
domains). Which path runs matters: the direct MILP models slice layouts and domains; column
generation plans fractional jobs as whole GPUs and packs their slices after the solve, and
cannot model domains (``auto`` then runs the direct MILP; ``--same-domain-share 0`` leaves
no bound gang, so ``auto`` may run column generation). Reported per seed: objective, proven
bound and gap, seconds, status, the method that ran, every fallback the solve named, the
recount's violations (slices and domains among them), fractional jobs on slices and on whole
GPUs, slices used by kind and stranded GPU-hours (:func:`carbonsched.plan.slices.
recount_slices`); then the median and worst over seeds. JSON (written after each seed) and a
Markdown table next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.domain import GpuPool, JobPayload
from carbonsched.plan import PlanningProblem, solve_plan
from carbonsched.plan.bench import format_gap, git_commit
from carbonsched.plan.bench import solve_fallbacks as fallbacks
from carbonsched.plan.instances import make_instance, shared_data_dir
from carbonsched.plan.result import score_plan
from carbonsched.plan.sets import compile_sets
from carbonsched.plan.slices import MILLI_PER_GPU, recount_slices

A100 = "A100"
NODE_GPUS = 8
"""GPUs per A100 node: an HGX/DGX A100 8-GPU board (the ``global`` catalog's hub shape). [-]"""
MIG_MODEL = "A100-40GB"
"""MIG table row of the A100 pools (the ``global`` catalog's choice: it does not say 40 or 80
GB). [-]"""
MIG_BY_SLICES = ((1, "1g.5gb"), (2, "2g.10gb"), (3, "3g.20gb"), (4, "4g.20gb"))
"""A100-40GB MIG profiles by compute slices (of 7), from NVIDIA's MIG User Guide, "Supported
MIG Profiles" (:data:`carbonsched.domain.MIG_PROFILES`)."""
PODS = "alibaba_gpu_v2023_openb_pod_list_default.csv"

VIOLATIONS = ("capacity_violations", "power_cap_violations", "facility_cap_violations",
              "slo_violations", "deadline_misses", "gang_violations", "slice_violations",
              "domain_violations")


def trace_milli(data_dir: str | Path | None = None) -> np.ndarray:
    """``gpu_milli`` of the Alibaba 2023 GPU-sharing trace's fractional pods, shape ``(3078,)``.

    Pods with ``num_gpu`` 1 and ``gpu_milli`` below 1000 (50..810 on this trace). [1/1000 GPU]

    Raises
    ------
    FileNotFoundError
        The trace file is not under ``<shared data>/job-traces``.
    """
    path = shared_data_dir(data_dir) / "job-traces" / PODS
    pods = pd.read_csv(path, usecols=["num_gpu", "gpu_milli"])
    frac = pods[(pods["num_gpu"] == 1) & (pods["gpu_milli"] < MILLI_PER_GPU)]
    return frac["gpu_milli"].to_numpy(np.int64)


def mig_profile_for(milli: int) -> str | None:
    """Smallest A100-40GB MIG profile with at least ``milli`` thousandths of the compute.

    ``None`` above 4/7 of the GPU (only ``7g.40gb``, the whole GPU, would hold it).
    """
    for slices, name in MIG_BY_SLICES:
        if milli * 7 <= slices * MILLI_PER_GPU:
            return name
    return None


def make_fractional(jobs: int, sites: int, hours: int, load: float = 0.3, seed: int = 0,
                    fractional_share: float = 0.5, mig_share: float = 0.5,
                    same_domain_share: float = 0.5,
                    domain_zones: tuple[str, ...] = ("CA-ON", "GB"),
                    nodes_per_domain: int = 1,
                    data_dir: str | Path | None = None,
                    shares_per_gpu: int = 10) -> PlanningProblem:
    """The real-trace instance with GPU sharing, MIG and network domains (module docstring).

    Parameters
    ----------
    jobs, sites, hours
        Jobs, sites (≤ 16) and hourly slots, as :func:`~carbonsched.plan.instances.
        make_instance`.
    load
        Share of the fleet's GPU-hours the batch work uses, whole GPUs counted. [-]
    seed
        Random seed (the instance and the draws here).
    fractional_share
        Share of the single-GPU jobs that ask part of a GPU. [-]
    mig_share
        Share of the fractional A100 jobs (of at most 4/7 of a GPU) that ask a MIG profile
        instead of ``gpu_milli``. [-]
    same_domain_share
        Share of the A100 gangs of ≥ 2 GPUs with ``topology = "same-domain"``. [-]
    domain_zones
        Zones whose A100 pool declares network domains.
    nodes_per_domain
        Nodes (of 8 GPUs) per network domain there. [-]
    shares_per_gpu
        Shares one GPU of the milli pools is cut into (the catalog's ``shares_per_gpu``;
        1000 books ``gpu_milli`` exactly, as before the field existed). [-]
    data_dir
        Shared data directory (default ``$CARBONSCHED_SHARED_DATA``).

    Returns
    -------
    PlanningProblem

    Raises
    ------
    ValueError
        A share outside [0, 1] or ``nodes_per_domain`` < 1 (and what
        :func:`~carbonsched.plan.instances.make_instance` raises).
    """
    for name, v in (("fractional_share", fractional_share), ("mig_share", mig_share),
                    ("same_domain_share", same_domain_share)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    if nodes_per_domain < 1:
        raise ValueError(f"nodes_per_domain must be ≥ 1, got {nodes_per_domain}")
    base = make_instance(jobs, sites, hours, load=load, seed=seed, data_dir=data_dir)
    rng = np.random.default_rng(10_000 + seed)
    counts = Counter()
    for s in base.sites:
        for g, p in s.gpus.items():
            counts[g] += p.count
    stand_in = counts.most_common(1)[0][0]

    def rename(g: str) -> str:
        return A100 if g == stand_in else g

    new_sites = []
    for s in base.sites:
        pools = {}
        for g, p in s.gpus.items():
            if g != stand_in:
                pools[g] = p
                continue
            hub = s.role.value == "green-hub"
            pools[A100] = GpuPool(
                count=int(-(-p.count // NODE_GPUS) * NODE_GPUS), board_power_w=p.board_power_w,
                gpus_per_node=NODE_GPUS,
                nodes_per_domain=nodes_per_domain if s.zone in domain_zones else None,
                sharing="mig" if hub else "milli", mig_model=MIG_MODEL if hub else None,
                shares_per_gpu=shares_per_gpu)
        new_sites.append(replace(s, gpus=pools))

    milli = trace_milli(data_dir)
    single = [k for k, j in enumerate(base.jobs) if j.gpus == 1]
    chosen = set(rng.choice(single, size=int(round(fractional_share * len(single))),
                            replace=False).tolist()) if single else set()
    new_jobs = []
    for k, j in enumerate(base.jobs):
        g = rename(j.gpu_type)
        payload, max_domains = None, None
        if k in chosen:
            m = int(rng.choice(milli))
            prof = mig_profile_for(m) if g == A100 else None
            if prof is not None and rng.random() < mig_share:
                payload = JobPayload(mig_profile=prof)
            else:
                payload = JobPayload(gpu_milli=m)
        elif g == A100 and j.gpus >= 2 and rng.random() < same_domain_share:
            max_domains = 1
        new_jobs.append(replace(j, gpu_type=g, payload=payload, max_domains=max_domains))
    new_inf = [replace(d, gpu_type=rename(d.gpu_type)) for d in base.inference]
    return replace(base, sites=new_sites, jobs=new_jobs, inference=new_inf)


def slice_summary(problem: PlanningProblem, res) -> dict:
    """Slices of a plan recounted from its placements (:func:`recount_slices`).

    Returns
    -------
    dict
        ``fractional_jobs`` asked and ``fractional_placed``; ``on_slices`` (placed with a GPU
        index: a MIG instance or a milli share) and ``on_whole_gpus``; ``bound_gangs`` asked
        and ``bound_placed``; ``slices_used`` (MIG instance-hours by profile, ``gpu_milli``
        summed over hours) [instance-h, 1/1000 GPU-h]; ``sliced_gpu_hours`` (GPU-hours
        carrying slices) [GPU-h]; ``stranded_gpu_hours`` (capacity held but idle:
        milli/compute left on sliced GPUs, ``1 - share`` of a fractional job on a whole
        GPU) [GPU-h]; ``slice_problems`` (the recount's first few, in words).
    """
    sets = compile_sets(problem, columns=False)
    sl = recount_slices(sets, problem, res.placements)
    frac = {j.id for j in problem.jobs if j.payload is not None and j.payload.fractional}
    bound = {j.id for j in problem.jobs if j.max_domains is not None}
    placed = {p.job_id for p in res.placements}
    on_slices = {p.job_id for p in res.placements if p.gpu_index is not None}
    used: Counter = Counter()
    for kinds in sl.used.values():
        used.update(kinds)
    hours = sets.slot_hours
    return {
        "fractional_jobs": len(frac), "fractional_placed": len(frac & placed),
        "on_slices": len(frac & on_slices), "on_whole_gpus": len((frac & placed) - on_slices),
        "bound_gangs": len(bound), "bound_placed": len(bound & placed),
        "slices_used": {k: round(float(v) * hours, 3) for k, v in sorted(used.items())},
        "sliced_gpu_hours": round(float(sl.sliced_gpus.sum()) * hours, 3),
        "stranded_gpu_hours": round(float(sl.stranded_gpus.sum()) * hours, 3),
        "slice_problems": list(sl.problems),
    }


def one_seed(args: argparse.Namespace, seed: int) -> dict:
    """Build and solve one seed's instance; recount the plan (module docstring)."""
    tb = time.perf_counter()
    problem = make_fractional(args.jobs, args.sites, args.hours, load=args.load, seed=seed,
                              fractional_share=args.fractional_share, mig_share=args.mig_share,
                              same_domain_share=args.same_domain_share,
                              domain_zones=tuple(args.domain_zones),
                              nodes_per_domain=args.nodes_per_domain,
                              shares_per_gpu=args.shares_per_gpu)
    build_s = time.perf_counter() - tb
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    res = solve_plan(problem, time_limit_s=args.limit, method=args.method, threads=1)
    seconds = time.perf_counter() - t0
    score = score_plan(problem, res)
    rec = res.solver
    single = sum(j.gpus == 1 for j in problem.jobs)
    return {
        "jobs": len(problem.jobs), "sites": args.sites, "hours": args.hours, "load": args.load,
        "seed": seed, "limit_s": args.limit, "method_asked": args.method,
        "single_gpu_jobs": int(single),
        "fleet_gpus": int(sum(p.count for s in problem.sites for p in s.gpus.values())),
        "sharing_pools": {s.id: {g: p.sharing for g, p in s.gpus.items() if p.sharing}
                          for s in problem.sites},
        "domain_pools": {s.id: len(s.gpus[A100].domain_nodes) for s in problem.sites
                         if A100 in s.gpus and s.gpus[A100].nodes_per_domain is not None},
        "build_instance_s": build_s, "seconds": seconds, "status": str(res.status),
        "method": rec.method, "objective": res.totals.get("objective"), "bound": rec.bound,
        "mip_gap": rec.mip_gap, "placed": len(res.placements), "unplaced": len(res.unplaced),
        "fallbacks": fallbacks(args.method, res), "note": rec.note,
        "recount_objective": score.objective,
        "violations": {k: int(getattr(score, k)) for k in VIOLATIONS},
        "slices": slice_summary(problem, res),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
    }


def summarise(runs: list[dict], target: float | None = None) -> dict:
    """Median and worst over seeds of seconds and gap; the target judged on the worst.

    A run without a proven gap counts as an infinite gap; ``target_met`` is None without a
    target, and False when any run's recount found a violation.
    """
    secs = [r["seconds"] for r in runs]
    gaps = [float("inf") if r.get("mip_gap") is None else r["mip_gap"] for r in runs]
    worst = max(gaps) if gaps else None
    bad = sum(any(r["violations"].values()) for r in runs)
    return {
        "seeds": [r["seed"] for r in runs],
        "seconds_median": statistics.median(secs) if secs else None,
        "seconds_worst": max(secs) if secs else None,
        "gap_median": statistics.median(gaps) if gaps else None, "gap_worst": worst,
        "gap_target": target,
        "target_met": (None if target is None or worst is None
                       else bool(worst <= target and not bad)),
        "methods": sorted({r["method"] for r in runs}),
        "fallback_runs": sum(bool(r["fallbacks"]) for r in runs),
        "violation_runs": bad,
    }


def write_markdown(doc: dict, path: Path) -> None:
    """The summary line and one row per seed, fallbacks, violations and slices named."""
    s, a = doc["summary"], doc["args"]
    lines = [f"# Fractional GPUs and domains: {a['jobs']} jobs × {a['sites']} sites × "
             f"{a['hours']} h", "",
             f"Commit `{doc['commit']}`; load {a['load']}, {100 * a['fractional_share']:.0f} % "
             f"of single-GPU jobs fractional ({100 * a['mig_share']:.0f} % of the A100 ones a "
             f"MIG profile), {100 * a['same_domain_share']:.0f} % of A100 gangs same-domain at "
             f"{', '.join(a['domain_zones'])} ({a['nodes_per_domain']} node(s) per domain), "
             f"limit {a['limit']:.0f} s, method {a['method']}, one thread. Gap = (objective − "
             "proven bound) / objective.", "",
             "| seeds | methods | s median | s worst | gap median | gap worst | target | met | "
             "runs with fallbacks | runs with violations |",
             "|---|---|---|---|---|---|---|---|---|---|",
             f"| {', '.join(map(str, s['seeds']))} | {', '.join(s['methods'])} | "
             f"{s['seconds_median']:.1f} | {s['seconds_worst']:.1f} | "
             f"{format_gap(s['gap_median'])} | "
             f"{format_gap(s['gap_worst'])} | {format_gap(s['gap_target'])} | {s['target_met']} | "
             f"{s['fallback_runs']} | {s['violation_runs']} |", "",
             "| seed | fractional jobs placed / asked | on slices | on whole GPUs | bound gangs "
             "placed / asked | s | status | method | objective kg | bound kg | gap | "
             "stranded GPU-h | violations | fallbacks | load avg before → after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        bad = ", ".join(f"{k} {v}" for k, v in r["violations"].items() if v) or "none"
        fb = "<br>".join(r["fallbacks"]) or "none"
        obj, bnd, sl, m = r["objective"], r["bound"], r["slices"], r["machine"]
        lines.append(
            f"| {r['seed']} | {sl['fractional_placed']} / {sl['fractional_jobs']} | "
            f"{sl['on_slices']} | {sl['on_whole_gpus']} | {sl['bound_placed']} / "
            f"{sl['bound_gangs']} | {r['seconds']:.1f} | {r['status']} | {r['method']} | "
            f"{'—' if obj is None else f'{obj:.1f}'} | {'—' if bnd is None else f'{bnd:.1f}'} | "
            f"{format_gap(r['mip_gap'])} | {sl['stranded_gpu_hours']:.1f} | {bad} | {fb} | "
            f"{m['load_average_before'][0]} → {m['load_average_after'][0]} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> dict:
    """Parse the command line, run every seed, write JSON and Markdown; return the document."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--hours", type=int, default=48)
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--fractional-share", type=float, default=0.5)
    ap.add_argument("--mig-share", type=float, default=0.5)
    ap.add_argument("--same-domain-share", type=float, default=0.5)
    ap.add_argument("--domain-zones", nargs="+", default=["CA-ON", "GB"])
    ap.add_argument("--nodes-per-domain", type=int, default=1)
    ap.add_argument("--limit", type=float, default=60.0, help="solver time limit [s]")
    ap.add_argument("--method", default="auto", choices=("auto", "milp", "colgen"))
    ap.add_argument("--target", type=float, default=0.01,
                    help="proven-gap target judged on the worst seed [-]")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--shares-per-gpu", type=int, default=10,
                    help="shares per GPU of the milli pools (1000: gpu_milli booked exactly)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/fractional_scale.json"))
    args = ap.parse_args(argv)
    doc = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "commit": git_commit(), "runs": [], "summary": {}}
    for seed in args.seeds:
        row = one_seed(args, seed)
        doc["runs"].append(row)
        doc["summary"] = summarise(doc["runs"], args.target)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1, default=float))
        write_markdown(doc, args.out.with_suffix(".md"))
        print(time.strftime("%H:%M:%S"), f"seed {seed}", row["status"], row["method"],
              f"{row['seconds']:.1f} s", format_gap(row["mip_gap"]), row["fallbacks"],
              row["violations"], flush=True)
    return doc


if __name__ == "__main__":
    main()
