r"""Fractional GPUs in the planner: MIG layouts, milli shares, slice capacity and its recount.

A site declares per GPU type how one GPU is shared (``sharing`` in the catalog,
:attr:`carbonsched.domain.GpuPool.sharing`):

* ``"mig"``: the GPU is cut into MIG GPU instances. Which instances fit together is not a sum
  of fractions: each profile may only start at certain memory slices
  (:data:`MIG_PLACEMENTS`, from the placements ``nvidia-smi mig -lgipp`` lists), instances may
  not overlap, and their compute slices add up to at most the GPU's (7 on A100/H100/H200, 4 on
  A30). Two ``3g.20gb`` fill an A100-40GB's eight memory slices with one compute slice free, so
  no ``1g.5gb`` fits beside them although 3 + 3 + 1 = 7.
* ``"milli"``: time-slicing or MPS shares, a job's ``gpu_milli`` thousandths; the jobs on one
  GPU hold at most 1000.

**Capacity in the model** (:func:`define_slice_constraints`). For a sharing pool ``(s, g)`` and
each slot :math:`t` in which a fractional option may run, integer :math:`w_{stl} \ge 0` counts
the GPUs cut in *layout* :math:`l` (a count vector :math:`n_{lk}` of slice kinds :math:`k` that
fits one GPU: a valid MIG layout, or a multiset of milli sizes summing to at most 1000; only
the maximal ones, over the kinds the jobs ask for). Then

* GPUs: :math:`\sum_{o \ni (s,t), \text{whole}} n_j x_o + \sum_l w_{stl} \le C_{stg}`;
* slices: :math:`\sum_{o \ni (s,t), k_o = k} x_o \le \sum_l n_{lk} w_{stl}` for every kind.

Every fractional job therefore sits in a slice of a GPU cut in a valid layout in every slot it
runs: capacity is never a sum of fractions (Gilmore & Gomory, "A linear programming approach
to the cutting-stock problem", Oper. Res. 9(6), 1961: patterns as columns). The milli rule is
safe by construction: a layout's sizes (the jobs' own ``gpu_milli``, or those rounded *up*
when there are too many distinct sizes, :data:`MAX_LAYOUTS`) sum to at most 1000.

**Slices for the whole run** (:func:`assign_runs`). The layouts hold per slot; a job keeps its
slice for its whole run (a MIG instance or a shared GPU is not migrated). After the solve every
fractional run gets a GPU of the pool (``gpu_index``) and, for MIG, a placement start
(``mig_start``), best fit first; a run for which no GPU stays free over its run (the per-slot
layouts could not be kept over consecutive hours) is left unplaced and named in the plan's
notes.

**Recount** (:func:`recount_slices`): from the placements alone, every slice at a valid start
of its profile, no two overlapping on one GPU, compute and media extensions within the GPU's,
milli shares at most 1000 on one GPU, GPU indices inside the pool, and the GPUs carrying slices
counted against the site's GPUs with the whole-GPU work.

Energy: a fractional job draws its share of the GPU's power
(:attr:`carbonsched.domain.Job.gpu_share`, an assumption: idle power of a shared GPU is not
modelled, as for whole GPUs). A fractional job at a site that does not share (or whose kind the
site does not offer: a ``gpu_milli`` job at a MIG site) takes a whole GPU, as before.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from carbonsched.domain import MIG_PROFILES, mig_compute_slices

MILLI_PER_GPU = 1000
"""Milli shares of one GPU (``gpu_milli`` 1..1000, as the Alibaba GPU-sharing trace). [1/1000]"""

_SEVEN = {  # profile position in MIG_PROFILES rows of the 7-compute-slice GPUs
    0: ((0, 1, 2, 3, 4, 5, 6), 1),   # 1g.<small>
    1: ((0, 1, 2, 3, 4, 5, 6), 1),   # 1g.<small>+me
    2: ((0, 2, 4, 6), 2),            # 1g.<large>
    3: ((0, 2, 4), 2),               # 2g
    4: ((0, 4), 4),                  # 3g
    5: ((0,), 4),                    # 4g
    6: ((0,), 8),                    # 7g (the whole GPU)
}
_A30 = {0: ((0, 1, 2, 3), 1), 1: ((0, 1, 2, 3), 1), 2: ((0, 2), 2), 3: ((0, 2), 2),
        4: ((0,), 4)}


def _placements(model: str) -> dict[str, tuple[tuple[int, ...], int]]:
    table = _A30 if model == "A30" else _SEVEN
    return {p: table[i] for i, p in enumerate(MIG_PROFILES[model])}


MIG_PLACEMENTS: dict[str, dict[str, tuple[tuple[int, ...], int]]] = {
    m: _placements(m) for m in MIG_PROFILES}
"""Valid placements of each MIG profile per GPU model: ``{profile: (starts, memory slices)}``.

