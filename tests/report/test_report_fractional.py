"""A fractional job's energy in the Scope 2 report is its share of the GPU's (issue 37).

The planner counts a ``gpu_milli`` or ``mig_profile`` job at ``power_per_gpu_kw × gpu_share``
(:attr:`carbonsched.domain.Job.gpu_share`); the plan document's workload row carries the share and
the report must count the same energy. Fleet as ``test_report_scope2.py`` (PUE fixed at 1.25).
"""

from __future__ import annotations

import pytest

from carbonsched.report import build_report

from .builders import plan_doc

pytestmark = pytest.mark.shared_data


def test_a_quarter_gpu_job_counts_a_quarter_of_the_gpus_energy(fixtures_dir, shared_data):
    fx = fixtures_dir / "report"
    doc = plan_doc("2023-07-03", "two-markets", [
        ("Q", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 1, 1.0),
        ("W", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 1, 1.0),
    ])
    doc["workload"]["jobs"][0]["gpu_share"] = 0.25       # gpu_milli 250
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       plans=[doc])
    # Q: 1 GPU × 1.0 kW × 0.25 × 4 h = 1 kWh; W (whole): 1 × 1.0 × 2 h = 2 kWh
    assert rep.totals["it_energy_kwh"] == pytest.approx(3.0)
    assert rep.totals["facility_energy_kwh"] == pytest.approx(3.75)
