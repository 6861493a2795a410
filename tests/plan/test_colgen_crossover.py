"""Interior-point masters (issue 13).

The crossover runs only when the repair MIP can take what a vertex leaves fractional (on 10k
× 16 × 48 at load 0.8, seed 4, a 22.7 s crossover left 847 fractional classes, more than the
repair takes, and the plan ended 9.5 % above the bound). A master whose interior point ends
imprecise (HiGHS status Unknown) is used, not dropped (on 50k × 16 × 48 at load 0.3, seed 0,
the first one did, and the solve was left without a master: 5.84 % against 0.51 %).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from carbonsched.plan import colgen, solve_plan
from carbonsched.plan.colgen import binding_cells, job_classes, make_layout
from carbonsched.plan.sets import compile_sets

from .test_colgen_bound import two_gangs_three_gpus
from .test_colgen_refine import _crowded


def test_binding_cells_counts_cell_rows_above_the_threshold_only():
    sets = compile_sets(two_gangs_three_gpus())
    lay = make_layout(sets, job_classes(sets))
    scale = 50.0
    tol = colgen.BINDING_DUAL_REL * scale
    duals = np.zeros(lay.n_rows)
    duals[: lay.cap_base] = 7.0                       # assignment rows never count
    assert binding_cells(lay, duals, scale) == 0
    duals[lay.cap_base] = -tol                        # just at the threshold: not binding
    assert binding_cells(lay, duals, scale) == 0
    duals[lay.cap_base] = -tol * (1 + 1e-9)           # just above: binding
    duals[lay.pow_base] = -2 * tol                    # a power row counts too
    assert binding_cells(lay, duals, scale) == 2


def _spy(monkeypatch):
    """Record every HiGHS ``run_crossover`` setting of the solve."""
    seen: list[str] = []
    real = colgen._new_highs

    def new(threads, limit):
        h = real(threads, limit)
        set_option = h.setOptionValue

        def record(name, value):
            if name == "run_crossover":
                seen.append(value)
            return set_option(name, value)

        h.setOptionValue = record
        return h

    monkeypatch.setattr(colgen, "_new_highs", new)
    return seen


def _interior(monkeypatch, repair_max, crossover_at=1e9, final=True):
    """Colgen on :func:`_crowded` with interior masters; the HiGHS crossover settings, the
    counts :func:`binding_cells` returned (in call order) and the progress lines."""
    monkeypatch.setattr(colgen, "MASTER_SOLVER", "ipm")     # interior masters at any size
    # time for the final crossover, or never
    monkeypatch.setattr(colgen, "CROSSOVER_MIN_LEFT", 0.0 if final else 2.0)
    monkeypatch.setattr(colgen, "REPAIR_MAX_CLASSES", repair_max)
    # a first master far from the LP (no warm-up); 1e9 asks for the in-loop crossover at
    # once, so the second master would end at a vertex; -1 never
    monkeypatch.setattr(colgen, "WARMUP_SHARE", 0.0)
    monkeypatch.setattr(colgen, "CROSSOVER_AT", crossover_at)
    seen = _spy(monkeypatch)
    counts: list[int] = []
    real = colgen.binding_cells
    monkeypatch.setattr(colgen, "binding_cells",
                        lambda *a: counts.append(real(*a)) or counts[-1])
    said: list[str] = []
    res = solve_plan(_crowded(), method="colgen", mip_gap=0.0, time_limit_s=60,
                     progress=said.append)
    return res, seen, counts, said


def test_crossover_skipped_when_the_binding_rows_exceed_the_repair(monkeypatch):
    res, seen, counts, said = _interior(monkeypatch, 0)
    assert "on" not in seen                               # neither in the loop nor at the end
    m = re.search(r"crossover to a vertex skipped: (\d+) binding capacity, power and "
                  r"absorption rows at the LP optimum, more than the 0 classes", res.solver.note)
    assert m and int(m.group(1)) == counts[-1] > 0
    assert not any(s.startswith("crossover to a vertex:") for s in said)


@pytest.mark.parametrize("slack, runs", [(0, True), (-1, False)])
def test_final_crossover_at_the_limit(monkeypatch, slack, runs):
    _, _, counts, _ = _interior(monkeypatch, 0, crossover_at=-1)
    res, seen, _, said = _interior(monkeypatch, counts[-1] + slack, crossover_at=-1)
    assert ("on" in seen) == runs
    assert ("crossover to a vertex skipped" in res.solver.note) == (not runs)
    assert any(s.startswith("crossover to a vertex:") for s in said) == runs


@pytest.mark.parametrize("slack, runs", [(0, True), (-1, False)])
def test_crossover_in_the_loop_at_the_limit(monkeypatch, slack, runs):
    _, _, counts, _ = _interior(monkeypatch, 0, final=False)
    _, seen, _, _ = _interior(monkeypatch, counts[0] + slack, final=False)
    assert ("on" in seen) == runs


def _imprecise(monkeypatch, tol=None):
    """Colgen on :func:`_crowded` with an interior master told to stop at 1e-3, where IPX ends
    in HiGHS status Unknown; the primal infeasibilities :func:`usable_interior` saw."""
    monkeypatch.setattr(colgen, "MASTER_SOLVER", "ipm")
    monkeypatch.setattr(colgen, "IPM_TOL", 1e-3)
    if tol is not None:
        monkeypatch.setattr(colgen, "IMPRECISE_PRIMAL_TOL", tol)
    seen: list[float] = []
    real = colgen.usable_interior

    def spy(h):
        seen.append(h.getInfo().max_primal_infeasibility)
        return real(h)

    monkeypatch.setattr(colgen, "usable_interior", spy)
    return solve_plan(_crowded(), method="colgen", mip_gap=0.0, time_limit_s=60), seen


def test_an_imprecise_interior_master_is_used_not_dropped(monkeypatch):
    """Before: 'master LP stopped: Unknown ... no master LP solved in the budget'."""
    exact = solve_plan(_crowded(), method="milp", mip_gap=0.0)
    res, seen = _imprecise(monkeypatch)
    assert len(seen) >= 1
    assert "1 master LP(s) ended imprecise (HiGHS status Unknown" in res.solver.note
    assert "no master LP solved" not in res.solver.note
    assert "master LP stopped" not in res.solver.note
    assert res.solver.bound <= exact.totals["objective"] + 1e-9
    assert res.totals["objective"] == pytest.approx(exact.totals["objective"])


@pytest.mark.parametrize("factor, used", [(1.0, True), (1 - 1e-6, False)])
def test_imprecise_master_kept_up_to_the_primal_tolerance(monkeypatch, factor, used):
    _, seen = _imprecise(monkeypatch)
    assert seen[0] > 0
    res, _ = _imprecise(monkeypatch, tol=seen[0] * factor)
    assert ("ended imprecise" in res.solver.note) == used
    assert ("master LP stopped: Unknown" in res.solver.note) == (not used)
