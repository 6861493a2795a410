"""bench/global_rolling_replay.py: a window's oracle share is computed once its oracle is in."""

from __future__ import annotations

from .benchload import load_bench


def _pol(kg: float) -> dict:
    return {"emissions_kg": kg, "emissions_with_unplaced_kg": kg, "work_it_mwh": 2.0}


def test_a_windows_oracle_share_is_recomputed_with_its_oracle():
    """Known-bad: the per-window rows kept the milp replay's own shares, computed before the
    oracle (replayed separately) was merged in, so every window's share was null."""
    mod = load_bench("global_rolling_replay")
    m = {"policies": {"agnostic": _pol(100.0), "milp": _pol(60.0), "oracle": _pol(50.0)},
         "runs": [{"issued_at": "2023-01-01T00:00:00+00:00"}], "agnostic_identical": True,
         "notes": [], "oracle_notes": [], "forecast_fallbacks": 0, "filled_signal_hours": 0}
    m["policies"]["milp"]["oracle_share"] = None         # as the milp replay leaves it
    (row,) = mod.per_window([("2023-01-01", "2023-01-07")], [m], [])
    assert row["rolling"]["milp"]["oracle_share"] == 0.8          # (100 - 60) / (100 - 50)
    assert row["rolling"]["milp"]["reduction_pct"] == 40.0
    assert row["milp_runs"] == m["runs"] and row["day_bounded"] is None


def test_target_load_scales_each_days_jobs_to_that_share_of_the_fleet(shared_data):
    """The issue's binding-load replay: each day drawn again at scale × target / its load."""
    from carbonsched.catalog import load_catalog
    from carbonsched.evaluate.replay import total_fleet_load

    mod = load_bench("global_rolling_replay")
    cat = load_catalog("global")
    trace = mod.year_workload(shared_data, "2023-03-01", "2023-03-01", 0, 0.5)
    loads = []
    bound = mod.year_workload(shared_data, "2023-03-01", "2023-03-01", 0, 0.5, target_load=0.9,
                              loads=loads)
    at_trace, at_target = total_fleet_load(trace, cat), total_fleet_load(bound, cat)
    assert loads == [at_target]
    assert at_trace < 0.3                     # the trace load is far from binding
    # one rescale, as `replay --target-load`: near the target (measured 0.80 on this day),
    # more than three times the trace's load
    assert abs(at_target - 0.9) <= 0.2, at_target
    assert at_target > 3 * at_trace
    assert len(bound.jobs) > 3 * len(trace.jobs)
    # the same day's draw at the trace scale is untouched without a target
    same = mod.year_workload(shared_data, "2023-03-01", "2023-03-01", 0, 0.5, loads=(lt := []))
    assert [j.id for j in same.jobs] == [j.id for j in trace.jobs] and lt == [at_trace]


def test_target_load_outside_its_range_is_named_and_at_the_limit_accepted():
    mod = load_bench("global_rolling_replay")
    for ok in (None, 1.5, 0.9, 1e-9):
        assert mod.target_load_error(ok) is None
    for bad in (0.0, -0.5, 1.5000001, 3.0):
        why = mod.target_load_error(bad)
        assert why is not None and f"--target-load {bad}" in why and "(0, 1.5]" in why
