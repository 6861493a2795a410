"""The soak benchmark (bench/soak.py), run short: every recount is zero after the faults.

Two ``carbonsched serve`` replicas on a PostgreSQL of the test's own, reservations as fast as
they are answered, two concurrent dispatchers with secrets planted, PostgreSQL restarted, the
leader killed. The full ten-minute run is a benchmark (BENCHMARKS.md, section "Soak").
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _soak_module():
    spec = importlib.util.spec_from_file_location("soak", ROOT / "bench" / "soak.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def slurm_conf_dir() -> Path:
    d = os.environ.get("CARBONSCHED_SLURM_CONF_DIR")
    if not d:
        pytest.skip("CARBONSCHED_SLURM_CONF_DIR not set (scripts/test starts the Slurm clusters)")
    return Path(d)


def test_a_short_soak_counts_zero_of_every_fault(tmp_path, slurm_conf_dir, shared_data):
    soak = _soak_module()
    res = soak.run_soak(1.5, 4, slurm_conf_dir, shared_data, tmp_path, say=lambda m: None)
    # the load was real: reservations acknowledged, the database held them, jobs dispatched
    assert res["acknowledged_reservations"] > 20, res
    assert res["reservations_held"] >= res["acknowledged_reservations"], res
    assert res["slurm_jobs"] > 0, res
    assert res["dispatch_exit_codes"] == [0, 0], res
    assert res["overbooked_site_hours"] == 0, res["overbooked_examples"]
    assert res["lost_reservations"] == 0, res["lost_examples"]
    assert res["duplicate_submissions"] == 0, res
    assert res["secrets_in_jobs"] == 0, res
    assert res["responses_500"] == 0, res["statuses"]
    assert res["responses_503_without_retry_after"] == 0, res["statuses"]
    assert res["leadership_moved_s"] is not None and res["leadership_moved_s"] <= 60, res
