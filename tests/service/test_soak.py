"""The soak benchmark (bench/soak.py), run short: every recount is zero after the faults.

Two ``carbonsched serve`` replicas on a PostgreSQL of the test's own, reservations as fast as
they are answered, two concurrent dispatchers with secrets planted, a signal provider answering
429, 503 and a drip, PostgreSQL restarted, the leader killed. The full ten-minute run is a
benchmark (BENCHMARKS.md, section 11).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.scriptload import load_script


def _soak_module():
    return load_script("bench/soak.py", "bench_soak", register=True)


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
    assert res["saved_job_files_read"] > 0, res        # the secrets were looked for
    assert res["kubernetes_jobs_read"] > 0 or not os.environ.get("CARBONSCHED_KUBECONFIG"), res
    assert res["secrets_in_jobs"] == 0, res
    assert res["responses_500"] == 0, res["statuses"]
    assert res["responses_503_without_retry_after"] == 0, res["statuses"]
    assert res["leadership_moved_s"] is not None and res["leadership_moved_s"] <= 60, res
    # the signal provider answered 429, 503, a drip and normally in turn: every load returned,
    # the faulty ones planned on the cache (degraded), within the run budget
    assert res["provider_errors"] == 0, res["provider_error_examples"]
    assert res["provider_loads"].get("None", 0) >= 1 and res["provider_loads"].get("429", 0) >= 1
    assert all(res["provider_degraded"][f] == res["provider_loads"][f]
               for f in ("429", "503", "drip") if f in res["provider_loads"]), res
    # a healthy answer is never degraded unless the load itself ran past the provider's
    # deadline (a loaded machine: then the cache is the designed answer, not a fault)
    assert res["provider_degraded"].get("None", 0) == \
        res["provider_degraded_past_deadline"].get("None", 0), res
    assert res["provider_longest_load_s"] <= res["provider_run_deadline_s"] + 30, res
