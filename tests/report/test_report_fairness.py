"""The report's fair-shares section: per tenant and day the dominant share against its target,
quota met or not, and the carbon cost of fairness, from real fair plans (issue 37)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from carbonsched.domain import Tenant, jsonable
from carbonsched.plan import greedy_plan, solve_plan
from carbonsched.report import build_report, render
from carbonsched.report.render import read_csv_sections
from tests.plan.builders import JobWrapper, SiteWrapper, problem

from .builders import plan_doc

pytestmark = pytest.mark.shared_data


def fair_problem():
    """One 8-GPU site, 12 hours (96 GPU-h); x, y, z ask 48 GPU-h each, z has a 32 GPU-h quota
    over the horizon; earlier hours are cleaner (tests/plan/test_fairness.py's example)."""
    site = SiteWrapper("a").gpus("H100", 8, per_node=8).obj()
    jobs = [JobWrapper(f"{t}{i}").tenant(t).gpus(2).hours(2).window(0, 12).obj()
            for t in ("x", "y", "z") for i in range(12)]
    prob = problem([site], jobs, 12, ci={"a": [50.0 + 40.0 * h for h in range(12)]})
    return dataclasses.replace(prob, fairness=1.0, tenants={
        "x": Tenant("x", 1.0), "y": Tenant("y", 2.0), "z": Tenant("z", 1.0, {"H100": 64.0})})


def with_plan(doc, plan):
    doc["tenants"] = jsonable(plan.tenants)
    doc["totals"].update({k: plan.totals[k] for k in (
        "carbon_only_emissions_kg", "fairness_cost_kg", "fairness_not_applied_tenants")
        if k in plan.totals}, emissions_kg=plan.totals["emissions_kg"])
    return doc


def report(fixtures_dir, shared_data, *plans):
    docs = []
    for day, plan in plans:
        doc = plan_doc(day, "two-markets", [
            ("J-DE", "tenant-a", "de-site", f"{day}T10:00:00Z", f"{day}T14:00:00Z", 4, 0.5)])
        docs.append(with_plan(doc, plan))
    last = plans[-1][0]
    return build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                        plans[0][0], last, plans=docs)


def test_the_report_shows_each_tenants_share_target_quota_and_the_days_carbon_cost(
        fixtures_dir, shared_data):
    plan = solve_plan(fair_problem(), method="milp")
    rep = report(fixtures_dir, shared_data, ("2023-07-03", plan))
    shares = rep.frames["fair_shares"].set_index("tenant")
    # z's quota first (32 GPU-h), then weighted DRF: x 16, y 32, z 16 more (48 in all)
    assert shares["placed_gpu_h"].to_dict() == {"x": 16.0, "y": 32.0, "z": 48.0}
    assert np.allclose(shares["target_share"], [16 / 96, 32 / 96, 48 / 96])
    assert np.allclose(shares["dominant_share"], shares["target_share"])
    assert shares["deviation_share"].abs().max() < 1e-9
    assert shares["quota_met"].tolist() == [None, None, True]
    assert shares["fair_applied"].tolist() == [True, True, True]
    [day] = rep.frames["fair_days"].to_dict("records")
    cost = plan.totals["emissions_kg"] - plan.totals["carbon_only_emissions_kg"]
    assert day["fairness_cost_kg"] == pytest.approx(cost, abs=1e-9)
    assert day["carbon_only_emissions_kg"] == pytest.approx(
        plan.totals["carbon_only_emissions_kg"])
    t = rep.totals
    assert (t["fair_tenants_with_target"], t["fair_tenants_within_5pct"],
            t["fair_quotas_missed"], t["fairness_not_applied_tenants"]) == (3, 3, 0, 0)
    assert t["fairness_cost_kg"] == pytest.approx(cost, abs=1e-9)
    data = json.loads(render(rep, "json"))
    assert [r["tenant"] for r in data["fair_shares"]] == ["x", "y", "z"]
    assert data["totals"]["fair_tenants_within_5pct"] == 3
    assert set(read_csv_sections(render(rep, "csv"))) >= {"fair_shares", "fair_days"}
    assert render(rep, "xlsx")
    page = render(rep, "html").decode()
    assert 'id="table-fair-shares"' in page and 'data-total="fairness_cost_kg"' in page
    assert "Fair shares" in page


def test_a_day_whose_plan_fell_back_is_counted_as_fairness_not_applied(
        fixtures_dir, shared_data):
    fair = solve_plan(fair_problem(), method="milp")
    fell = greedy_plan(fair_problem())
    rep = report(fixtures_dir, shared_data, ("2023-07-03", fair), ("2023-07-04", fell))
    t = rep.totals
    assert t["fairness_not_applied_tenants"] == 3 and t["fair_tenants_with_target"] == 6
    days = rep.frames["fair_days"].set_index("date")
    assert days.loc["2023-07-04", "fairness_not_applied_tenants"] == 3
    assert any(n.startswith("fair shares 2023-07-04: fairness not applied for 3 tenant(s)")
               for n in rep.metadata["notes"])
    shares = rep.frames["fair_shares"]
    assert shares.loc[shares["date"] == "2023-07-04", "fair_applied"].tolist() == [False] * 3


def test_a_report_without_tenants_has_no_fair_shares_section(fixtures_dir, shared_data):
    doc = plan_doc("2023-07-03", "two-markets", [
        ("J-DE", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5)])
    rep = build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                       "2023-07-03", "2023-07-03", plans=[doc])
    assert "fair_shares" not in rep.frames and "fairness_cost_kg" not in rep.totals
