"""Catalog and workload numbers are checked at load; no input gives a traceback (issue 7).

The examples from the issue, each with its message, then Hypothesis properties: catalogs and
workloads carrying NaN, inf, negatives, empty lists and huge values are refused with exit 2 and
an ``error:`` line that names the field — never a traceback, and never after forecasting began.
"""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.errors import CatalogError, WorkloadError
from carbonsched.limits import MAX_IDENTIFIER_CHARS
from carbonsched.pipeline import daily as pipeline
from carbonsched.workload.files import read_workload

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MINIMAL = (FIXTURES / "catalog" / "minimal.toml").read_text()


@pytest.fixture(autouse=True)
def _no_forecasting(monkeypatch, tmp_path):
    """Any forecasting during these tests is a failure: bad input must be refused first."""
    def boom(*a, **k):
        raise AssertionError("forecasting started before the input was refused")

    monkeypatch.setattr(pipeline, "gather_forecasts", boom)
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", f"sqlite:///{tmp_path}/store.db")


def _plan(*args: str):
    return runner.invoke(app, ["plan", "--no-store", "--date", "2023-07-15", *args])


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- catalog: the examples -----------------------------------------------------------------------

def test_power_cap_nan_in_a_shipped_catalog_is_exit_2_naming_site_and_field(tmp_path, shared_data):
    text = resources.files("carbonsched.regions").joinpath("global.toml").read_text("utf-8")
    first = re.search(r"it_power_cap_kw\s*=\s*[0-9.eE+_]+", text)
    assert first, "global.toml has no it_power_cap_kw"
    bad = tmp_path / "global-nan.toml"
    bad.write_text(text[:first.start()] + "it_power_cap_kw = nan" + text[first.end():])
    r = _plan("--catalog", str(bad), "--data-dir", str(shared_data))
    assert r.exit_code == 2, r.output
    out = _one_line(r.output)
    site = load_catalog("global").sites[0].id
    assert (f"site {site!r} (sites[0]): field 'it_power_cap_kw' is nan [kW], not a finite "
            "number; give the IT power cap in kW, > 0") in out
    assert "Traceback" not in r.output


@pytest.mark.parametrize(("old", "new", "message"), [
    ("board_power_w = 400.0", "board_power_w = inf",
     "field 'gpus.A100': field 'board_power_w' is inf [W], not a finite number"),
    ("metro = 20.0", "metro = nan",
     "site 'hub-a' (sites[0]): field 'latency_ms.metro' is nan [ms], not a finite number"),
    ("pue_min = 1.1", "pue_min = nan",
     "site 'hub-a' (sites[0]), field 'pue': field 'pue_min' is nan [-], not a finite number"),
    ("count = 8", "count = 1000000000000",
     "field 'count' = 1e+12 [GPUs] is above the largest accepted 1e+06 GPUs"),
    ("it_power_cap_kw = 10.0", "it_power_cap_kw = 1e30",
     "field 'it_power_cap_kw' = 1e+30 [kW] is above the largest accepted 1e+07 kW"),
    ("green_surplus_max_kw = 5.0", "green_surplus_max_kw = -inf",
     "field 'green_surplus_max_kw' is -inf [kW], not a finite number"),
    ("demand_weight = 2.0", "demand_weight = nan",
     "area 'metro': field 'demand_weight' is nan [-], not a finite number"),
    ("latitude = 10.0", "latitude = nan",
     "site 'hub-a' (sites[0]): field 'latitude' is nan [°], not a finite number"),
    ("pue_min = 1.1", "pue_min = 1.1\nhumidity_ref_pct = 150.0",
     "field 'humidity_ref_pct' = 150 [%] is outside 0..100 %"),
])
def test_catalog_numbers_are_finite_and_in_range(tmp_path, old, new, message):
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace(old, new, 1))
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert message in str(info.value)
    r = _plan("--catalog", str(path))
    assert r.exit_code == 2 and message in _one_line(r.output)


# --- workloads: the examples ---------------------------------------------------------------------

def _job(**over):
    job = {"id": "j1", "gpu_type": "A100", "gpus": 1, "duration_hours": 2,
           "power_per_gpu_kw": 0.5, "earliest_start": "2023-07-15T00:00:00Z",
           "deadline": "2023-07-15T06:00:00Z"}
    job.update(over)
    return job


