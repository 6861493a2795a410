import pandas as pd
import pytest

from carbonsched.domain import Job, ReasonCode, jsonable
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
    ("duration_hours", 0, "duration_hours must be >= 1"),
    ("power_per_gpu_kw", 0.0, "power_per_gpu_kw must be > 0"),
    ("deadline", T0 - pd.Timedelta(hours=1), "deadline is before earliest_start"),
])
def test_job_rejects_bad_fields(field, value, message):
    with pytest.raises(WorkloadError, match=message) as info:
        _job(**{field: value})
    assert isinstance(info.value, ValueError) and isinstance(info.value, CarbonschedError)


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
