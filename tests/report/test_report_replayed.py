"""The report of a replayed plan (issue 33 item 5): scored on the source day's actual signals
moved the same way, and saying so in a sentence; a period that mixes replays is refused."""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.errors import InputError
from carbonsched.report import build_report

from .builders import plan_doc

pytestmark = pytest.mark.shared_data

SOURCE, TARGET = "2023-07-15", "2026-12-04"
SHIFT = pd.Timestamp(TARGET) - pd.Timestamp(SOURCE)


def _at(day: str, hour: int) -> str:
    return f"{day}T{hour:02d}:00:00Z"


def _day(day: str, replay: bool) -> dict:
    jobs = [("j1", "london", "gb-london", _at(day, 2), _at(day, 6), 8, 0.8),
            ("j2", "toronto", "ca-on-toronto", _at(day, 13), _at(day, 15), 4, 0.8)]
    base = [("j1", "london", "de-frankfurt", _at(day, 2), _at(day, 6), 8, 0.8),
            ("j2", "toronto", "us-pjm-ashburn", _at(day, 13), _at(day, 15), 4, 0.8)]
    doc = plan_doc(day, "global", jobs, base)
    if replay:
        doc["signal_quality"] = "replayed"
        doc["replay"] = {"source_date": SOURCE, "target_date": day,
                         "shift_days": SHIFT.days, "underlying_signal_quality": "measured"}
    return doc


def test_a_replayed_plan_is_scored_on_its_source_days_actuals(shared_data):
    source = build_report(None, "global", shared_data, SOURCE, SOURCE,
                          plans=[_day(SOURCE, replay=False)])
    replayed = build_report(None, "global", shared_data, TARGET, TARGET,
                            plans=[_day(TARGET, replay=True)])
    for key in ("location_based_kg", "counterfactual_location_based_kg", "avoided_kg"):
        assert replayed.totals[key] == pytest.approx(source.totals[key], rel=1e-9), key
    assert replayed.totals["location_based_kg"] > 1.0          # real intensities, not a gap
    assert replayed.totals["location_gap_energy_kwh"] == 0.0
    hours = replayed.frames["site_hours"]
    assert pd.Timestamp(hours["hour"].min()) >= pd.Timestamp(TARGET, tz="UTC")
    note = replayed.metadata["notes"][0]
    assert note.startswith(f"REPLAYED: the 1 plan(s) of this report were made on the real "
                           f"signals of {SOURCE}, moved {SHIFT.days} days forward onto {TARGET}")
    assert f"what this work emits on the grid of {SOURCE}, not on the grid of {TARGET}" in note
    assert replayed.metadata["replay"] == {"shift_days": SHIFT.days, "source_dates": [SOURCE]}
    assert "replay" not in source.metadata
    assert not any("REPLAYED" in n for n in source.metadata["notes"])
    # the no-instrument sentence follows the REPLAYED warning, never ahead of it
    assert replayed.metadata["notes"][1] == replayed.metadata["market_based_note"]


def test_a_period_mixing_replayed_and_other_plans_is_refused(shared_data):
    day2 = "2026-12-05"
    other = _day(day2, replay=False)
    with pytest.raises(InputError, match=r"mixes plans that replay past signals .*2026-12-04 "
                       r"\(replaying 2023-07-15\), 2026-12-05 \(not replayed\).*report them "
                       "apart with --from/--to"):
        build_report(None, "global", shared_data, TARGET, day2,
                     plans=[_day(TARGET, replay=True), other])
