"""bench/smoothed_eval.py: it times both evaluators at one point and reports what single
precision changes there (the bound not at all)."""

from __future__ import annotations

import json

import pytest

from .benchload import load_bench


@pytest.mark.shared_data
def test_the_script_runs_and_single_weights_leave_the_bound_exact(shared_data, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("CARBONSCHED_SHARED_DATA", str(shared_data))
    monkeypatch.setattr("sys.argv", [
        "smoothed_eval.py", "--jobs", "120", "--sites", "3", "--hours", "12", "24",
        "--seeds", "1", "--evals", "3", "--ascent-s", "0", "--out",
        str(tmp_path / "se.json")])
    load_bench("smoothed_eval").main()
    rows = json.loads((tmp_path / "se.json").read_text())
    assert [(r["hours"], r["seed"]) for r in rows] == [(12, 1), (24, 1)]
    for r in rows:
        assert r["exact_equal"] is True
        assert r["classes"] > 0 and r["weight_slots"] > r["classes"]
        assert r["double_ms"] > 0 and r["single_ms"] > 0
        assert r["ratio"] == pytest.approx(r["single_ms"] / r["double_ms"])
        # single precision's error at the last temperatures (smoothed.py's docstring)
        assert r["smoothed_rel_diff"] < 1e-6 and r["gradient_rel_diff"] < 1e-3
    md = (tmp_path / "se.md").read_text()
    assert "| 120 x 3 x 24 | 1 |" in md and "over 2 instance(s)" in md


def test_no_evaluations_is_refused(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["smoothed_eval.py", "--evals", "0"])
    with pytest.raises(SystemExit) as info:
        load_bench("smoothed_eval").main()
    assert info.value.code == 2 and "--evals must be >= 1" in capsys.readouterr().err
