"""The typed plan document: every plan has the published shape, and bad documents are refused."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import InputError
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.pipeline.document import PlanDocument, plan_document_schema, read_plan_document
from carbonsched.workload.files import demo_workload

ROOT = Path(__file__).resolve().parents[2]
CATALOG = "china-eastdata-westcompute"


@pytest.fixture(scope="module")
def document() -> dict:
    """A real plan of the embedded catalog's demo day (modelled signals: no data folder)."""
    wl = demo_workload(load_catalog(CATALOG), "2023-07-15")
    return run_daily_plan("2023-07-15", CATALOG, wl, None, "highs", 30.0, 24).document


def test_a_real_plan_round_trips_unchanged(document):
    typed = read_plan_document(document)
    assert typed.placements and typed.site_hours
    assert typed.model_dump(mode="json", exclude_unset=True) == json.loads(json.dumps(document))


def test_a_real_plan_validates_against_the_published_schema(document):
    schema = json.loads((ROOT / "docs" / "plan-document.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(document)), schema)


def test_the_published_schema_is_current():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "plan_schema.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert plan_document_schema()["title"] == "PlanDocument"


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d.pop("solver"), "solver: Field required"),
    (lambda d: d.__setitem__("surprise", 1), "surprise: Extra inputs are not permitted"),
    (lambda d: d["placements"][0].__setitem__("gpus", "eight"), "placements.0.gpus"),
    (lambda d: d["placements"][0].pop("site"), "placements.0.site: Field required"),
    (lambda d: d["totals"].__setitem__("emissions_kg", None), "totals.emissions_kg"),
    (lambda d: d["site_hours"][0].__setitem__("it_power_kw", "n/a"), "site_hours.0.it_power_kw"),
])
def test_a_document_of_another_shape_is_refused_with_the_field_named(document, change, named):
    bad = copy.deepcopy(document)
    change(bad)
    with pytest.raises(InputError, match="is not a carbonsched plan document") as err:
        read_plan_document(bad, "plans/x.json")
    assert named in str(err.value) and "plans/x.json" in str(err.value)


def test_optional_parts_may_be_absent_but_not_mistyped(document):
    minimal = {k: document[k] for k in ("plan_id", "date", "catalog", "signal_quality", "solver",
                                         "placements", "inference", "unplaced", "totals")}
    assert read_plan_document(minimal).baseline is None  # just at the limit: the required keys
    minimal["run"] = {"planning_date": "2023-07-15", "issued_at": "2023-07-15T00:00:00Z",
                      "trigger": "cron", "api_jobs": "many"}
    with pytest.raises(InputError, match="run.api_jobs"):
        read_plan_document(minimal)


def test_the_api_serves_the_same_model():
    from carbonsched.api.schemas import PlanPublic

    assert issubclass(PlanPublic, PlanDocument)
    assert set(PlanPublic.model_fields) == set(PlanDocument.model_fields)


def test_a_plan_whose_inference_power_differs_by_hour_records_each_hour_and_validates():
    import dataclasses

    wl = demo_workload(load_catalog(CATALOG), "2023-07-15")
    d0 = wl.inference[0]
    wl.inference[0] = dataclasses.replace(d0, power_per_gpu_kw=d0.power_per_gpu_kw * 1.5)
    doc = json.loads(json.dumps(run_daily_plan("2023-07-15", CATALOG, wl, None, "highs", 30.0,
                                               24).document))
    rows = [r for r in doc["workload"]["inference_power"]
            if (r["area"], r["gpu_type"]) == (d0.area, d0.gpu_type)]
    hours = [d.hour for d in wl.inference if (d.area, d.gpu_type) == (d0.area, d0.gpu_type)]
    assert len(rows) == len(hours) > 1
    power = {r["hour"]: r["power_per_gpu_kw"] for r in rows}
    assert power[d0.hour.strftime("%Y-%m-%dT%H:%M:%SZ")] == pytest.approx(d0.power_per_gpu_kw * 1.5)
    assert sum(v == d0.power_per_gpu_kw for v in power.values()) == len(hours) - 1
    assert read_plan_document(doc).workload.inference_power[0].power_per_gpu_kw > 0
    jsonschema.validate(doc, json.loads((ROOT / "docs" / "plan-document.schema.json")
                                        .read_text()))
