"""The report's flexibility section: per event the baseline, delivery per hour and shortfall."""

from __future__ import annotations

import json

import pytest

from carbonsched.domain import jsonable
from carbonsched.flex import GridEvent
from carbonsched.pipeline.flex import commit_events, flexibility_block
from carbonsched.plan import solve_plan
from carbonsched.report import build_report, render
from carbonsched.report.render import read_csv_sections
from tests.plan.builders import JobWrapper, SiteWrapper, at, problem

from .builders import plan_doc

pytestmark = pytest.mark.shared_data

CI = {"a": [100.0] * 4 + [10.0] * 4 + [100.0] * 16}


def block(missed: bool):
    """A flexibility block from a real commitment at site ``a`` on 2023-07-15 (builders' T0)."""
    p = problem([SiteWrapper("a").gpus("H100", 16).obj()],
                [JobWrapper("slack").gpus(4).hours(2).window(0, 24).obj(),
                 JobWrapper("tight").gpus(4).hours(2).window(4, 6).obj()], 24, ci=CI)
    base = solve_plan(p)
    ev = GridEvent("a", at(4), at(7), target_fraction=0.5, id="ev-1")
    cp = commit_events(p, [ev], (lambda _q: base) if missed else solve_plan,
                       baseline_result=base)
    return jsonable(flexibility_block(cp))


def report_with(fixtures_dir, shared_data, blk):
    # the report's period holds the event (2023-07-15 04:00-07:00): a report shows the
    # events of its period only
    doc = plan_doc("2023-07-15", "two-markets", [
        ("J-DE", "tenant-a", "de-site", "2023-07-15T10:00:00Z", "2023-07-15T14:00:00Z", 4, 0.5)])
    if blk is not None:
        doc["flexibility"] = blk
    return build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                        "2023-07-15", "2023-07-15", plans=[doc])


def test_a_delivered_event_is_proven_per_hour(fixtures_dir, shared_data):
    rep = report_with(fixtures_dir, shared_data, block(missed=False))
    ev = rep.frames["flex_events"].iloc[0]
    assert (ev["event_id"], ev["baseline_kwh"], ev["committed_kwh"], ev["delivered_kwh"],
            ev["shortfall_kwh"]) == ("ev-1", 16.0, 8.0, 8.0, 0.0)
    assert ev["delayed_jobs"] == 1 and ev["extra_emissions_kg"] == pytest.approx(0.36)
    hrs = rep.frames["flex_hours"]
    assert hrs["delivered_kw"].tolist() == [4.0, 4.0, 0.0]
    t = rep.totals
    assert (t["flex_events"], t["flex_events_met"]) == (1, 1)
    assert t["flex_offered_mwh"] == pytest.approx(0.008)
    assert t["flex_delivered_mwh"] == pytest.approx(0.008)
    assert t["flex_shortfall_mwh"] == 0.0
    for fmt in ("json", "html", "xlsx"):
        assert render(rep, fmt)
    data = json.loads(render(rep, "json"))
    assert data["flex_events"][0]["event_id"] == "ev-1"
    assert "flex_hours" in read_csv_sections(render(rep, "csv"))
    page = render(rep, "html").decode()
    assert 'id="table-flex-events"' in page and 'data-total="flex_shortfall_mwh"' in page


def test_a_missed_commitment_is_reported_with_its_shortfall(fixtures_dir, shared_data):
    rep = report_with(fixtures_dir, shared_data, block(missed=True))
    ev = rep.frames["flex_events"].iloc[0]
    assert ev["shortfall_kwh"] == pytest.approx(8.0) and ev["delivered_kwh"] == 0.0
    assert rep.frames["flex_hours"]["shortfall_kw"].tolist() == [4.0, 4.0, 0.0]
    assert rep.totals["flex_events_met"] == 0
    assert rep.totals["flex_shortfall_mwh"] == pytest.approx(0.008)
    assert ("grid event ev-1 at a: commitment missed by 8.0 kWh of 8.0 kWh committed"
            in rep.metadata["notes"])


def test_a_report_without_events_has_no_flexibility_section(fixtures_dir, shared_data):
    rep = report_with(fixtures_dir, shared_data, None)
    assert "flex_events" not in rep.frames and "flex_events" not in rep.totals
    assert "Flexibility" not in render(rep, "html").decode()
