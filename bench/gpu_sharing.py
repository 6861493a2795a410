"""Fractional GPUs on the Alibaba 2023 GPU-sharing trace: stranded GPUs by packing rule.

Usage::

    python bench/gpu_sharing.py [--data-dir ../shared/data/job-traces] [--out FILE.json]

Replays the trace's pods (``alibaba_gpu_v2023_openb_pod_list_default.csv``: cpu_milli,
memory_mib, num_gpu, gpu_milli, creation/deletion times in seconds) on the trace's own nodes
(``..._node_list_gpu_node.csv``: 1,213 nodes, 6,212 GPUs with their CPUs and memory), in the
order of their real arrival (``creation_time``), with three packing rules for a pod that asks
part of one GPU:

* ``whole``: rounded up to one whole GPU (carbonsched before issue 37: a site without sharing);
* ``best_fit``: onto the GPU with the least milli left that still holds it (on a node with the
  CPUs and memory), else onto a free GPU of the node with the fewest free GPUs. This is also
  the rule carbonsched's planner uses to give each slice its GPU after the solve
  (:func:`carbonsched.plan.slices.assign_runs`: the GPU with the most load that fits);
* ``layouts``: the planner's capacity model (:func:`carbonsched.plan.slices.milli_layouts`):
  the fewest GPUs cut in valid milli layouts (sizes summing to at most 1000) that hold the
  fractional pods present, solved as an integer programme over layout counts (HiGHS). This is
  the GPU count the planner's capacity rows plan against in a site-hour (a repack of the pool,
  nodes and CPUs ignored): a bound, not an online rule.

Whole-GPU pods (``gpu_milli`` 1000, or several GPUs) take whole GPUs of one node in every rule;
pods without a GPU take CPUs and memory only.

Two replays:

* ``real``: pods arrive at ``creation_time`` and leave at ``deletion_time`` (the trace's real
  lifetimes): the cluster is nearly empty (at most 71 GPUs asked at once), so this measures the
  GPUs each rule needs;
* ``filled``: pods arrive in the same order and stay (the setting of Weng et al., "Beware of
  Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
  ATC 2023, on this trace): the pods then ask about as many GPUs as the cluster has, and the
  rules differ in pods left unplaced at the trace's capacity and GPUs stranded.

Stranded GPUs: on every GPU holding a pod, the share no pod uses (``1 - gpu_milli/1000``
summed over its pods): a pod of 250 milli on a whole GPU strands 0.75.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.plan.bench import git_commit
from carbonsched.plan.slices import MILLI_PER_GPU, milli_kinds, milli_layouts

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "job-traces"
PODS = "alibaba_gpu_v2023_openb_pod_list_default.csv"
NODES = "alibaba_gpu_v2023_openb_node_list_gpu_node.csv"
RULES = ("whole", "best_fit")
PUBLISHED_FGD_PCT = 49.0
"""Weng et al. (USENIX ATC 2023): fragmentation gradient descent leaves up to 49 % fewer GPUs
unallocated than the common packers it is compared with, on this trace. [%]"""


class Cluster:
    """Nodes (CPU, memory) and their GPUs (milli used, real milli used) for one rule."""

    def __init__(self, nodes: pd.DataFrame) -> None:
        self.cpu = nodes["cpu_milli"].to_numpy(np.int64).copy()
        self.mem = nodes["memory_mib"].to_numpy(np.int64).copy()
        self.gpu_node = np.repeat(np.arange(len(nodes)), nodes["gpu"].to_numpy())
        n = len(self.gpu_node)
        self.alloc = np.zeros(n, dtype=np.int64)   # milli allocated (1000 for a whole GPU)
        self.real = np.zeros(n, dtype=np.int64)    # milli the pods ask
        self.pods = np.zeros(n, dtype=np.int64)

    def _room(self, cpu: int, mem: int) -> np.ndarray:
        return (self.cpu >= cpu) & (self.mem >= mem)

    def _free_per_node(self) -> np.ndarray:
        return np.bincount(self.gpu_node, weights=(self.alloc == 0), minlength=len(self.cpu))

    def place(self, pod, rule: str) -> tuple[int, list[tuple[int, int, int]]] | None:
        """Place a pod: its node and ``(gpu, alloc, real)`` per GPU taken; ``None``: no room."""
        cpu, mem, n, milli = (int(pod.cpu_milli), int(pod.memory_mib), int(pod.num_gpu),
                              int(pod.gpu_milli))
        room = self._room(cpu, mem)
        if n == 0:
            nodes = np.flatnonzero(room)
            if not len(nodes):
                return None
            node = nodes[np.argmin(self._free_per_node()[nodes])]
            self.cpu[node] -= cpu
            self.mem[node] -= mem
            return int(node), []
        frac = n == 1 and milli < MILLI_PER_GPU
        if frac and rule == "best_fit":
            ok = (self.alloc > 0) & (self.alloc + milli <= MILLI_PER_GPU) & room[self.gpu_node]
            cand = np.flatnonzero(ok)
            if len(cand):
                g = int(cand[np.argmax(self.alloc[cand])])
                return self._take(pod, [g], milli, milli)
        free = self._free_per_node()
        nodes = np.flatnonzero(room & (free >= n))
        if not len(nodes):
            return None
        node = int(nodes[np.argmin(free[nodes])])
        gpus = np.flatnonzero((self.gpu_node == node) & (self.alloc == 0))[:n].tolist()
        if frac and rule == "best_fit":
            return self._take(pod, gpus, milli, milli)
        return self._take(pod, gpus, MILLI_PER_GPU, milli if frac else MILLI_PER_GPU)

    def _take(self, pod, gpus: list[int], alloc: int, real: int
              ) -> tuple[int, list[tuple[int, int, int]]]:
        node = self.gpu_node[gpus[0]]
        self.cpu[node] -= int(pod.cpu_milli)
        self.mem[node] -= int(pod.memory_mib)
        for g in gpus:
            self.alloc[g] += alloc
            self.real[g] += real
            self.pods[g] += 1
        return int(node), [(g, alloc, real) for g in gpus]

    def release(self, pod, node: int, taken: list[tuple[int, int, int]]) -> None:
        self.cpu[node] += int(pod.cpu_milli)
        self.mem[node] += int(pod.memory_mib)
        for g, alloc, real in taken:
            self.alloc[g] -= alloc
            self.real[g] -= real
            self.pods[g] -= 1

    def occupied(self) -> int:
        return int((self.pods > 0).sum())

    def stranded(self) -> float:
        used = self.pods > 0
        return float((MILLI_PER_GPU - self.real[used]).sum() / MILLI_PER_GPU)


def layout_gpus(milli: np.ndarray, time_limit_s: float = 30.0) -> tuple[int, float, int]:
    """Fewest GPUs cut in valid milli layouts that hold requests ``milli`` (the planner's rows).

    Returns
    -------
    gpus
        GPUs the best layout counts found use. [-]
    stranded
        Their milli left idle, in GPUs. [GPU]
    step
        Rounding step of the sizes (1: exact). [1/1000 GPU]
    """
    import pulp

    if not len(milli):
        return 0, 0.0, 1
    kind, sizes, step = milli_kinds(milli)
    lays = milli_layouts(sizes)
    need = [int((kind == s).sum()) for s in sizes]
    lp = pulp.LpProblem("layouts", pulp.LpMinimize)
    w = [pulp.LpVariable(f"w{i}", 0, None, cat=pulp.LpInteger) for i in range(len(lays))]
    lp += pulp.lpSum(w)
    for k, n in enumerate(need):
        lp += pulp.lpSum(lay[k] * w[i] for i, lay in enumerate(lays) if lay[k]) >= n
    lp.solve(pulp.HiGHS(msg=False, timeLimit=time_limit_s))
    gpus = int(round(pulp.value(lp.objective)))
    return gpus, gpus - float(milli.sum()) / MILLI_PER_GPU, step


def replay(pods: pd.DataFrame, nodes: pd.DataFrame, rule: str, departures: bool) -> dict:
    """One replay of ``pods`` in arrival order under ``rule``; with or without departures."""
    c = Cluster(nodes)
    events = [(t, 1, i) for i, t in enumerate(pods["creation_time"])]
    if departures:
        events += [(t, 0, i) for i, t in enumerate(pods["deletion_time"])]
    events.sort()                                  # a departure before an arrival at one time
    held: dict[int, tuple[int, list]] = {}
    unplaced = unplaced_frac = 0
    peak_occ = 0
    area_str = area_occ = 0.0
    last_t = events[0][0]
    recs = list(pods.itertuples(index=False))
    for t, kind, i in events:
        area_str += c.stranded() * (t - last_t)
        area_occ += c.occupied() * (t - last_t)
        last_t = t
        pod = recs[i]
        if kind == 0:
            if i in held:
                node, taken = held.pop(i)
                c.release(pod, node, taken)
            continue
        got = c.place(pod, rule)
        if got is None:
            unplaced += 1
            unplaced_frac += int(pod.num_gpu == 1 and pod.gpu_milli < MILLI_PER_GPU)
            continue
        held[i] = got
        peak_occ = max(peak_occ, c.occupied())
    span = max(events[-1][0] - events[0][0], 1)
    return {"pods_unplaced": unplaced, "fractional_pods_unplaced": unplaced_frac,
            "gpus_occupied_peak": peak_occ, "gpus_occupied_end": c.occupied(),
            "stranded_gpus_end": round(c.stranded(), 2),
            "stranded_gpus_mean": round(area_str / span, 3),
            "gpus_occupied_mean": round(area_occ / span, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu_sharing.json")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    pods = pd.read_csv(a.data_dir / PODS)
    nodes = pd.read_csv(a.data_dir / NODES)
    pods = pods.sort_values(["creation_time", "name"], kind="stable").reset_index(drop=True)
    frac = (pods.num_gpu == 1) & (pods.gpu_milli < MILLI_PER_GPU)
    out: dict = {"pods": len(pods), "gpu_pods": int((pods.num_gpu > 0).sum()),
                 "fractional_pods": int(frac.sum()), "nodes": len(nodes),
                 "gpus": int(nodes.gpu.sum()), "published_fgd_fewer_unallocated_pct":
                 PUBLISHED_FGD_PCT}
    for mode, dep in (("real", True), ("filled", False)):
        res = {r: replay(pods, nodes, r, dep) for r in RULES}
        w, b = res["whole"], res["best_fit"]
        key = "stranded_gpus_mean" if dep else "stranded_gpus_end"
        res["best_fit_fewer_stranded_pct"] = round(100 * (1 - b[key] / w[key]), 1) \
            if w[key] else None
        out[mode] = res
    # the planner's layout rows on the fractional pods the filled replay holds (all of them
    # under best fit when none is left out), and at the real replay's busiest moment
    gpus, stranded, step = layout_gpus(pods.loc[frac, "gpu_milli"].to_numpy(np.int64))
    out["filled"]["layouts_all_fractional"] = {
        "gpus": gpus, "stranded_gpus": round(stranded, 2), "size_step_milli": step,
        "whole_gpus": int(frac.sum()),
        "stranded_whole": round(float((MILLI_PER_GPU - pods.loc[frac, "gpu_milli"]).sum())
                                / MILLI_PER_GPU, 2)}
    ts = np.r_[pods.creation_time.to_numpy(), pods.deletion_time.to_numpy()]
    d = np.r_[frac.to_numpy(int), -frac.to_numpy(int)]
    o = np.lexsort((d, ts))
    t_peak = ts[o][int(np.argmax(np.cumsum(d[o])))]
    live = frac & (pods.creation_time <= t_peak) & (pods.deletion_time > t_peak)
    gpus, stranded, step = layout_gpus(pods.loc[live, "gpu_milli"].to_numpy(np.int64))
    out["real"]["layouts_at_fractional_peak"] = {
        "time_s": int(t_peak), "fractional_pods": int(live.sum()), "gpus": gpus,
        "stranded_gpus": round(stranded, 2), "size_step_milli": step}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["commit"] = git_commit(ROOT)
    out["python"] = platform.python_version()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
