"""The life-cycle figure (shown beside Scope 2) says how much energy it covers.

Before, energy in hours whose source gives no life-cycle intensity dropped out of the sum, so a
catalog of modelled signals (no life-cycle series) reported "Life-cycle: 0 kg CO2e", and a gap
elsewhere made the total low, with no note. Real data: the `global` catalog's Electricity Maps
files carry a life-cycle column; the embedded China catalog's modelled signals do not.
"""

from __future__ import annotations

import math

import pytest

from carbonsched.report import build_report

from .builders import plan_doc

pytestmark = pytest.mark.shared_data


def test_no_life_cycle_series_gives_no_total_and_says_so(shared_data):
    doc = plan_doc("2023-07-03", "china-eastdata-westcompute", [
        ("J", "t", "cn-gz-guian", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 0.5)])
    rep = build_report(None, "china-eastdata-westcompute", shared_data, "2023-07-03",
                       "2023-07-03", plans=[doc])
    t = rep.totals
    assert math.isnan(t["lifecycle_kg"]) and t["lifecycle_gap_share"] == pytest.approx(1.0)
    assert t["location_based_kg"] > 0                      # Scope 2 itself is there
    said = [n for n in rep.metadata["notes"] if "no life-cycle grid intensity" in n]
    assert said == [f"100.00 % of the facility energy ({t['facility_energy_kwh']:.1f} kWh) has "
                    "no life-cycle grid intensity (its source gives none: cn-gz-guian): the "
                    "life-cycle total is not given (n/a)"]


def test_a_full_life_cycle_series_is_counted_whole_without_a_note(shared_data):
    doc = plan_doc("2023-07-03", "global", [
        ("J", "t", "gb-london", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 0.5)])
    rep = build_report(None, "global", shared_data, "2023-07-03", "2023-07-03", plans=[doc])
    t = rep.totals
    assert t["lifecycle_gap_share"] == 0.0 and t["lifecycle_kg"] > t["location_based_kg"] > 0
    assert not [n for n in rep.metadata["notes"] if "no life-cycle grid intensity" in n]
