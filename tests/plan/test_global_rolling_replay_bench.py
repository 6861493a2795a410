"""bench/global_rolling_replay.py: a window's oracle share is computed once its oracle is in."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location(
        "global_rolling_replay", ROOT / "bench" / "global_rolling_replay.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pol(kg: float) -> dict:
    return {"emissions_kg": kg, "emissions_with_unplaced_kg": kg, "work_it_mwh": 2.0}


def test_a_windows_oracle_share_is_recomputed_with_its_oracle():
    """Known-bad: the per-window rows kept the milp replay's own shares, computed before the
    oracle (replayed separately) was merged in, so every window's share was null."""
    mod = _load()
    m = {"policies": {"agnostic": _pol(100.0), "milp": _pol(60.0), "oracle": _pol(50.0)},
         "runs": [{"issued_at": "2023-01-01T00:00:00+00:00"}], "agnostic_identical": True,
         "notes": [], "oracle_notes": [], "forecast_fallbacks": 0, "filled_signal_hours": 0}
    m["policies"]["milp"]["oracle_share"] = None         # as the milp replay leaves it
    (row,) = mod.per_window([("2023-01-01", "2023-01-07")], [m], [])
    assert row["rolling"]["milp"]["oracle_share"] == 0.8          # (100 - 60) / (100 - 50)
    assert row["rolling"]["milp"]["reduction_pct"] == 40.0
    assert row["milp_runs"] == m["runs"] and row["day_bounded"] is None