An instance of the profile occupies memory slices ``start .. start + size - 1`` of the GPU's
:data:`MIG_MEMORY_SLICES`. Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG
Profiles" and the GPU instance profile placements listed by ``nvidia-smi mig -lgipp``
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), e.g. on an A100-40GB: 1g.5gb (and
1g.5gb+me) ``{0,1,2,3,4,5,6}:1``, 1g.10gb ``{0,2,4,6}:2``, 2g.10gb ``{0,2,4}:2``, 3g.20gb
``{0,4}:4``, 4g.20gb ``{0}:4``, 7g.40gb ``{0}:8``; the A100-80GB, H100, H100 NVL (94 GB) and
H200 have the same geometry with their memory sizes; the A30 has four memory slices:
1g.6gb ``{0,1,2,3}:1``, 2g.12gb ``{0,2}:2``, 4g.24gb ``{0}:4``."""

MIG_MEMORY_SLICES = {m: (4 if m == "A30" else 8) for m in MIG_PROFILES}
"""Memory slices of one GPU per MIG model (same source). [-]"""

MIG_COMPUTE_SLICES = {m: (4 if m == "A30" else 7) for m in MIG_PROFILES}
"""Compute slices of one GPU per MIG model (same source). [-]"""

MIG_MEDIA_EXTENSIONS = 1
"""``+me`` instances per GPU: the media extensions (NVDEC, NVJPG, OFA) go to one instance only
(same source, the ``+me`` profiles' "Instances Available: 1"). [-]"""

MAX_LAYOUTS = 400
"""Most layouts (columns per slot) one milli pool gets; with more distinct ``gpu_milli`` sizes
the sizes are rounded up to a coarser step (:data:`MILLI_STEPS`) until the layouts fit. A
design choice of this project (model size), not a cited constant. [-]"""

REPACK_BUDGET = 20_000
"""Most steps of the search that re-cuts one GPU's MIG slices to fit one more run
(:func:`assign_runs`); a design choice of this project (a bound on time), not a cited constant."""

MILLI_STEPS = (1, 10, 25, 50, 100, 125, 250, 500, 1000)
"""Steps [1/1000 GPU] ``gpu_milli`` sizes are rounded *up* to when a pool has too many layouts:
rounding up keeps every layout's real shares at most 1000."""


# ---------------------------------------------------------------------------------------------
# MIG layouts


def mig_fits(model: str, instances: list[tuple[str, int]]) -> list[str]:
    """Problems of MIG instances ``(profile, start)`` placed together on one GPU.

    Parameters
    ----------
    model
        A :data:`MIG_PLACEMENTS` row (``"A100-40GB"``).
    instances
        ``(profile, start)`` pairs, ``start`` the first memory slice.

    Returns
    -------
    list of str
        Empty when the instances fit: each at a valid start of its profile, no two sharing a
        memory slice, compute slices and ``+me`` instances within the GPU's.
    """
    table = MIG_PLACEMENTS[model]
    used = [False] * MIG_MEMORY_SLICES[model]
    compute = me = 0
    out = []
    for profile, start in instances:
        if profile not in table:
            out.append(f"{profile} is not a MIG profile of {model}")
            continue
        starts, size = table[profile]
        if start not in starts:
            out.append(f"{profile} cannot start at memory slice {start} on {model} "
                       f"(valid starts {list(starts)})")
            continue
        for i in range(start, start + size):
            if used[i]:
                out.append(f"{profile}@{start} overlaps memory slice {i}")
                break
            used[i] = True
        compute += mig_compute_slices(profile)
        me += profile.endswith("+me")
    if compute > MIG_COMPUTE_SLICES[model]:
        out.append(f"{compute} compute slices, more than {model}'s "
                   f"{MIG_COMPUTE_SLICES[model]}")
    if me > MIG_MEDIA_EXTENSIONS:
        out.append(f"{me} +me instances, more than {MIG_MEDIA_EXTENSIONS}")
    return out


@functools.cache
def _all_mig_placements(model: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    """Every valid set of instances on one GPU of ``model`` (depth-first over memory slices)."""
    table = MIG_PLACEMENTS[model]
    n_mem = MIG_MEMORY_SLICES[model]
    out: list[tuple[tuple[str, int], ...]] = []

    def walk(pos: int, chosen: tuple[tuple[str, int], ...], compute: int, me: int) -> None:
        if pos >= n_mem:
            out.append(chosen)
            return
        walk(pos + 1, chosen, compute, me)           # leave this memory slice empty
        for profile, (starts, size) in table.items():
            c = compute + mig_compute_slices(profile)
            e = me + profile.endswith("+me")
            if pos in starts and pos + size <= n_mem and c <= MIG_COMPUTE_SLICES[model] \
                    and e <= MIG_MEDIA_EXTENSIONS:
                walk(pos + size, chosen + ((profile, pos),), c, e)

    walk(0, (), 0, 0)
    return tuple(out)


def mig_layout_valid(model: str, counts: dict[str, int]) -> bool:
    """Whether instances of the given profiles, ``{profile: count}``, fit one GPU of ``model``.

    A layout is valid when some placement of the instances at valid starts
    (:data:`MIG_PLACEMENTS`) keeps them apart within the GPU's compute slices
    (:func:`mig_fits`); e.g. on an A100-40GB ``{"4g.20gb": 1, "3g.20gb": 1}`` is valid,
    ``{"4g.20gb": 2}`` and ``{"3g.20gb": 2, "1g.5gb": 1}`` are not.
    """
    want = {k: v for k, v in counts.items() if v}
    for pl in _all_mig_placements(model):
        got: dict[str, int] = {}
        for p, _s in pl:
            got[p] = got.get(p, 0) + 1
        if got == want:
            return True
    return False


def _maximal(vectors: set[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The count vectors no other vector dominates (drop the all-zero one)."""
    vs = sorted(vectors, key=lambda v: -sum(v))
    out: list[tuple[int, ...]] = []
    for v in vs:
        if not any(v) or any(all(a >= b for a, b in zip(u, v, strict=True)) for u in out):
            continue
        out.append(v)
    return out


@functools.cache
def mig_layouts(model: str, profiles: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """Maximal valid layouts of one GPU over ``profiles``: count vectors in their order."""
    vecs = set()
    for pl in _all_mig_placements(model):
        v = [0] * len(profiles)
        for p, _s in pl:
            if p in profiles:
                v[profiles.index(p)] += 1
        vecs.add(tuple(v))
    return tuple(_maximal(vecs))


# ---------------------------------------------------------------------------------------------
# milli layouts


@functools.cache
def milli_layouts(sizes: tuple[int, ...], limit: int = MAX_LAYOUTS
                  ) -> tuple[tuple[int, ...], ...] | None:
    """Maximal multisets of ``sizes`` [1/1000 GPU] summing to at most 1000, as count vectors.

    ``None`` when there are more than ``limit`` (the caller coarsens the sizes).
    """
    out: list[tuple[int, ...]] = []
    smallest = min(sizes)

    def walk(i: int, room: int, v: list[int]) -> bool:
        if i == len(sizes):
            # maximal: no size fits the room left
            if room < smallest or all(s > room for s in sizes):
                out.append(tuple(v))
            else:
                return True
            return len(out) <= limit
        for c in range(room // sizes[i], -1, -1):
            v[i] = c
            if not walk(i + 1, room - c * sizes[i], v):
                return False
        v[i] = 0
        return True

    if not walk(0, MILLI_PER_GPU, [0] * len(sizes)):
        return None
    return tuple(v for v in _maximal(set(out)))


def milli_kinds(milli: np.ndarray) -> tuple[np.ndarray, tuple[int, ...], int]:
    """Sizes the model packs a pool's ``gpu_milli`` requests as, rounded up as little as fits.

    Returns
    -------
    kind_milli
        Per request, its (possibly rounded-up) size. [1/1000 GPU]
    sizes
        Distinct sizes, ascending.
    step
        The rounding step used (1: the requests' own sizes). [1/1000 GPU]
    """
    for step in MILLI_STEPS:
        k = np.minimum(-(-milli // step) * step, MILLI_PER_GPU)
        sizes = tuple(sorted({int(x) for x in k}))
        if milli_layouts(sizes) is not None:
            return k, sizes, step
    raise AssertionError("one size per GPU always has one layout")


# ---------------------------------------------------------------------------------------------
# which jobs are sliced where


@dataclass(frozen=True)
class SliceKind:
    """What one fractional job asks of a sharing pool: a MIG profile or a milli share."""

    sharing: str
    """``"mig"`` or ``"milli"``."""
    profile: str | None = None
    milli: int | None = None


def job_slice(job: Any, site: Any) -> SliceKind | None:
    """The slice a job takes at a site, or ``None`` when it takes whole GPUs there.

    A one-GPU job with ``mig_profile`` at a pool with ``sharing = "mig"`` whose model offers the
    profile, or with ``gpu_milli`` at a pool with ``sharing = "milli"``: its milli share is the
    whole shares the site's scheduler gives it (:meth:`carbonsched.domain.GpuPool.booked_milli`,
    250 milli on 10 shares per GPU is booked as 300), so the layouts hold what dispatch asks for.
    """
    if not _fractional(job):
        return None
    pl = job.payload
    pool = site.gpus.get(job.gpu_type)
    if pool is None or pool.sharing is None:
        return None
    if pool.sharing == "milli" and pl.gpu_milli is not None:
        return SliceKind("milli", milli=pool.booked_milli(int(pl.gpu_milli)))
    if pool.sharing == "mig" and pl.mig_profile is not None \
            and pl.mig_profile in MIG_PLACEMENTS.get(pool.mig_model or "", {}):
        return SliceKind("mig", profile=pl.mig_profile)
    return None


def sliced_options(sets: Any, options: np.ndarray) -> np.ndarray:
    """Which options ``(job, site, start)`` run in a slice (:func:`job_slice`), shape ``(O,)``.

    All ``False`` (and fast) when no pool shares GPUs or no job is fractional.
    """
    out = np.zeros(len(options), dtype=bool)
    prob = sets.problem
    if not len(options) or not any(p.sharing for s in prob.sites for p in s.gpus.values()):
        return out
    frac = np.array([_fractional(j) for j in prob.jobs], dtype=bool)
    if not frac.any():
        return out
    cand = np.flatnonzero(frac[options[:, 0]])
    for i in cand.tolist():
        j, s = int(options[i, 0]), int(options[i, 1])
        out[i] = job_slice(prob.jobs[j], prob.sites[s]) is not None
    return out


def _fractional(job: Any) -> bool:
    """A one-GPU, one-piece job asking for part of a GPU (the only kind sliced)."""
    pl = getattr(job, "payload", None)
    return pl is not None and pl.fractional and job.gpus == 1 and job.max_pieces == 1


# ---------------------------------------------------------------------------------------------
# the model's slice rows


def _pool_kinds(sets: Any, s: int, g: int, jobs: np.ndarray,
                extra: list[SliceKind] | None = None) -> tuple[list[Any], list[tuple]]:
    """Kinds (job → kind index) and maximal layouts of pool ``(s, g)`` for ``jobs``.

    ``extra`` kinds (running slices) get their kind indices after the jobs'.
    """
    prob = sets.problem
    site = prob.sites[s]
    pool = site.gpus[sets.gpu_type[g]]
    ks = [job_slice(prob.jobs[int(j)], site) for j in jobs] + list(extra or [])
    if pool.sharing == "mig":
        profiles = tuple(sorted({k.profile for k in ks}, key=lambda p: (
            mig_compute_slices(p), MIG_PROFILES[pool.mig_model].index(p))))
        kind = [profiles.index(k.profile) for k in ks]
        return kind, list(mig_layouts(pool.mig_model, profiles))
    milli = np.array([k.milli for k in ks], dtype=np.int64)
    kmilli, sizes, step = milli_kinds(milli)
    if step > 1:
        sets.notes.append(
            f"slices: {len(set(milli.tolist()))} distinct gpu_milli sizes at site "
            f"{sets.site[s]!r} ({sets.gpu_type[g]}) were packed rounded up to a step of "
            f"{step} milli (at most {MAX_LAYOUTS} layouts per GPU)")
    kind = [sizes.index(int(x)) for x in kmilli]
    return kind, list(milli_layouts(sizes))


def define_slice_constraints(m: Any, cells: dict[tuple, list]) -> set[tuple]:
    """Slice rows of every sharing pool's (site, slot, type) cell with a sliced option.

    Parameters
    ----------
    m
        The :class:`~carbonsched.plan.model.PlanModel` being built (its ``x`` and ``options``).
    cells
        The capacity terms per ``(site, slot, type)`` of whole-GPU work (sliced options left
        out): each handled cell's GPU row is written here with the layout counts added.

    Returns
    -------
    set of tuple
        The ``(site, slot, type)`` cells whose GPU row this wrote (the caller skips them).
    """
    import pulp

    sets = m.sets
    mask = sliced_options(sets, m.options)
    if not mask.any():
        return set()
    opts = m.options
    idx = np.flatnonzero(mask)
    gt = sets.job_gtype[opts[idx, 0]]
    handled: set[tuple] = set()
    for s, g in sorted({(int(a), int(b)) for a, b in zip(opts[idx, 1], gt, strict=True)}):
        here = idx[(opts[idx, 1] == s) & (gt == g)]
        jobs = np.unique(opts[here, 0])
        running = _running_slices(sets, s, g)
        kind_of_job, layouts = _pool_kinds(sets, s, g, jobs, [k for k, _a, _b in running])
        kind = dict(zip(jobs.tolist(), kind_of_job[:len(jobs)], strict=True))
        by_slot: dict[int, dict[int, list]] = {}
        for o in here.tolist():
            j, t0 = int(opts[o, 0]), int(opts[o, 2])
            for t in range(t0, t0 + int(sets.job_dur[j])):
                by_slot.setdefault(t, {}).setdefault(kind[j], []).append((m.x[o], 1))
        held: dict[int, dict[int, int]] = {}   # running slices per slot and kind (fixed)
        for (_k, a, b), k in zip(running, kind_of_job[len(jobs):], strict=True):
            for t in range(a, b):
                if t in by_slot:
                    by_slot[t].setdefault(k, [])
                    held.setdefault(t, {})[k] = held.get(t, {}).get(k, 0) + 1
        run_sliced = _running_sliced(sets, *sets.gpu_cap.shape)
        for t, kinds in sorted(by_slot.items()):
            # GPUs carrying running slices come back to the pool: the layouts hold them
            cap = int(sets.gpu_cap[s, t, g] + run_sliced[s, t, g])
            useful = [li for li, lay in enumerate(layouts) if any(lay[k] for k in kinds)]
            w = [m.lp.add_variable(f"w{s}_{t}_{g}_{li}", 0, cap, cat=pulp.LpInteger)
                 for li in useful]
            m.slice_w[(s, t, g)] = dict(zip(useful, w, strict=True))
            row = list(cells.get((s, t, g), [])) + [(v, 1) for v in w]
            m.lp.addConstraint(pulp.LpAffineExpression(row) <= cap, name=f"cap{s}_{t}_{g}")
            for k, terms in sorted(kinds.items()):
                have = [(v, -layouts[li][k]) for li, v in zip(useful, w, strict=True)
                        if layouts[li][k]]
                m.lp.addConstraint(pulp.LpAffineExpression(terms + have)
                                   <= -held.get(t, {}).get(k, 0),
                                   name=f"slice{s}_{t}_{g}_{k}")
            handled.add((s, t, g))
    return handled


# ---------------------------------------------------------------------------------------------
# slices for whole runs


class _Gpu:
    """One GPU of a sharing pool over the slots: milli used, or MIG memory/compute/me used."""

    def __init__(self, n_t: int, model: str | None) -> None:
        self.model = model
        self.milli = np.zeros(n_t, dtype=np.int64)
        self.mem = np.zeros((n_t, MIG_MEMORY_SLICES.get(model or "", 0)), dtype=bool)
        self.compute = np.zeros(n_t, dtype=np.int64)
        self.me = np.zeros(n_t, dtype=np.int64)
        self.busy = np.zeros(n_t, dtype=bool)
        self.items: list[tuple[int, SliceKind, int, int, int | None]] = []
        """Runs on this GPU: ``(run, kind, first slot, end slot, MIG start)``."""

    def mig_start(self, profile: str, a: int, b: int) -> int | None:
        starts, size = MIG_PLACEMENTS[self.model][profile]
        c = mig_compute_slices(profile)
        if (self.compute[a:b] + c > MIG_COMPUTE_SLICES[self.model]).any():
            return None
        if profile.endswith("+me") and (self.me[a:b] >= MIG_MEDIA_EXTENSIONS).any():
            return None
        # from the top: the low memory slices stay free for the profiles that may only start
        # at 0 (4g, 7g) or at 0 and 4 (3g)
        for st in reversed(starts):
            if not self.mem[a:b, st:st + size].any():
                return st
        return None

    def repack_with(self, run: int, kind: SliceKind, a: int, b: int,
                    budget: int = REPACK_BUDGET) -> dict[int, int] | None:
        """MIG starts for this GPU's runs and one more, all kept apart in every slot.

        A depth-first search over the runs (earliest first, largest first) and the valid
        starts of each, at most ``budget`` steps. Returns ``{run: start}`` and re-cuts the GPU,
        or ``None`` (nothing changed) when no placement is found.
        """
        items = sorted(self.items + [(run, kind, a, b, None)],
                       key=lambda x: (x[2], -mig_compute_slices(x[1].profile), x[0]))
        fresh = _Gpu(len(self.busy), self.model)
        steps = [0]
        out: dict[int, int] = {}

        def walk(n: int) -> bool:
            if n == len(items):
                return True
            r, k, lo, hi, _st = items[n]
            starts, size = MIG_PLACEMENTS[self.model][k.profile]
            c = mig_compute_slices(k.profile)
            if (fresh.compute[lo:hi] + c > MIG_COMPUTE_SLICES[self.model]).any() or (
                    k.profile.endswith("+me")
                    and (fresh.me[lo:hi] >= MIG_MEDIA_EXTENSIONS).any()):
                return False
            # a running slice (run < 0, committed by an earlier run) keeps its start
            for st in reversed(starts if r >= 0 or _st is None else (_st,)):
                steps[0] += 1
                if steps[0] > budget:
                    return False
                if fresh.mem[lo:hi, st:st + size].any():
                    continue
                fresh.mem[lo:hi, st:st + size] = True
                fresh.compute[lo:hi] += c
                fresh.me[lo:hi] += k.profile.endswith("+me")
                out[r] = st
                if walk(n + 1):
                    return True
                fresh.mem[lo:hi, st:st + size] = False
                fresh.compute[lo:hi] -= c
                fresh.me[lo:hi] -= k.profile.endswith("+me")
            return False

        if not walk(0):
            return None
        self.__init__(len(self.busy), self.model)
        for r, k, lo, hi, _st in items:
            self.take(k, lo, hi, out[r], r)
        return out

    def take(self, kind: SliceKind, a: int, b: int, start: int | None, run: int = -1) -> None:
        self.items.append((run, kind, a, b, start))
        self.busy[a:b] = True
        if kind.sharing == "milli":
            self.milli[a:b] += kind.milli
            return
        _starts, size = MIG_PLACEMENTS[self.model][kind.profile]
        self.mem[a:b, start:start + size] = True
        self.compute[a:b] += mig_compute_slices(kind.profile)
        self.me[a:b] += kind.profile.endswith("+me")

    def load(self, a: int, b: int) -> int:
        return int(self.milli[a:b].sum() + self.compute[a:b].sum())


def _running_slots(sets: Any, r: Any, n_t: int) -> tuple[int, int]:
    """Slots ``a..b-1`` running work holds (as :func:`carbonsched.plan.sets` counts them)."""
    import pandas as pd

    slot = pd.Timedelta(minutes=int(sets.slot_minutes))
    t0 = sets.slot[0]
    a = 0 if r.start is None else max(int(np.floor((r.start - t0) / slot)), 0)
    return a, min(int(np.ceil((r.end - t0) / slot - 1e-9)), n_t)


def _running_kind(r: Any, pool: Any) -> SliceKind:
    """A running slice's kind; a milli share booked as its whole shares (:func:`job_slice`)."""
    if r.mig_profile is not None:
        return SliceKind("mig", profile=r.mig_profile)
    return SliceKind("milli", milli=(pool.booked_milli(int(r.gpu_milli)) if pool is not None
                                     else int(r.gpu_milli)))


def _running_sliced(sets: Any, n_s: int, n_t: int, n_g: int) -> np.ndarray:
    out = getattr(sets, "running_sliced_gpus", None)
    if out is None or out.shape != (n_s, n_t, n_g):
        return np.zeros((n_s, n_t, n_g), dtype=np.int64)
    return out


def _running_slices(sets: Any, s: int, g: int) -> list[tuple[SliceKind, int, int]]:
    """Running slices at pool ``(s, g)``: ``(kind, first slot, end slot)``."""
    n_t = sets.gpu_cap.shape[1]
    out = []
    for r in getattr(sets.problem, "running", ()) or ():
        if r.gpu_index is not None and r.site == sets.site[s] \
                and r.gpu_type == sets.gpu_type[g]:
            a, b = _running_slots(sets, r, n_t)
            if b > a:
                out.append((_running_kind(r, sets.problem.sites[s].gpus.get(r.gpu_type)),
                            a, b))
    return out


def _load_running(sets: Any, pools: dict[tuple[int, int], list[_Gpu]], book: Any,
                  n_t: int) -> None:
    """Book the slices of running work on their GPUs (kept where they are)."""
    spos = {s: i for i, s in enumerate(sets.site)}
    gpos = {g: i for i, g in enumerate(sets.gpu_type)}
    prob = sets.problem
    for n, r in enumerate(getattr(prob, "running", ()) or ()):
        if r.gpu_index is None or r.site not in spos or r.gpu_type not in gpos:
            continue
        s, g = spos[r.site], gpos[r.gpu_type]
        a, b = _running_slots(sets, r, n_t)
        if b <= a:
            continue
        pool = prob.sites[s].gpus[r.gpu_type]
        gpus = pools.setdefault((s, g), [])
        while len(gpus) <= r.gpu_index:
            gpus.append(_Gpu(n_t, pool.mig_model))
        book.take_slice(s, g, r.gpu_index, gpus[r.gpu_index].busy[a:b].copy(), a, b)
        gpus[r.gpu_index].take(_running_kind(r, pool), a, b, r.mig_start, -1 - n)


class _DomainBook:
    """One book of GPUs per (site, type, network domain, slot) for slices and bound gangs.

    Topology-bound gangs (:attr:`carbonsched.domain.Job.max_domains`) are given their domains
    first (the solver's where they fit, else :func:`carbonsched.plan.domains.fit_gang`); a
    slice may then take a GPU only where its domain (:meth:`~carbonsched.plan.domains.
    DomainPool.domain_of`) keeps a GPU free in every slot the GPU starts carrying slices. Work
    without a topology constraint is held by the pool's row (``room`` in :func:`assign_runs`).
    """

    def __init__(self, sets: Any, n_t: int) -> None:
        from carbonsched.plan.domains import domain_pools

        self.sets = sets
        self.n_t = n_t
        self.pools = domain_pools(sets.problem)
        self.used: dict[tuple[int, int], np.ndarray] = {}

    def _pool(self, s: int, g: int) -> Any:
        return self.pools[(self.sets.site[s], self.sets.gpu_type[g])]

    def _used(self, s: int, g: int) -> np.ndarray:
        key = (s, g)
        if key not in self.used:
            self.used[key] = np.zeros((len(self._pool(s, g).nodes), self.n_t), np.int64)
        return self.used[key]

    def place_gangs(self, runs: list[Any], given: dict[str, tuple[int, ...]]
                    ) -> dict[int, tuple[int, ...]]:
        """Domains of the bound gangs' runs (largest first); a run none holds gets none."""
        from carbonsched.plan.domains import fit_gang, gang_nodes

        prob = self.sets.problem
        spos = {s: i for i, s in enumerate(self.sets.site)}
        gpos = {g: i for i, g in enumerate(self.sets.gpu_type)}
        for w in getattr(prob, "running", ()) or ():
            # a running gang holds its domains' GPUs
            if w.domains and w.site in spos and w.gpu_type in gpos:
                s, g = spos[w.site], gpos[w.gpu_type]
                pool = self._pool(s, g)
                a, b = _running_slots(self.sets, w, self.n_t)
                per = w.gpus // max(len(w.domains), 1)
                for d in w.domains:
                    if 0 <= d < len(pool.nodes) and b > a:
                        self._used(s, g)[d, a:b] += per
        out: dict[int, tuple[int, ...]] = {}
        bound = [i for i, r in enumerate(runs) if prob.jobs[r.job].max_domains is not None]
        for i in sorted(bound, key=lambda i: (-prob.jobs[runs[i].job].gpus, i)):
            r = runs[i]
            job = prob.jobs[r.job]
            g = int(self.sets.job_gtype[r.job])
            pool = self._pool(r.site, g)
            a = r.start
            b = min(a + -(-r.minutes // self.sets.slot_minutes), self.n_t)
            u = self._used(r.site, g)
            free = (pool.gpus[:, None] - u[:, a:b]).min(axis=1) if b > a else pool.gpus
            _n, per = gang_nodes(job, pool)
            doms = list(given.get(job.id, ()))
            if doms and not all(0 <= d < len(pool.nodes) for d in doms):
                doms = []
            if doms and (np.bincount(doms, minlength=len(pool.nodes)) * per > free).any():
                doms = []
            doms = doms or fit_gang(job, pool, free)
            if doms:
                for d in doms:
                    u[d, a:b] += per
                out[i] = tuple(sorted(doms))
        return out

    def slice_fits(self, s: int, g: int, gi: int, busy: np.ndarray, a: int, b: int) -> bool:
        """Whether GPU ``gi``'s domain has a GPU free in every slot of ``a..b-1`` it is idle."""
        u = self._used(s, g)
        pool = self._pool(s, g)
        d = pool.domain_of(gi)
        return bool((u[d, a:b] + ~busy <= pool.gpus[d]).all())

    def take_slice(self, s: int, g: int, gi: int, busy: np.ndarray, a: int, b: int) -> None:
        """Book GPU ``gi`` in the slots of ``a..b-1`` where it was idle (``~busy``)."""
        self._used(s, g)[self._pool(s, g).domain_of(gi), a:b] += ~busy

    def idle_gpu(self, s: int, g: int, gpus: list[_Gpu], count: int, a: int, b: int
                 ) -> int | None:
        """The first GPU index idle over ``a..b-1`` whose domain has room, else ``None``."""
        idle = np.ones(b - a, dtype=bool)
        for n, gpu in enumerate(gpus):
            if not gpu.busy[a:b].any() and self.slice_fits(s, g, n, ~idle, a, b):
                return n
        pool = self._pool(s, g)
        for d in range(len(pool.nodes)):
            n = max(pool.first_gpu(d), len(gpus))
            if n < min(count, pool.first_gpu(d) + int(pool.gpus[d])) \
                    and self.slice_fits(s, g, n, ~idle, a, b):
                return n
        return None


def _spare(gpu: _Gpu, room: np.ndarray, a: int, b: int) -> bool:
    """Whether ``gpu`` may take a run over slots ``a..b-1``.

    In every slot it is idle in, the pool must have ``room`` (GPUs left by whole-GPU work and
    GPUs already carrying slices).
    """
    return bool((room - ~gpu.busy[a:b] >= 0).all())


def assign_runs(sets: Any, runs: list[Any], inf_alloc: np.ndarray,
                domains: dict[str, tuple[int, ...]] | None = None
                ) -> tuple[list[Any], dict[int, tuple[int, int | None]], list[int], int,
                           dict[int, tuple[int, ...]]]:
    """Give every fractional run at a sharing pool one GPU (and MIG start) for its whole run.

    Best fit: the GPU already carrying slices with the most load over the run that still
    has room in every slot of it (MIG starts from the top, so the low memory slices stay free
    for 4g/7g instances); for MIG, else such a GPU with its slices moved to other valid starts
    (a bounded search, :data:`REPACK_BUDGET`); else the first GPU of the pool idle over the run
    while the pool's whole-GPU work, running work, inference and GPUs carrying slices leave one
    free. A run none of these holds is moved to the cheapest other start of its window where
    one does and the site's power row has room; else it is left out.

    Parameters
    ----------
    sets
        The compiled :class:`~carbonsched.plan.sets.PlanSets`.
    runs
        The plan's :class:`~carbonsched.plan.result.Run` list.
    inf_alloc
        ``(D, S)`` inference GPUs per demand and site (whole GPUs).
    domains
        Job id -> domain per node the solver chose for topology-bound gangs
        (:func:`carbonsched.plan.domains.read_domains`); kept where the book has room.

    Returns
    -------
    kept
        The runs, without those left out.
    slice_of
        Position in ``kept`` → ``(gpu_index, mig_start)``.
    dropped
        Job positions of runs no GPU stayed free for over their whole run, at their own start
        or at any other start of their window where the site's power allows (tried cheapest
        first).
    moved
        How many runs were moved to another start for a GPU to keep them.
    gang_domains
        Position in ``kept`` -> domain per node of each topology-bound gang at a pool of
        GPU-sharing (:class:`_DomainBook`: gangs and slices draw from one book of GPUs per
        domain and slot, so a slice never takes a GPU of a domain a gang fills).
    """
    prob = sets.problem
    if not any(p.sharing for s in prob.sites for p in s.gpus.values()):
        return runs, {}, [], 0, {}
    kinds = [job_slice(prob.jobs[r.job], prob.sites[r.site]) if r.pieces == 1 else None
             for r in runs]
    if not any(kinds):
        return runs, {}, [], 0, {}
    n_s, n_t, n_g = sets.gpu_cap.shape
    book = _DomainBook(sets, n_t)
    gang_of = book.place_gangs(runs, domains or {})
    whole = np.zeros((n_s, n_t, n_g), dtype=np.int64)
    for r, k in zip(runs, kinds, strict=True):
        if k is None:
            a = r.start
            b = a + -(-r.minutes // sets.slot_minutes)
            whole[r.site, a:min(b, n_t), sets.job_gtype[r.job]] += prob.jobs[r.job].gpus
    sph = sets.slots_per_hour
    for d, s in zip(*np.nonzero(inf_alloc > 0), strict=True):
        t = int(sets.inf_hour[d])
        whole[s, t:t + sph, sets.inf_gtype[d]] += int(inf_alloc[d, s])
    # GPUs carrying running slices are held in gpu_cap; they are booked below as GPUs of the
    # pool already busy, where new slices may share them (their slices never move)
    free = sets.gpu_cap + _running_sliced(sets, n_s, n_t, n_g) - whole
    pools: dict[tuple[int, int], list[_Gpu]] = {}
    _load_running(sets, pools, book, n_t)
    order = sorted((i for i, k in enumerate(kinds) if k is not None),
                   key=lambda i: (runs[i].start, -prob.jobs[runs[i].job].gpu_share,
                                  runs[i].job))
    placed: dict[int, tuple[int, int | None]] = {}
    dropped: list[int] = []

    def fit(i: int, k: SliceKind, site: int, g: int, a: int, b: int) -> bool:
        """Give run ``i`` a GPU of pool ``(site, g)`` over slots ``a..b-1``; False if none."""
        pool = prob.sites[site].gpus[sets.gpu_type[g]]
        gpus = pools.setdefault((site, g), [])
        # GPUs carrying slices in each slot of the run: a GPU idle in some of them that takes
        # the run is one more GPU there, within what whole-GPU work leaves
        in_use = np.zeros(b - a, dtype=np.int64)
        for gpu in gpus:
            in_use += gpu.busy[a:b]
        room = free[site, a:b, g] - in_use
        best = None
        for gi, gpu in enumerate(gpus):
            if not gpu.busy[a:b].any() or not _spare(gpu, room, a, b) \
                    or not book.slice_fits(site, g, gi, gpu.busy[a:b], a, b):
                continue
            if k.sharing == "milli":
                ok = not (gpu.milli[a:b] + k.milli > MILLI_PER_GPU).any()
                st = None
            else:
                st = gpu.mig_start(k.profile, a, b)
                ok = st is not None
            if ok and (best is None or gpu.load(a, b) > best[2]):
                best = (gi, st, gpu.load(a, b))
        if best is None and k.sharing == "mig":
            # a GPU already cut may still hold it with its slices moved (placed together)
            for gi in sorted((n for n, gpu in enumerate(gpus)
                              if gpu.busy[a:b].any() and _spare(gpu, room, a, b)
                              and book.slice_fits(site, g, n, gpu.busy[a:b], a, b)),
                             key=lambda n: -gpus[n].load(a, b)):
                was = gpus[gi].busy[a:b].copy()
                moved = gpus[gi].repack_with(i, k, a, b)
                if moved is not None:
                    book.take_slice(site, g, gi, was, a, b)
                    placed.update({r_: (gi, st_) for r_, st_ in moved.items() if r_ >= 0})
                    return True
        if best is None:
            if (room < 1).any():
                return False
            gi = book.idle_gpu(site, g, gpus, pool.count, a, b)
            if gi is None:
                return False
            while len(gpus) <= gi:
                gpus.append(_Gpu(n_t, pool.mig_model))
            st = gpus[gi].mig_start(k.profile, a, b) if k.sharing == "mig" else None
            best = (gi, st, 0)
        book.take_slice(site, g, best[0], gpus[best[0]].busy[a:b].copy(), a, b)
        gpus[best[0]].take(k, a, b, best[1], i)
        placed[i] = (best[0], best[1])
        return True

    for i in order:
        r = runs[i]
        g = int(sets.job_gtype[r.job])
        if not fit(i, kinds[i], r.site, g, r.start, min(r.start + int(sets.job_dur[r.job]), n_t)):
            dropped.append(i)
    runs = list(runs)
    moved_runs = _reinsert(sets, runs, kinds, dropped, inf_alloc, fit)
    dropped = [i for i in dropped if i not in moved_runs]
    kept, slice_of, doms_of = [], {}, {}
    for i, r in enumerate(runs):
        if i in dropped:
            continue
        if i in placed:
            slice_of[len(kept)] = placed[i]
        if i in gang_of:
            doms_of[len(kept)] = gang_of[i]
        kept.append(r)
    return kept, slice_of, sorted(runs[i].job for i in dropped), len(moved_runs), doms_of


def _reinsert(sets: Any, runs: list[Any], kinds: list[SliceKind | None], dropped: list[int],
              inf_alloc: np.ndarray, fit: Any) -> set[int]:
    """Move runs no GPU could keep to another start of their window where one can.

    Starts are tried cheapest first (PUE × CI summed over the run's slots) among those whose
    IT power fits the site's power row with the plan's other work (runs and inference); a
    moved run replaces its entry in ``runs``. Returns the positions moved.
    """
    import dataclasses

    if not dropped:
        return set()
    n_s, n_t = sets.power_rhs_kw.shape
    load = np.zeros((n_s, n_t))
    gone = set(dropped)
    for i, r in enumerate(runs):
        if i not in gone:
            b = min(r.start + -(-r.minutes // sets.slot_minutes), n_t)
            load[r.site, r.start:b] += sets.job_kw[r.job]
    sph = sets.slots_per_hour
    for d, s in zip(*np.nonzero(inf_alloc > 0), strict=True):
        t = int(sets.inf_hour[d])
        load[s, t:t + sph] += inf_alloc[d, s] * sets.inf_kw_per_gpu[d]
    cost = sets.cost_per_kwh
    moved: set[int] = set()
    for i in dropped:
        r = runs[i]
        j, s, dur = r.job, r.site, int(sets.job_dur[r.job])
        g = int(sets.job_gtype[j])
        kw = float(sets.job_kw[j])
        starts = [t for t in range(int(sets.job_first[j]), int(sets.job_last[j]) + 1)
                  if t != r.start and t + dur <= n_t
                  and (load[s, t:t + dur] + kw <= sets.power_rhs_kw[s, t:t + dur] + 1e-9).all()]
        for t in sorted(starts, key=lambda t: (float(cost[s, t:t + dur].sum()), t)):
            if fit(i, kinds[i], s, g, t, t + dur):
                runs[i] = dataclasses.replace(r, start=t)
                load[s, t:t + dur] += kw
                moved.add(i)
                break
    return moved


# ---------------------------------------------------------------------------------------------
# the recount and the site-hour summary


@dataclass
class SliceCount:
    """Slices of a plan recounted from its placements (:func:`recount_slices`).

    Attributes
    ----------
    sliced_gpus
        GPUs carrying slices per (site, slot, type), shape ``(S, T, G)``. [-]
    violations
        Slice cells broken (a slice at an invalid start, overlapping, over the compute or
        ``+me`` of its GPU, milli over 1000 on one GPU, a GPU index outside the pool, a slice of
        a kind the site does not offer): one per (site, slot, type, GPU) cell. [-]
    used
        ``{(site, slot): {kind: count}}``: MIG instances by profile, ``gpu_milli`` summed.
    stranded_gpus
        GPU capacity held but unused per (site, slot): on GPUs carrying slices, the compute
        (MIG) or milli share left idle; for a fractional job on a whole GPU, ``1 - share``.
        Shape ``(S, T)``. [GPU]
    problems
        The first few broken cells, in words.
    """

    sliced_gpus: np.ndarray
    violations: int
    used: dict[tuple[int, int], dict[str, int]]
    stranded_gpus: np.ndarray
    problems: list[str]


def recount_slices(sets: Any, problem: Any, placements: list[Any]) -> SliceCount:
    """Recount the slices of a plan from its placements alone, trusting none of its numbers.

    Parameters
    ----------
    sets
        :func:`~carbonsched.plan.sets.compile_sets` of ``problem`` (arrays only).
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem`.
    placements
        The plan's :class:`~carbonsched.domain.Placement` list; those with ``gpu_index``
        set are slices. Slices of running work (:attr:`carbonsched.domain.RunningWork.
        gpu_index`) are recounted with them on their GPUs.

    Returns
    -------
    SliceCount
    """
    n_s, n_t, n_g = sets.gpu_cap.shape
    spos = {s: i for i, s in enumerate(sets.site)}
    gpos = {g: i for i, g in enumerate(sets.gpu_type)}
    jobs = {j.id: j for j in problem.jobs}
    sm = int(sets.slot_minutes)
    t0 = sets.slot[0]
    cells: dict[tuple[int, int, int, int], list[tuple[Any, Any]]] = {}
    planned: set[tuple[int, int, int, int]] = set()     # GPU-hours this plan put a slice on
    used: dict[tuple[int, int], dict[str, int]] = {}
    stranded = np.zeros((n_s, n_t))
    bad: set[tuple] = set()
    problems: list[str] = []

    def flag(key: tuple, why: str) -> None:
        if key not in bad:
            bad.add(key)
            if len(problems) < 5:
                problems.append(why)

    for p in placements:
        job = jobs.get(p.job_id)
        if job is None or p.site not in spos or p.gpu_type not in gpos:
            continue
        s, g = spos[p.site], gpos[p.gpu_type]
        a = int(round((p.start - t0) / np.timedelta64(sm, "m")))
        minutes = int(round((p.end - p.start).total_seconds() / 60))
        b = min(a + -(-minutes // sm), n_t)
        a = max(a, 0)
        if p.gpu_index is None:
            if _fractional(job):
                stranded[s, a:b] += 1.0 - job.gpu_share
            continue
        site = problem.sites[s]
        kind = job_slice(job, site)
        pool = site.gpus.get(p.gpu_type)
        if kind is None or pool is None or not 0 <= p.gpu_index < pool.count:
            flag((s, g, p.gpu_index), f"job {p.job_id!r} at {p.site!r}: a slice on GPU "
                 f"{p.gpu_index} where the site offers no such slice or GPU")
            continue
        for t in range(a, b):
            cells.setdefault((s, t, g, p.gpu_index), []).append((kind, p.mig_start))
            planned.add((s, t, g, p.gpu_index))
            u = used.setdefault((s, t), {})
            name = kind.profile if kind.sharing == "mig" else "gpu_milli"
            u[name] = u.get(name, 0) + (1 if kind.sharing == "mig" else kind.milli)
    for r in getattr(problem, "running", ()) or ():
        # slices committed by an earlier run share their GPUs' layouts with this plan's
        if r.gpu_index is None or r.site not in spos or r.gpu_type not in gpos:
            continue
        s, g = spos[r.site], gpos[r.gpu_type]
        a, b = _running_slots(sets, r, n_t)
        kind = _running_kind(r, problem.sites[s].gpus.get(r.gpu_type))
        for t in range(a, b):
            cells.setdefault((s, t, g, r.gpu_index), []).append((kind, r.mig_start))
    sliced = np.zeros((n_s, n_t, n_g), dtype=np.int64)
    for (s, t, g, gi), items in cells.items():
        sliced[s, t, g] += 1
        pool = problem.sites[s].gpus[sets.gpu_type[g]]
        where = f"site {sets.site[s]!r} GPU {gi} ({sets.gpu_type[g]}) at {sets.slot[t]}"
        if pool.sharing == "milli":
            total = sum(k.milli for k, _ in items)
            # running slices alone over 1000 (committed under an earlier, smaller rounding of
            # the pool's shares) are not this plan's: it added none to that GPU-hour
            if (s, t, g, gi) in planned and (any(k.sharing != "milli" for k, _ in items)
                                              or total > MILLI_PER_GPU):
                flag((s, t, g, gi), f"{where}: {total} milli on one GPU (at most 1000, the "
                     "shares booked)")
            stranded[s, t] += max(MILLI_PER_GPU - total, 0) / MILLI_PER_GPU
            continue
        inst = [(k.profile, st) for k, st in items]
        why = mig_fits(pool.mig_model, inst) if all(st is not None for _, st in inst) \
            else ["a MIG slice without a start"]
        if why:
            flag((s, t, g, gi), f"{where}: invalid MIG layout "
                 f"{sorted((p, st) for p, st in inst)}: {'; '.join(why)}")
        c = sum(mig_compute_slices(p) for p, _ in inst)
        stranded[s, t] += max(MIG_COMPUTE_SLICES[pool.mig_model] - c, 0) / \
            MIG_COMPUTE_SLICES[pool.mig_model]
    return SliceCount(sliced_gpus=sliced, violations=len(bad), used=used,
                      stranded_gpus=stranded, problems=problems)


def layouts_in_use(count: SliceCount, s: int, t: int) -> dict[str, int]:
    """Slices used at site position ``s`` in slot ``t``.

    ``{profile: instances}`` and ``{"gpu_milli": total}``; empty when none.
    """
    return dict(sorted(count.used.get((s, t), {}).items()))


__all__ = ["MIG_PLACEMENTS", "MIG_MEMORY_SLICES", "MIG_COMPUTE_SLICES", "MILLI_PER_GPU",
           "SliceKind", "SliceCount", "job_slice", "sliced_options", "mig_fits",
           "mig_layout_valid", "mig_layouts", "milli_layouts", "milli_kinds",
           "define_slice_constraints", "assign_runs", "recount_slices", "layouts_in_use"]

