"""A plan's job counts count jobs: a preemptible job cut into pieces is one job.

Before, the per-site table's ``jobs`` and the "placed N jobs" line (terminal and web page)
counted placement rows, one per piece.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from carbonsched.pipeline.daily import site_summary
from carbonsched.pipeline.document import placed_words


def _p(job, site, start, end):
    return SimpleNamespace(job_id=job, site=site, gpus=2, start=pd.Timestamp(start),
                           end=pd.Timestamp(end), energy_kwh=1.0, emissions_kg=0.5)


def test_site_summary_counts_jobs_once_per_site():
    sites = [SimpleNamespace(id="a", role="green-hub"), SimpleNamespace(id="b", role="edge")]
    # J: two pieces at a, one at b; K: one piece at a
    placements = [_p("J", "a", "2023-07-15T00:00Z", "2023-07-15T02:00Z"),
                  _p("J", "a", "2023-07-15T05:00Z", "2023-07-15T06:00Z"),
                  _p("J", "b", "2023-07-15T08:00Z", "2023-07-15T09:00Z"),
                  _p("K", "a", "2023-07-15T01:00Z", "2023-07-15T02:00Z")]
    rows = {r["site"]: r for r in site_summary(SimpleNamespace(sites=sites),
                                               SimpleNamespace(placements=placements,
                                                               inference=[]))}
    assert (rows["a"]["jobs"], rows["b"]["jobs"]) == (2, 1)
    assert rows["a"]["job_gpu_hours"] == 2 * (2 + 1 + 1)


def test_placed_words():
    one = {"job_id": "J"}
    assert placed_words([]) == "0 jobs"
    assert placed_words([one]) == "1 job"                       # at the limit: no pieces said
    assert placed_words([one, one, {"job_id": "K"}]) == "2 jobs in 3 pieces"
