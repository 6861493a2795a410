import numpy as np
import pandas as pd
import pytest

from carbonsched.domain import InferenceDemand, Job, ReasonCode, jsonable
from carbonsched.errors import CarbonschedError, TimeAxisError, WorkloadError

T0 = pd.Timestamp("2023-07-15", tz="UTC")


def _job(**kw):
    args = dict(id="j1", tenant="t", gpu_type="A100", gpus=8, duration_hours=3,
                power_per_gpu_kw=0.5, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=10))
    args.update(kw)
    return Job(**args)


def test_job_energy_and_power():
    j = _job()
    assert j.it_power_kw == 4.0
    assert j.energy_kwh == 12.0


@pytest.mark.parametrize(("field", "value", "message"), [
    ("gpus", 0, "gpus must be >= 1"),
    ("duration_hours", 0, "duration_minutes must be a whole number >= 1"),
    ("duration_hours", 1.0 / 7, "not a whole number of minutes"),
    ("max_pieces", 3, "max_pieces 3 > 1 needs preemptible"),
    ("max_pieces", 0, "max_pieces must be a whole number in 1..24"),
    ("checkpoint_overhead_minutes", -5, "checkpoint_overhead_minutes must be a whole number"),
    ("power_per_gpu_kw", 0.0, r"power_per_gpu_kw must be a finite number > 0 \[kW\], got 0$"),
    ("power_per_gpu_kw", np.float64("nan"), "power_per_gpu_kw must be a finite number > 0 "
     r"\[kW\], got nan$"),
    ("power_per_gpu_kw", float("inf"), "power_per_gpu_kw must be a finite number > 0"),
    ("power_per_gpu_kw", True, "power_per_gpu_kw must be a finite number > 0"),
    ("deadline", T0 - pd.Timedelta(hours=1), "deadline is before earliest_start"),
])
def test_job_rejects_bad_fields(field, value, message):
    with pytest.raises(WorkloadError, match=message) as info:
        _job(**{field: value})
    assert isinstance(info.value, ValueError) and isinstance(info.value, CarbonschedError)


def test_job_minutes_are_authoritative_and_hours_stay_readable():
    j = _job(duration_hours=1.5)
    assert j.duration_minutes == 90 and j.duration_hours == 1.5
    assert j.energy_kwh == pytest.approx(4.0 * 1.5)
    m = Job(id="m", tenant="t", gpu_type="A100", gpus=1, duration_minutes=95,
            power_per_gpu_kw=1.0, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=3))
    assert m.duration_hours == pytest.approx(95 / 60)
    # dataclass round trip (dispatch and tests rebuild jobs from their fields)
    assert Job(**{**m.__dict__, "id": "m2"}).duration_minutes == 95
    assert "duration_minutes" in jsonable(m) and "duration_hours" not in jsonable(m)
    with pytest.raises(WorkloadError, match="disagree"):
        _job(duration_minutes=100)
    p = _job(preemptible=True, max_pieces=3, checkpoint_overhead_minutes=10)
    assert (p.preemptible, p.max_pieces, p.checkpoint_overhead_minutes) == (True, 3, 10)


def test_job_refuses_naive_times():
    with pytest.raises(TimeAxisError, match="job j1 earliest_start .* naive"):
        _job(earliest_start=pd.Timestamp("2023-07-15"))


def test_jsonable_timestamps_enums_floats():
    doc = jsonable({"t": T0 + pd.Timedelta(hours=8), "r": ReasonCode.NO_FEASIBLE_SLOT,
                    "x": 1.23456789, "j": _job()})
    assert doc["t"] == "2023-07-15T08:00:00Z"
    assert doc["r"] == "NoFeasibleSlot"
    assert doc["x"] == 1.234568
    assert doc["j"]["earliest_start"] == "2023-07-15T00:00:00Z"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("power_per_gpu_kw", 0.0, r"inference fra at 2023-07-15T00:00:00\+00:00: power_per_gpu_kw "
     r"must be a finite number > 0 \[kW\], got 0$"),
    ("power_per_gpu_kw", -0.3, "power_per_gpu_kw must be a finite number > 0"),
    ("power_per_gpu_kw", float("nan"), "power_per_gpu_kw must be a finite number > 0"),
    ("power_per_gpu_kw", "0.3", "power_per_gpu_kw must be a finite number > 0 .*got '0.3'"),
    ("slo_ms", 0.0, r"slo_ms must be a finite number > 0 \[ms\], got 0$"),
    ("slo_ms", float("inf"), "slo_ms must be a finite number > 0"),
    ("gpus", -1, "gpus must be >= 0"),
])
def test_inference_demand_rejects_bad_fields(field, value, message):
    args = dict(area="fra", hour=T0, gpu_type="A100", gpus=2, slo_ms=20.0,
                power_per_gpu_kw=0.3)
    InferenceDemand(**args)                                   # the valid one builds
    # just inside the limits: the smallest positive values and zero GPUs build too
    InferenceDemand(**{**args, "power_per_gpu_kw": 5e-324, "slo_ms": 5e-324, "gpus": 0})
    with pytest.raises(WorkloadError, match=message):
        InferenceDemand(**{**args, field: value})
