"""Dispatch throughput: a 10,000-placement plan onto the real Slurm clusters and the emulator.

Start the services first (the same ones the tests use), then run the benchmark::

    source scripts/services.sh && start_slurm global && start_kube_emulator global
    python bench/dispatch_throughput.py --placements 10000 \
        --out bench/results/dispatch_throughput.json
    stop_services

It builds a synthetic plan over every site of the ``global`` catalog (GPU types and gang sizes from
the sites' inventories, starts spread over the 24 hours of tomorrow, 1-4 h each), stores it in a
fresh SQLite store and measures

- ``dispatch_s``: :func:`carbonsched.dispatch.outbox.dispatch_plan` from the stored plan to every
  placement submitted and recorded (the outbox written, one status pass per backend, the
  submissions, each recorded);
- ``reconciled_s``: a second ``dispatch_plan`` of the same plan (every unit found recorded) plus a
  :func:`carbonsched.dispatch.outbox.refresh_status` pass asking every backend about every job:
  the time to a complete, reconciled dispatch is ``dispatch_s + reconciled_s``;
- per-backend counts checked against ``squeue --json`` and the emulator's Job lists.

The machine's load average is recorded before and after: the figures are only comparable between
runs on equally loaded machines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import (
    build_adapters,
    dispatch_plan,
    refresh_status,
)
from carbonsched.store import Store
from carbonsched.workload.files import demo_job_command


def gang_sizes(count: int, node_gpus: int) -> list[int]:
    """Gang sizes a pool's node shape can run: 1..one node, then whole nodes (up to 2 nodes).

    The dispatcher refuses a gang larger than one node that is not a whole number of nodes
    (``GangNotWholeNodes``, :func:`carbonsched.dispatch.outbox.placement_nodes`), so the
    synthetic plan only holds sizes a planner could have placed.

    Parameters
    ----------
    count
        GPUs in the pool. [-]
    node_gpus
        GPUs per node (the catalog's ``gpus_per_node``; the pool's count without one). [-]

    Returns
    -------
    list of int
        ``1..min(8, node_gpus)``, then ``2 * node_gpus`` when the pool has two nodes. [-]
    """
    sizes = list(range(1, min(8, node_gpus, count) + 1))
    if count >= 2 * node_gpus:
        sizes.append(2 * node_gpus)
    return sizes


def synthetic_plan(n: int, run: str) -> dict:
    """A plan document with ``n`` placements over the global catalog's sites."""
    cat = load_catalog("global")
    day = (datetime.now(UTC) + timedelta(days=1)).replace(hour=0, minute=0, second=0,
                                                          microsecond=0)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    placements = []
    # every placement carries a real payload (the demo jobs' command, ~1.3 KB): what the outbox
    # stores and each backend renders (nothing is submitted without one, issue 33)
    payload = {"command": demo_job_command()}
    sizes = {(s.id, t): gang_sizes(pool.count, pool.node_gpus)
             for s in cat.sites for t, pool in s.gpus.items()}
    for i in range(n):
        site = cat.sites[i % len(cat.sites)]
        types = sorted(site.gpus)
        gpu_type = types[(i // len(cat.sites)) % len(types)]
        gpus = sizes[(site.id, gpu_type)][i % len(sizes[(site.id, gpu_type)])]
        start = day + timedelta(hours=i % 24)
        end = start + timedelta(hours=1 + i % 4)
        placements.append({"job_id": f"bench-{run}-{i:05d}", "site": site.id,
                           "start": start.strftime(fmt), "end": end.strftime(fmt),
                           "gpu_type": gpu_type, "gpus": gpus, "energy_kwh": 1.0,
                           "emissions_kg": 0.1, "payload": payload})
    return {"plan_id": f"bench-{run}", "date": day.strftime("%Y-%m-%d"), "catalog": "global",
            "signal_quality": "measured",
            "solver": {"name": "synthetic", "status": "optimal", "seconds": 0.0},
            "totals": {"energy_kwh": float(n), "emissions_kg": 0.1 * n,
                       "baseline_emissions_kg": 0.1 * n},
            "unplaced": [], "inference": [], "placements": placements}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--placements", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=4, help="submissions in flight per backend")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    settings = Settings(dispatch_workers=args.workers)
    if settings.slurm_conf_dir is None or settings.kubeconfig is None:
        raise SystemExit("start the services first: source scripts/services.sh && "
                         "start_slurm global && start_kube_emulator global")
    run = uuid.uuid4().hex[:8]
    doc = synthetic_plan(args.placements, run)
    tmp = Path(tempfile.mkdtemp(prefix="carbonsched-bench-"))
    store = Store(f"sqlite:///{tmp / 'bench.db'}")
    store.save_plan(doc)
    cat = load_catalog("global")
    adapters = build_adapters(cat, settings=settings)
    load_before = os.getloadavg()

    t0 = time.perf_counter()
    first = dispatch_plan(store, doc["plan_id"], cat, settings=settings, adapters=adapters)
    dispatch_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    again = dispatch_plan(store, doc["plan_id"], cat, settings=settings, adapters=adapters)
    recs = refresh_status(store, cat, plan_id=doc["plan_id"], adapters=adapters)
    reconciled_s = time.perf_counter() - t1
    load_after = os.getloadavg()

    by_backend = Counter(adapters[p["site"]].name for p in doc["placements"])
    found = {}
    for name in sorted(by_backend):
        adapter = next(a for a in adapters.values() if a.name == name)
        found[name] = sum(1 for k in adapter.status() if k.startswith(f"bench-{run}-"))
    slurm_version = subprocess.run(["slurmctld", "-V"], capture_output=True,
                                   text=True).stdout.strip()
    result = {
        "placements": args.placements,
        "workers_per_backend": args.workers,
        "dispatch_s": round(dispatch_s, 1),
        "placements_per_s": round(args.placements / dispatch_s, 1),
        "reconciled_s": round(reconciled_s, 1),
        "complete_reconciled_s": round(dispatch_s + reconciled_s, 1),
        "first_counts": first.counts,
        "second_counts": again.counts,
        "status_states": recs["state"].value_counts().to_dict(),
        "per_backend_expected": dict(sorted(by_backend.items())),
        "per_backend_found": found,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "slurm": slurm_version,
                    "load_avg_1_5_15_before": [round(x, 2) for x in load_before],
                    "load_avg_1_5_15_after": [round(x, 2) for x in load_after]},
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
