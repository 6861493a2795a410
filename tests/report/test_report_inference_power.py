"""An inference hour's energy in the Scope 2 report uses that hour's power per GPU.

A workload file gives each inference demand (area, hour, GPU type) its own
``power_per_gpu_kw``; the planner prices each hour at its own power, and the plan document's
``workload.inference_power`` must let the report do the same. Fleet as
``test_report_scope2.py`` (PUE fixed at 1.25).
"""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.domain import InferenceDemand, Workload
from carbonsched.pipeline.daily import workload_rows
from carbonsched.report import build_report
from carbonsched.workload.files import it_power_per_gpu_kw

from .builders import plan_doc

pytestmark = pytest.mark.shared_data

H10, H11 = pd.Timestamp("2023-07-03T10:00Z"), pd.Timestamp("2023-07-03T11:00Z")


def _demand(hour: pd.Timestamp, kw: float) -> InferenceDemand:
    return InferenceDemand(area="metro", hour=hour, gpu_type="A100", gpus=2, slo_ms=50.0,
                           power_per_gpu_kw=kw)


def _doc(inference_power: list[dict]) -> dict:
    doc = plan_doc("2023-07-03", "two-markets", [])
    doc["inference"] = [{"area": "metro", "hour": h, "site": "de-site", "gpu_type": "A100",
                         "gpus": 2, "energy_kwh": 0.0, "emissions_kg": 0.0}
                        for h in ("2023-07-03T10:00:00Z", "2023-07-03T11:00:00Z")]
    doc["workload"]["inference_power"] = inference_power
    return doc


def test_an_area_whose_power_differs_by_hour_gets_one_row_per_hour_and_the_report_uses_it(
        fixtures_dir, shared_data):
    rows = workload_rows(Workload(jobs=[], inference=[_demand(H10, 0.3), _demand(H11, 0.5)]))
    assert rows["inference_power"] == [
        {"area": "metro", "gpu_type": "A100", "hour": "2023-07-03T10:00:00Z",
         "power_per_gpu_kw": 0.3},
        {"area": "metro", "gpu_type": "A100", "hour": "2023-07-03T11:00:00Z",
         "power_per_gpu_kw": 0.5}]
    rep = build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                       "2023-07-03", "2023-07-03", plans=[_doc(rows["inference_power"])])
    # 2 GPUs × 0.3 kW × 1 h + 2 GPUs × 0.5 kW × 1 h = 1.6 kWh (one power for both: 1.2 kWh)
    assert rep.totals["it_energy_kwh"] == pytest.approx(1.6)
    assert rep.totals["facility_energy_kwh"] == pytest.approx(2.0)


def test_one_power_in_every_hour_is_one_row_without_an_hour(fixtures_dir, shared_data):
    rows = workload_rows(Workload(jobs=[], inference=[_demand(H10, 0.4), _demand(H11, 0.4)]))
    assert rows["inference_power"] == [{"area": "metro", "gpu_type": "A100",
                                        "power_per_gpu_kw": 0.4}]
    rep = build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                       "2023-07-03", "2023-07-03", plans=[_doc(rows["inference_power"])])
    assert rep.totals["it_energy_kwh"] == pytest.approx(1.6)


def test_an_hour_row_wins_over_the_every_hour_row(fixtures_dir, shared_data):
    doc = _doc([{"area": "metro", "gpu_type": "A100", "power_per_gpu_kw": 0.4},
                {"area": "metro", "gpu_type": "A100", "hour": "2023-07-03T11:00:00Z",
                 "power_per_gpu_kw": 0.1}])
    rep = build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                       "2023-07-03", "2023-07-03", plans=[doc])
    # 10:00 at the every-hour 0.4 kW, 11:00 at its own 0.1 kW: 2 × 0.4 + 2 × 0.1 = 1.0 kWh
    assert rep.totals["it_energy_kwh"] == pytest.approx(1.0)
    assert not any("without a recorded IT power" in n for n in rep.metadata["notes"])


def test_an_hour_without_a_row_takes_the_datasheet_power_and_says_so(fixtures_dir, shared_data):
    doc = _doc([{"area": "metro", "gpu_type": "A100", "hour": "2023-07-03T11:00:00Z",
                 "power_per_gpu_kw": 0.1}])
    rep = build_report(None, fixtures_dir / "report" / "two_markets.toml", shared_data,
                       "2023-07-03", "2023-07-03", plans=[doc])
    assert ["1 inference row(s) without a recorded IT power: the GPU type's datasheet figure "
            "is used"] == [n for n in rep.metadata["notes"] if "recorded IT power" in n]
    datasheet_kw = it_power_per_gpu_kw("A100", load_catalog(fixtures_dir / "report"
                                                            / "two_markets.toml"))
    assert datasheet_kw not in (0.1, 0.0)
    # 10:00 at the datasheet figure, 11:00 at its own 0.1 kW
    assert rep.totals["it_energy_kwh"] == pytest.approx(2 * datasheet_kw + 2 * 0.1)