def _write_jobs(tmp_path, text: str, name: str = "jobs.json") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(("text", "message"), [
    ('{"jobs": [JOB], "inference": []}'.replace("JOB", json.dumps(_job())[:-1] + ', "gpus": 1e30}'),
     "jobs[0] (id 'j1'), field 'gpus': must be 1..100000 GPUs, got 1e+30"),
    ('{"jobs": [JOB], "inference": []}'.replace(
        "JOB", json.dumps(_job())[:-1] + f', "duration_hours": {10**30}}}'),
     "field 'duration_hours': must be a finite number > 0 and <= 8784 h, got "
     "1000000000000000000000000000000"),
    ('{"jobs": [JOB], "inference": []}'.replace(
        "JOB", json.dumps(_job())[:-1] + f', "duration_hours": {10**400}}}'),
     "field 'duration_hours': expected a number [h], got 1000000000"),
    ('{"jobs": [JOB], "inference": []}'.replace(
        "JOB", json.dumps(_job())[:-1] + ', "power_per_gpu_kw": NaN}'),
     "field 'power_per_gpu_kw': must be a finite number > 0 and <= 10 kW, got nan"),
    ('{"jobs": [], "inference": [{"area": "a", "hour": "2023-07-15T00:00:00Z", '
     '"gpu_type": "T4", "gpus": 1, "slo_ms": Infinity, "power_per_gpu_kw": 0.1}]}',
     "inference[0], field 'slo_ms': must be a finite number > 0 and <= 100000 ms, got inf"),
])
def test_huge_and_non_finite_job_values_are_exit_2(tmp_path, text, message):
    p = _write_jobs(tmp_path, text)
    with pytest.raises(WorkloadError) as info:
        read_workload(p)
    assert message in str(info.value)
    assert str(info.value).count(f"{p}") == 1            # said once, not wrapped twice
    r = _plan("--jobs", str(p))
    assert r.exit_code == 2, r.output
    assert message in _one_line(r.output)


@pytest.mark.parametrize("name", ["jobs.json", "jobs.csv"])
def test_non_utf8_jobs_file_is_exit_2(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b'{"jobs": [{"id": "caf\xe9"}], "inference": []}' if name.endswith("json")
                  else b"kind,id\nbatch,caf\xe9\n")
    r = _plan("--jobs", str(p))
    assert r.exit_code == 2, r.output
    assert f"{p}: byte" in _one_line(r.output) and "is not UTF-8" in r.output
    assert "save the file as UTF-8" in _one_line(r.output)


def test_job_id_longer_than_the_identifier_grammar_is_refused_at_input(tmp_path):
    ok = _write_jobs(tmp_path, json.dumps({"jobs": [_job(id="x" * MAX_IDENTIFIER_CHARS)]}),
                     "ok.json")
    assert read_workload(ok).jobs[0].id == "x" * 100
    p = _write_jobs(tmp_path, json.dumps({"jobs": [_job(id="x" * (MAX_IDENTIFIER_CHARS + 1))]}))
    r = _plan("--jobs", str(p))
    assert r.exit_code == 2, r.output
    assert "field 'id': job id 'xxxx" in _one_line(r.output)
    assert "...' is 101 characters long; give 1..100 printable characters" in _one_line(r.output)


def test_jobs_path_that_is_a_folder_is_exit_2(tmp_path):
    d = tmp_path / "jobs.json"
    d.mkdir()
    r = _plan("--jobs", str(d))
    assert r.exit_code == 2 and "workload file not found" in r.output


# --- properties ----------------------------------------------------------------------------------

BAD_NUMBERS = st.sampled_from(["nan", "inf", "-inf", "-1.0", "-7", "1e30", "1e300",
                               "9223372036854775807", "0.0"])
# (key line in minimal.toml, is the value allowed to be 0)
CATALOG_NUMBERS = [
    ("latitude = 10.0", True), ("longitude = 1.0", True), ("demand_weight = 2.0", True),
    ("it_power_cap_kw = 10.0", False), ("green_surplus_max_kw = 5.0", True),
    ("count = 8", True), ("board_power_w = 400.0", False), ("pue_min = 1.1", False),
    ("metro = 20.0", True), ("far = 2.6", True), ("it_power_cap_kw = 5.0", False),
    ("count = 16", True), ("board_power_w = 70.0", False),
]


def _catalog_case(line: str, zero_ok: bool, value: str) -> str | None:
    if value == "0.0" and zero_ok:
        return None
    if value in ("-1.0", "-7") and line.startswith(("longitude", "latitude")):
        return None           # a negative latitude or longitude is valid (south, west)
    key = line.split(" = ")[0]
    return MINIMAL.replace(line, f"{key} = {value}", 1)


@pytest.mark.parametrize(("line", "value", "ok"), [
    ("latitude = 10.0", "-7", True), ("latitude = 10.0", "-90.0", True),
    ("latitude = 10.0", "90.0", True), ("latitude = 10.0", "-90.001", False),
    ("latitude = 10.0", "90.001", False), ("longitude = 1.0", "-180.0", True),
    ("longitude = 1.0", "180.0", True), ("longitude = 1.0", "180.001", False),
    ("longitude = 1.0", "-180.001", False),
])
def test_latitude_and_longitude_at_and_past_their_limits(tmp_path, line, value, ok):
    """Found by Hypothesis: the property fed latitude -1.0 as bad input, but a southern
    latitude is valid and planning rightly went on to forecast. The range itself is checked
    here at its edges: -90..90 degrees north and -180..180 degrees east are accepted."""
    path = tmp_path / "edge.toml"
    key = line.split(" = ")[0]
    path.write_text(MINIMAL.replace(line, f"{key} = {value}", 1))
    if ok:
        cat = load_catalog(path)
        where = cat.areas if line.startswith("longitude") else cat.sites
        assert float(value) in [getattr(x, key) for x in
                                (where.values() if isinstance(where, dict) else where)]
    else:
        r = _plan("--catalog", str(path))
        assert r.exit_code == 2, r.output
        span = "-90..90" if key == "latitude" else "-180..180"
        assert f"field '{key}' {float(value)} is outside {span}" in _one_line(r.output)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CATALOG_NUMBERS), value=BAD_NUMBERS,
       structure=st.sampled_from(["numbers", "no sites", "no areas", "no gpus"]))
