"""What the phases that run no MIP keep at the end of the limit (ColgenState.plain_reserve_s).

HiGHS overruns a MIP's limit by up to a second at 10k jobs, so the MIP phases keep
``ColgenOptions.finish_s`` (2 s); the priced greedy candidates, the one-slot repack's LP and
the final moves keep only what building and checking the plan takes. With 2 s kept a warm
9 s rolling step (9.2k jobs × 16 sites × 72 slots) skipped its repack and ended 0.8-1.8 % above
its 12 s plan. The state here is a stand-in whose clock is a number: no wall-clock budget.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from carbonsched.plan.colgen import bounds, incumbents, passes, repair_mip
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.state import ColgenState


def _state(left_s: float, t_pg: float = 0.3, **options) -> SimpleNamespace:
    plan = SimpleNamespace(totals={"objective": 1.0}, placements=[], inference=[])
    st = SimpleNamespace(opt=ColgenOptions(**options), t_pg=t_pg, held=0.0, skipped=[],
                         cands=[("priced greedy", plan)], repacked=set(), force_short=False,
                         sets=None, lay=None, cls=None, threads=1, rec=None,
                         rank_kw=None, lam_c=None, say=lambda m: None, clock=[left_s])
    st.left = lambda: st.clock[0]
    st.best = lambda: st.cands[0]
    st.plain_reserve_s = lambda: ColgenState.plain_reserve_s(st)
    return st


@pytest.mark.parametrize("t_pg, reserve_s", [(0.0, 0.5), (0.3, 0.5), (0.5, 0.5), (1.7, 1.7)])
def test_the_reserve_is_the_larger_of_the_floor_and_one_priced_greedy(t_pg, reserve_s):
    assert _state(10.0, t_pg=t_pg).plain_reserve_s() == reserve_s


@pytest.fixture
def repack_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(incumbents, "unit_repack",
                        lambda *a, **k: calls.append(a[5]) or None)
    return calls


def test_the_repack_runs_with_two_seconds_left_and_gets_its_share_past_the_reserve(
        repack_calls):
    # with finish_s (2 s) kept it needed 2.5 s left, and 0.9 x (2.0 - 2.0) = 0 s to run in;
    # its LP's limit also leaves one priced greedy plan's time (0.3 s) for set-up and build
    incumbents.repack(_state(2.0))
    assert repack_calls == [pytest.approx(0.9 * (2.0 - 0.5) - 0.3)]


@pytest.mark.parametrize("left_s", [1.0001, 1.5, 2.84, 10.0])
def test_a_repack_that_runs_to_its_limit_and_overruns_it_still_leaves_the_reserve(
        monkeypatch, left_s):
    # the model's set-up and the plan's build come on top of the LP's limit (0.18-0.25 s
    # measured at 10k, where a priced greedy plan takes 0.4 s): here they take t_pg
    st = _state(left_s, t_pg=0.4)

    def slow(*args, **kwargs):
        st.clock[0] -= args[5] + st.t_pg
        return None

    monkeypatch.setattr(incumbents, "unit_repack", slow)
    incumbents.repack(st)
    assert st.left() >= st.plain_reserve_s() - 1e-12


@pytest.mark.parametrize("left_s, runs", [(1.0, False), (1.0001, True)])
def test_the_repack_needs_the_reserve_and_the_step_margin(repack_calls, left_s, runs):
    incumbents.repack(_state(left_s))                # reserve 0.5 + margin 0.5 = 1.0
    assert bool(repack_calls) is runs


def test_the_repack_keeps_a_priced_greedy_plans_time_when_that_is_longer(repack_calls):
    incumbents.repack(_state(4.0, t_pg=1.5))               # the reserve is 1.5 s
    assert repack_calls == [pytest.approx(0.9 * (4.0 - 1.5) - 1.5)]


def test_no_time_for_the_lp_is_zero_seconds_not_negative(repack_calls):
    incumbents.repack(_state(3.0, t_pg=1.5))               # 0.9 x 1.5 - 1.5 < 0
    assert repack_calls == [0.0]


@pytest.mark.parametrize("left_s, fits", [(0.79, False), (0.8, True)])
def test_one_more_priced_greedy_fits_when_it_and_the_reserve_do(left_s, fits):
    st = _state(left_s, t_pg=0.3)
    assert incumbents.room(st, "another") is fits
    assert st.skipped == ([] if fits else ["another"])


def test_the_final_moves_get_the_time_left_past_the_reserve(monkeypatch):
    got = []
    monkeypatch.setattr(incumbents, "add_moves", lambda st, seconds: got.append(seconds))
    incumbents.final_moves(_state(1.5))
    incumbents.final_moves(_state(0.5))              # nothing past the reserve: no moves
    assert got == [pytest.approx(1.0)]


def _pass_state(left_s: float, **options) -> SimpleNamespace:
    st = _state(left_s, **options)
    st.notes = []
    st.note = st.notes.append
    st.residual = np.zeros(3, dtype=np.int64)              # nothing fractional: no repair
    st.lay = SimpleNamespace(reps=np.arange(5000))          # more classes than repair_all
    st.pool = np.zeros((2, 3), dtype=np.int64)
    st.xo = np.ones(2)
    st.sets = SimpleNamespace(site=["a"])
    st.duals = st.split_opts = st.mip_gap = None
    return st


@pytest.fixture
def pass_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(passes, "option_costs", lambda sets, pool: np.ones(len(pool)))
    monkeypatch.setattr(passes, "site_pass",
                        lambda *a, **k: calls.append(("site", a[8])) or None)
    monkeypatch.setattr(passes, "type_pass",
                        lambda *a, **k: calls.append(("type", a[8])) or None)
    return calls


@pytest.mark.parametrize("left_s, ran", [
    (2.5, []),                                  # at step_min_left_s (finish 2.0 + margin 0.5)
    (3.56, ["type"]),                           # site: 0.8 x 0.8 x (3.56 - 2.0) = 0.998 s < 1
    (3.5626, ["site", "type"]),                 # site: 1.0001 s
])
def test_a_mip_pass_starts_past_the_finish_and_margin_with_its_own_least_time(
        pass_calls, left_s, ran):
    # passes started at 2.0 s left, with 0.8 x (2.0 - finish_s) = 0 s for their MIP, and a
    # site pass given under 1 s ended at once, unnamed
    st = _pass_state(left_s)
    passes.run_passes(st)
    assert [name for name, _ in pass_calls] == ran
    assert all(s >= passes.TYPE_PASS_MIN_S for _, s in pass_calls)
    skipped = [n for n in st.notes if "skipped for time" in n]
    if ran == ["site", "type"]:
        assert skipped == []
    else:
        assert skipped == [
            ("site-by-site pass and fix-and-optimise by GPU type" if not ran
             else "site-by-site pass")
            + f" skipped for time ({left_s:.2f} s of the limit left: too little for a MIP pass)"]


@pytest.mark.parametrize("left_s, runs", [(2.62, False), (2.63, True)])
def test_the_type_pass_needs_its_least_time(pass_calls, left_s, runs):
    passes.run_passes(_pass_state(left_s, site_pass_share=0.0))   # 0.8 x (left - 2.0) vs 0.5
    assert [name for name, _ in pass_calls] == (["type"] if runs else [])


def test_the_pass_threshold_follows_the_finish_option(pass_calls):
    passes.run_passes(_pass_state(3.0, finish_s=2.6))    # 2.6 + 0.5 = 3.1 > 3.0
    passes.run_passes(_pass_state(4.5, finish_s=2.6))    # site: 0.64 x 1.9 = 1.2 s
    assert [name for name, _ in pass_calls] == ["site", "type"]


@pytest.mark.parametrize("left_s, limit_s, budget_s", [
    (3.0, 100.0, 1.0),      # 0.6 x 3.0 = 1.8 s would leave 1.2 s, under finish_s (2.0)
    (4.0, 100.0, 2.0),      # 0.6 x 4.0 = 2.4 s would leave 1.6 s
    (4.9, 100.0, 2.9),      # 0.6 x 4.9 = 2.94 s would leave 1.96 s
    (5.0, 100.0, 3.0),      # where the two meet: 0.6 x 5.0 = 5.0 - 2.0
    (10.0, 100.0, 6.0),     # 0.6 of what is left, under the share (0.3 x 100 s)
    (10.0, 10.0, 3.0),      # the share binds (0.3 x 10 s)
    (2.51, 100.0, 0.51),    # just past step_min_left_s (2.5 s): the least that runs
])
def test_the_type_pass_before_a_repair_leaves_the_finish(pass_calls, left_s, limit_s,
                                                          budget_s):
    # with a repair to follow, the type pass got min(share x limit, 0.6 x left): at 3 s left
    # its MIP's 1.8 s (plus HiGHS's overrun) left under finish_s for the plan that follows
    st = _pass_state(left_s)
    st.residual = np.array([1, 0, 2])                      # 2 fractional classes: a repair
    st.time_limit_s = limit_s
    passes.run_passes(st)
    assert pass_calls == [("type", pytest.approx(budget_s))]


def test_the_type_pass_before_a_repair_is_skipped_at_the_threshold(pass_calls):
    st = _pass_state(2.5)                                  # step_min_left_s: no MIP starts
    st.residual = np.array([1, 0, 2])
    st.time_limit_s = 100.0
    passes.run_passes(st)
    assert pass_calls == []
    assert any("fix-and-optimise by GPU type skipped for time" in n for n in st.notes)


def _split_state(left_s: float, limit_s: float = 100.0, **options) -> SimpleNamespace:
    st = _state(left_s, **options)
    st.notes = []
    st.note = st.notes.append
    st.time_limit_s = limit_s
    st.sets = SimpleNamespace(slots_per_hour=1)
    st.split_opts = np.zeros((0, 3), dtype=np.int64)
    st.lb, st.row_duals, st.best_lam = 0.0, None, (None, None, None)
    return st


@pytest.mark.parametrize("left_s, limit_s, budget_s", [
    (3.0, 100.0, 0.5),      # half of 3.0 s would leave 1.5 s, under finish_s (2.0)
    (10.0, 100.0, 4.0),
    (10.0, 4.0, 2.0),       # the share binds (0.5 x 4 s)
])
def test_the_site_split_bound_leaves_the_finish(monkeypatch, left_s, limit_s, budget_s):
    got = []
    monkeypatch.setattr(bounds, "count_options", lambda sets: 0)
    monkeypatch.setattr(bounds, "site_bound", lambda *a, **k: got.append(a[4]) or
                        SimpleNamespace(bound=-1.0, lagrangian=-1.0,
                                        options=np.zeros((0, 3), dtype=np.int64)))
    bounds.split_bounds(_split_state(left_s, limit_s, split_share=0.0, site_share=0.5))
    assert got == [pytest.approx(budget_s)]
    assert left_s - got[0] >= ColgenOptions().finish_s - 1e-9


@pytest.mark.parametrize("left_s, margin_s, budget_s", [
    (2.2, 0.1, None),      # past step_min_left_s (2.1 s); 0.2 s after the finish: skipped
    (2.5, 0.5, 0.5),       # at the least time
    (2.49, 0.1, None),     # just under it
    (7.0, 0.5, 5.0),
])
def test_the_repair_mip_leaves_the_finish(left_s, margin_s, budget_s):
    # the repair's limit was max(left - finish_s, 0.5): with a margin under 0.5 s (the
    # options allow it) 2.2 s left gave the MIP 0.5 s and left 1.7 s, under finish_s
    st = _state(left_s, step_margin_s=margin_s)
    st.notes = []
    st.note = st.notes.append
    got = repair_mip.repair_budget_s(st)
    assert got == (None if budget_s is None else pytest.approx(budget_s))
    assert st.notes == ([] if budget_s is not None else [
        f"repair MIP skipped for time ({left_s:.2f} s of the limit left after its set-up: "
        "too little for a MIP)"])


def _plan(objective: float, *placed: tuple[str, int]) -> SimpleNamespace:
    """A stand-in plan: ``(job, start hour)`` placements of one hour at site a on H100s."""
    t0 = pd.Timestamp("2026-12-06", tz="UTC")
    return SimpleNamespace(totals={"objective": objective}, inference=[], placements=[
        SimpleNamespace(job_id=j, piece=0, site="a", start=t0 + pd.Timedelta(hours=t),
                        end=t0 + pd.Timedelta(hours=t + 1), gpu_type="H100")
        for j, t in placed])


@pytest.fixture
def repack_starts(monkeypatch):
    starts = []
    monkeypatch.setattr(incumbents, "unit_repack", lambda *a, **k: starts.append(a[3]) or None)
    return starts


def test_the_repack_skips_a_plan_it_started_from_or_made_whatever_its_name(repack_starts):
    # the master-LP path's "priced greedy" can be the short path's plan under another name
    st = _state(10.0)
    done, copy, other = _plan(1.0, ("j1", 0)), _plan(1.0, ("j1", 0)), _plan(2.0, ("j2", 0))
    st.cands = [("short path: x + one-slot repack", done), ("priced greedy", copy),
                ("LP rounding + priced greedy", other)]
    st.repacked = {incumbents.plan_key(done)}
    incumbents.repack(st)
    assert repack_starts == [other]


def test_a_plan_one_start_away_from_a_repacked_one_is_repacked(repack_starts):
    # at the limit: one placement an hour later is another plan
    st = _state(10.0)
    done, moved = _plan(1.0, ("j1", 0), ("j2", 3)), _plan(1.5, ("j1", 0), ("j2", 4))
    st.cands = [("x + one-slot repack", done), ("x + moves", moved)]
    st.repacked = {incumbents.plan_key(done)}
    incumbents.repack(st)
    assert repack_starts == [moved]


def test_a_plan_of_the_same_objective_placed_elsewhere_is_repacked(repack_starts):
    # the key is where the jobs are, not what the plan costs
    st = _state(10.0)
    done, other = _plan(1.0, ("j1", 0)), _plan(1.0, ("j1", 1))
    st.cands = [("x + one-slot repack", done), ("y", other)]
    st.repacked = {incumbents.plan_key(done)}
    incumbents.repack(st)
    assert repack_starts == [other]


def test_the_short_paths_next_best_is_its_best_plan_neither_its_own_nor_repacked():
    # what a staged solve carries to the master-LP path (driver._short_then_long)
    own, start, runner_up, worse = (_plan(1.0, ("j1", 0)), _plan(2.0, ("j1", 1)),
                                    _plan(3.0, ("j1", 2)), _plan(4.0, ("j1", 3)))
    copy_of_own = _plan(1.5, ("j1", 0))      # the same placements under another name
    cands = [("start", start), ("own", own), ("copy", copy_of_own), ("next", runner_up),
             ("worse", worse)]
    picked = incumbents.best_not_repacked(cands, {incumbents.plan_key(start)}, also=(own,))
    assert picked == ("next", runner_up)
    assert incumbents.best_not_repacked(cands, set()) == ("own", own)
    assert incumbents.best_not_repacked([("own", own)], set(), also=(own,)) is None


def test_nothing_is_repacked_when_every_candidate_was(repack_starts):
    st = _state(10.0)
    done = _plan(1.0, ("j1", 0))
    st.cands = [("x + one-slot repack", done)]
    st.repacked = {incumbents.plan_key(done)}
    incumbents.repack(st)
    assert repack_starts == []


@pytest.mark.parametrize(("time_limited", "second"), [(False, "runner_up"), (True, "best")])
def test_a_start_the_short_path_could_not_repack_is_tried_again_only_for_time(
        monkeypatch, time_limited, second):
    # the short path's repack gave no plan: for a reason more time does not change (no
    # solution, its options over the cap), the master-LP path, which reads st.repacked,
    # starts from the next best plan; cut short by the time, it may repack the same again
    starts = []

    def no_plan(*a, status_out=None, **k):
        starts.append(a[3])
        status_out["time_limited"] = time_limited

    monkeypatch.setattr(incumbents, "unit_repack", no_plan)
    st = _state(10.0)
    plans = {"best": _plan(1.0, ("j1", 0)), "runner_up": _plan(2.0, ("j1", 1))}
    st.cands = [("priced greedy", plans["best"]),
                ("LP rounding + priced greedy", plans["runner_up"])]
    st.force_short = True
    incumbents.repack(st)
    st.force_short = False                    # the master-LP path, the same candidates
    incumbents.repack(st)
    assert starts == [plans["best"], plans[second]]


def test_a_start_a_lone_path_could_not_repack_is_not_recorded(repack_starts):
    # no path follows a solve that is not staged: nothing is kept
    st = _state(10.0)
    st.cands = [("priced greedy", _plan(1.0, ("j1", 0)))]
    incumbents.repack(st)
    assert st.repacked == set()



def test_a_plans_key_counts_the_gpus_of_every_inference_row():
    # two rows of 2 GPUs at one (area, hour, site, GPU type) are the plan one row of 4 is, and
    # not the plan one row of 2 is (as a set of rows the two 2-GPU rows were one)
    t0 = pd.Timestamp("2023-07-15T00:00Z")

    def plan(*gpus):
        p = _plan(1.0)
        p.inference = [SimpleNamespace(area="x", hour=t0, site="a", gpu_type="T4", gpus=g)
                       for g in gpus]
        return incumbents.plan_key(p)

    assert plan(2, 2) == plan(4) == plan(4, 0)
    assert plan(2, 2) != plan(2)
    assert plan(2) != plan(3)


def _staged_master_path(left_s: float, **options) -> SimpleNamespace:
    """A staged solve's master-LP path: the short path's plan is ``prior``."""
    st = _state(left_s, **options)
    st.prior = ("x + one-slot repack", None)
    st.notes = []
    st.note = st.notes.append
    st.best = lambda: min(st.cands, key=lambda c: c[1].totals["objective"])
    return st


def test_repack_more_repacks_the_next_best_plans_within_its_share_of_the_best(repack_starts):
    # the short path's plan (repacked) is best; its three other iterates' greedy plans and
    # the master's LP rounding follow: two more repacks start from the two best of those
    # not repacked, never from one 5 % or more above the best plan
    st = _staged_master_path(30.0, repack_more=2)
    own = _plan(100.0, ("j1", 0))
    draws = [_plan(103.0, ("j1", 1)), _plan(101.0, ("j1", 2)), _plan(102.0, ("j1", 3))]
    far = _plan(106.0, ("j1", 4))
    st.cands = [("short path: x + one-slot repack", own), ("LP rounding + priced greedy", far)]
    st.cands += [(f"short path: draw {k}", p) for k, p in enumerate(draws, 1)]
    st.repacked = {incumbents.plan_key(own)}
    incumbents.repack(st)                         # the path's own: the best not repacked
    incumbents.repack_more(st)
    assert repack_starts == [draws[1], draws[2], draws[0]]
    repack_starts.clear()
    incumbents.repack_more(st)                    # only `far` is left, 6 % above the best
    assert repack_starts == []


def test_repack_more_is_off_by_default_and_outside_a_staged_master_path(repack_starts):
    st = _staged_master_path(30.0)
    st.cands = [("a", _plan(1.0, ("j1", 0))), ("b", _plan(1.01, ("j1", 1)))]
    incumbents.repack_more(st)
    st = _state(30.0, repack_more=3)              # no short path before it: st.prior unset
    st.prior = None
    st.cands = [("a", _plan(1.0, ("j1", 0))), ("b", _plan(1.01, ("j1", 1)))]
    incumbents.repack_more(st)
    assert repack_starts == []


@pytest.mark.parametrize("left_s, lp_s", [
    (3.5, None),                         # reserve 0.5 + the passes' 2.5 + margin 0.5 = 3.5
    (3.5001, 0.9 * (3.5001 - 3.0) - 0.3),
    (10.0, 0.9 * (10.0 - 3.0) - 0.3),
])
def test_repack_more_leaves_the_passes_their_least_time(repack_calls, left_s, lp_s):
    st = _staged_master_path(left_s, repack_more=1)
    st.cands = [("a", _plan(1.0, ("j1", 0))), ("b", _plan(1.01, ("j1", 1)))]
    st.repacked = {incumbents.plan_key(st.cands[0][1])}
    incumbents.repack_more(st)
    assert repack_calls == ([] if lp_s is None else [pytest.approx(lp_s)])
    assert (st.notes == []) is (lp_s is not None)
