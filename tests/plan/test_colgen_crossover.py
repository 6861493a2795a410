"""Interior-point masters (issue 13).

The crossover runs only when the repair MIP can take what a vertex leaves fractional (on 10k
× 16 × 48 at load 0.8, seed 4, a 22.7 s crossover left 847 fractional classes, more than the
repair takes, and the plan ended 9.5 % above the bound). A master whose interior point ends
imprecise (HiGHS status Unknown) is used, not dropped (on 50k × 16 × 48 at load 0.3, seed 0,
the first one did, and the solve was left without a master: 5.84 % against 0.51 %).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from carbonsched.plan import solve_plan
from carbonsched.plan.colgen import (
    ColgenOptions,
    binding_cells,
    crossover_pays,
    job_classes,
    make_layout,
    master,
)
from carbonsched.plan.sets import compile_sets

from .builders import problem
from .test_colgen_bound import two_gangs_three_gpus
from .test_colgen_refine import _crowded


def _surplus_sets(flow=False):
    """Two gangs on one 3-GPU site with surplus in hour 0: absorption rows exist."""
    prob = two_gangs_three_gpus()
    prob = problem(prob.sites, prob.jobs, 2, ci={"a": [100.0, 100.0]},
                   surplus={"a": [1.0, 0.0]})
    sets = compile_sets(prob)
    return sets, make_layout(sets, job_classes(sets), flow=flow)


def test_binding_cells_counts_the_real_cell_rows_with_a_multiplier_above_the_threshold():
    sets, lay = _surplus_sets()
    absorb = lay.absorb_row[lay.absorb_row >= 0]
    assert len(absorb) == 1 and lay.n_cell_rows == lay.n_rows
    scale = 50.0
    tol = ColgenOptions().binding_dual_rel * scale
    raw = np.zeros(lay.n_rows)
    raw[: lay.cap_base] = -7.0                        # assignment rows never count
    assert binding_cells(lay, raw, scale) == 0
    raw[lay.cap_base] = -tol                          # just at the threshold: not binding
    raw[lay.pow_base] = +1.0                          # the wrong sign: not binding
    assert binding_cells(lay, raw, scale) == 0
    raw[lay.cap_base] = -tol * (1 + 1e-9)             # just above: binding
    raw[absorb[0]] = -2 * tol                         # an absorption row counts too
    assert binding_cells(lay, raw, scale) == 2
    # the flow form's balance rows (after the cell rows) are not counted
    _, flay = _surplus_sets(flow=True)
    assert flay.n_rows > flay.n_cell_rows
    raw = np.zeros(flay.n_rows)
    raw[flay.n_cell_rows:] = -1.0
    raw[flay.cap_base] = -1.0
    assert binding_cells(flay, raw, scale) == 1


def test_crossover_pays_on_small_instances_whatever_binds():
    sets, lay = _surplus_sets()
    raw = np.zeros(lay.n_rows)
    raw[lay.cap_base: lay.n_cell_rows] = -1.0
    n = lay.n_cell_rows - lay.cap_base
    opts = ColgenOptions(repair_max_classes=n - 1)
    assert crossover_pays(lay, raw, 1.0, opts) == (True, n)    # 1 class <= repair_all_classes
    opts = replace(opts, repair_all_classes=len(lay.reps))      # at the limit
    assert crossover_pays(lay, raw, 1.0, opts) == (True, n)
    opts = replace(opts, repair_all_classes=len(lay.reps) - 1)
    assert crossover_pays(lay, raw, 1.0, opts) == (False, n)
    opts = replace(opts, repair_max_classes=n)                  # at the limit
    assert crossover_pays(lay, raw, 1.0, opts) == (True, n)


def _spy(monkeypatch):
    """The HiGHS ``run_crossover`` setting in force at every run of the master (the first
    model the solve builds; the repair and split MIPs come later), in order."""
    runs: list[str] = []
    real = master.new_highs
    made: list[object] = []

    def new(threads, limit):
        h = real(threads, limit)
        made.append(h)
        if len(made) > 1:
            return h
        state = {"x": "on"}                           # HiGHS's default
        set_option, run = h.setOptionValue, h.run

        def record(name, value):
            if name == "run_crossover":
                state["x"] = value
            return set_option(name, value)

        def counted_run():
            runs.append(state["x"])
            return run()

        h.setOptionValue, h.run = record, counted_run
        return h

    monkeypatch.setattr(master, "new_highs", new)
    return runs


def _interior(monkeypatch, repair_max, crossover_at=1e9, final=True):
    """Colgen on :func:`_crowded` with interior masters, as if it were a large instance
    (repair_all_classes 0); the crossover setting of each HiGHS run, the counts
    :func:`binding_cells` returned (in call order) and the progress lines."""
    opts = ColgenOptions(
        master_solver="ipm",                       # interior masters at any size
        repair_all_classes=0,
        crossover_min_left=0.0 if final else 2.0,  # time for the final crossover, or never
        repair_max_classes=repair_max,
        # a first master far from the LP (no warm-up); 1e9 asks for the in-loop crossover
        # after the first master, so the second would end at a vertex; -1 never
        warmup_share=0.0,
        crossover_at=crossover_at,
        short_first_share=0.0)                     # the master-LP path alone
    runs = _spy(monkeypatch)
    counts: list[int] = []
    real = master.binding_cells
    monkeypatch.setattr(master, "binding_cells",
                        lambda *a: counts.append(real(*a)) or counts[-1])
    said: list[str] = []
    res = solve_plan(_crowded(), method="colgen", mip_gap=0.0, time_limit_s=60,
                     progress=said.append, colgen_options=opts)
    return res, runs, counts, said


def test_crossover_skipped_when_the_binding_rows_exceed_the_repair(monkeypatch):
    res, runs, counts, said = _interior(monkeypatch, 0)
    assert len(runs) >= 2 and "on" not in runs            # neither in the loop nor at the end
    m = re.search(r"crossover to a vertex skipped: (\d+) binding capacity, power and "
                  r"absorption rows at the last master's LP solution, more than the 0 "
                  r"classes", res.solver.note)
    assert m and int(m.group(1)) == counts[-1] > 0
    assert not any(s.startswith("crossover to a vertex:") for s in said)


@pytest.mark.parametrize("slack, runs_it", [(0, True), (-1, False)])
def test_final_crossover_at_the_limit(monkeypatch, slack, runs_it):
    _, _, counts, _ = _interior(monkeypatch, 0, crossover_at=-1)
    res, runs, _, said = _interior(monkeypatch, counts[-1] + slack, crossover_at=-1)
    assert ("on" in runs) == runs_it
    assert ("crossover to a vertex skipped" in res.solver.note) == (not runs_it)
    assert any(s.startswith("crossover to a vertex:") for s in said) == runs_it


@pytest.mark.parametrize("slack, runs_it", [(0, True), (-1, False)])
def test_crossover_in_the_loop_at_the_limit(monkeypatch, slack, runs_it):
    _, _, counts, _ = _interior(monkeypatch, 0, final=False)
    _, runs, _, _ = _interior(monkeypatch, counts[0] + slack, final=False)
    # the second master is the one the first round's decision sets up
    assert runs[0] == "off" and (runs[1] == "on") == runs_it


def _imprecise(monkeypatch, tol=None):
    """Colgen on :func:`_crowded` with an interior master told to stop at 1e-3, where IPX ends
    in HiGHS status Unknown; the primal infeasibilities :func:`usable_interior` saw."""
    opts = ColgenOptions(master_solver="ipm", ipm_tol=1e-3,
                         short_first_share=0.0)    # the master-LP path alone
    if tol is not None:
        opts = replace(opts, imprecise_primal_tol=tol)
    seen: list[float] = []
    real = master.usable_interior

    def spy(h, *args):
        seen.append(h.getInfo().max_primal_infeasibility)
        return real(h, *args)

    monkeypatch.setattr(master, "usable_interior", spy)
    return solve_plan(_crowded(), method="colgen", mip_gap=0.0, time_limit_s=60,
                      colgen_options=opts), seen


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
