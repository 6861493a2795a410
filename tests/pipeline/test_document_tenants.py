"""The plan document with network domains and tenants' fair shares (issue 37): a real plan of the
embedded catalog (modelled signals: no data folder) with tenants and a domain-shaped site, at a
load where the GPUs bind; its document has the published shape and the CLI shows the tenants."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.domain import Workload
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.pipeline.document import read_plan_document
from carbonsched.workload.files import demo_workload

ROOT = Path(__file__).resolve().parents[2]
CATALOG = "china-eastdata-westcompute"
TENANTS = """
[tenants.beijing]
weight = 3.0
quota_gpu_hours_per_day = { A100 = 24.0 }

[tenants.shanghai]
weight = 1.0

[tenants.guangzhou]
weight = 2.0

[tenants.chengdu]
weight = 1.0
"""


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict:
    text = (ROOT / "regions" / f"{CATALOG}.toml").read_text()
    # the first hub's 12 A100 (3 nodes of 4): domains of 2 nodes and 1
    text = text.replace("count = 12\nboard_power_w = 400.0\ngpus_per_node = 4",
                        "count = 12\nboard_power_w = 400.0\ngpus_per_node = 4\n"
                        "nodes_per_domain = 2", 1)
    path = tmp_path_factory.mktemp("cat") / "tenanted.toml"
    path.write_text(text + TENANTS)
    cat = load_catalog(path)
    wl = demo_workload(load_catalog(CATALOG), "2023-07-15")
    # six copies of the day bind the GPUs; a few 8-GPU gangs keep to one domain
    jobs = [dataclasses.replace(j, id=f"{j.id}-c{k}") for k in range(6) for j in wl.jobs]
    a100 = [j for j in jobs if j.gpu_type == "A100"][:3]
    bound = {j.id for j in a100}
    jobs = [dataclasses.replace(j, gpus=8, max_domains=1, allowed_sites=(cat.sites[0].id,))
            if j.id in bound else j for j in jobs]
    daily = run_daily_plan("2023-07-15", path, Workload(jobs, wl.inference), None, "highs",
                           30.0, 24, fairness=1.0)
    return {"doc": daily.document, "bound": bound, "summary": daily.summary}


def test_the_document_has_tenants_and_the_cost_of_fairness(planned):
    doc = planned["doc"]
    rows = {r["tenant"]: r for r in doc["tenants"]}
    assert set(rows) == {"beijing", "shanghai", "guangzhou", "chengdu"}
    assert rows["beijing"]["quota_met"] is True and rows["shanghai"]["quota_met"] is None
    assert sum(r["placed_gpu_hours"] for r in rows.values()) > 0
    assert any(r["dominant_share"] > 0 for r in rows.values())     # the GPUs bind
    tot = doc["totals"]
    assert tot["fairness_cost_kg"] == pytest.approx(
        tot["emissions_kg"] - tot["carbon_only_emissions_kg"], abs=1e-3)
    assert any(n.startswith("fairness: 4 tenant(s), fairness 1") for n in doc["notes"])


def test_bound_gangs_carry_their_domains(planned):
    doc = planned["doc"]
    placed = [p for p in doc["placements"] if p["job_id"] in planned["bound"]]
    assert placed
    for p in placed:
        assert p["max_domains"] == 1 and len(p["domains"]) == 2 and len(set(p["domains"])) == 1
    assert all("domains" not in p for p in doc["placements"]
               if p["job_id"] not in planned["bound"])


def test_the_document_has_the_published_shape(planned):
    doc = planned["doc"]
    read_plan_document(doc)
    schema = json.loads((ROOT / "docs" / "plan-document.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(doc)), schema)


def test_the_cli_shows_the_tenants_table(planned, capsys):
    from carbonsched.cli.common import out
    from carbonsched.cli.plan_view import print_plan

    with out.capture() as cap:
        print_plan(planned["doc"], planned["summary"])
    text = cap.get()
    assert "Tenants (fair shares)" in text and "beijing" in text
    assert "carbon cost of fairness" in text