def test_property_bad_catalogs_are_exit_2_never_a_traceback(tmp_path_factory, case, value,
                                                            structure):
    if structure == "numbers":
        text = _catalog_case(case[0], case[1], value)
        if text is None:
            return
    elif structure == "no sites":
        text = MINIMAL[:MINIMAL.index("[[sites]]")] + "sites = []\n"
    elif structure == "no areas":
        text = (MINIMAL[:MINIMAL.index("[areas.metro]")] + "areas = {}\n\n"
                + MINIMAL[MINIMAL.index("[[sites]]"):])
    else:
        text = MINIMAL.replace("[sites.gpus.A100]\ncount = 8\nboard_power_w = 400.0\n",
                               "gpus = {}\n", 1)
    path = tmp_path_factory.mktemp("cat") / "gen.toml"
    path.write_text(text)
    r = _plan("--catalog", str(path))
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: "), r.output
    assert "Traceback" not in r.output and "regions/schema.md" in r.output


JOB_NUMBERS = ["gpus", "duration_hours", "power_per_gpu_kw"]
INF_NUMBERS = ["gpus", "slo_ms", "power_per_gpu_kw"]
BAD_VALUES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -1, -0.5, 0, 1e30, 10**30, 10**400, 2**63,
                     1.5e308, "", "many", True, None, [], {}, [1]]),
    st.floats(max_value=-1e-9), st.integers(min_value=10**6))


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(["jobs", "inference"]), field=st.data(), value=BAD_VALUES,
       extra_jobs=st.integers(0, 2), empty_sites=st.booleans())
def test_property_bad_workloads_are_exit_2_never_a_traceback(tmp_path_factory, where, field,
                                                             value, extra_jobs, empty_sites):
    jobs = [_job(id=f"ok{k}", allowed_sites=[] if empty_sites else ["cn-nm-horinger"])
            for k in range(extra_jobs)]
    inference = []
    if where == "jobs":
        name = field.draw(st.sampled_from(JOB_NUMBERS))
        if name == "gpus" and value == 0:
            value = -3
        jobs.append(_job(id="bad", **{name: value}))
    else:
        name = field.draw(st.sampled_from(INF_NUMBERS))
        if name == "gpus" and value == 0:
            value = -3
        inference.append({"area": "beijing", "hour": "2023-07-15T00:00:00Z", "gpu_type": "T4",
                          "gpus": 1, "slo_ms": 20.0, "power_per_gpu_kw": 0.14, name: value})
    path = tmp_path_factory.mktemp("wl") / "gen.json"
    path.write_text(json.dumps({"jobs": jobs, "inference": inference}))
    r = _plan("--jobs", str(path))
    assert r.exit_code == 2, (value, r.output)
    out = _one_line(r.output)
    assert out.startswith("error: ") and f"field {name!r}" in out, out
    assert "Traceback" not in r.output


def test_empty_workload_lists_are_a_valid_empty_day(tmp_path, monkeypatch):
    # empty lists are not an error: nothing to plan is planned (and here, never forecast)
    p = _write_jobs(tmp_path, '{"jobs": [], "inference": []}')
    wl = read_workload(p)
    assert wl.jobs == [] and wl.inference == []


@pytest.mark.parametrize(("old", "new", "message"), [
    ('id = "hub-a"', 'id = "' + "h" * 101 + '"', "...' is 101 characters long; give 1..100 "
     "printable characters"),
    ("[sites.gpus.A100]\ncount = 8", "[sites.gpus." + "G" * 41 + "]\ncount = 8",
     "the GPU type name is 41 characters long"),
])
def test_catalog_names_longer_than_the_store_columns_are_refused(tmp_path, old, new, message):
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace(old, new, 1))
    with pytest.raises(CatalogError, match=re.escape(message)):
        load_catalog(path)


def test_job_gpu_type_longer_than_the_store_column_is_refused(tmp_path):
    p = _write_jobs(tmp_path, json.dumps({"jobs": [_job(gpu_type="A" * 41)]}))
    r = _plan("--jobs", str(p))
    assert r.exit_code == 2
    assert "field 'gpu_type': GPU type is 41 characters long, the store keeps at most 40" in \
        _one_line(r.output)
