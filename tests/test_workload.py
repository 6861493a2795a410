from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.domain import WorkKind, Workload
from carbonsched.errors import WorkloadError
from carbonsched.workload.files import (
    demo_workload,
    diurnal_factor,
    fleet_load,
    read_workload,
    trace_gpu_mix,
    workload_from_traces,
    write_workload,
)

CHINA = load_catalog("china-eastdata-westcompute")
GLOBAL = load_catalog("global")
DAY0 = pd.Timestamp("2023-07-15T00:00Z")
DAY1 = pd.Timestamp("2023-07-16T00:00Z")


def as_tuples(w: Workload) -> tuple[list, list]:
    return ([(j.id, j.tenant, j.kind, j.gpu_type, j.gpus, j.duration_hours, j.power_per_gpu_kw,
              j.earliest_start, j.deadline, j.allowed_sites) for j in w.jobs],
            [(d.area, d.hour, d.gpu_type, d.gpus, d.slo_ms, d.power_per_gpu_kw)
             for d in w.inference])


# --- reading the fixtures ----------------------------------------------------------------------

def test_read_json_fixture(fixtures_dir: Path) -> None:
    w = read_workload(fixtures_dir / "workload" / "day.json")
    train, batch = w.jobs
    assert train.id == "train-1" and train.kind == WorkKind.TRAINING and train.gpus == 8
    assert train.earliest_start == pd.Timestamp("2023-07-15T02:00:00Z")  # +08:00 converted
    assert train.deadline == pd.Timestamp("2023-07-15T20:00:00Z")
    assert train.allowed_sites == ("cn-nm-horinger", "cn-he-zhangjiakou")
    assert train.energy_kwh == pytest.approx(8 * 0.8125 * 4)
    assert batch.tenant == "default" and batch.kind == WorkKind.BATCH
    assert batch.allowed_sites == ()
    bj, sh = w.inference
    assert bj.hour == pd.Timestamp("2023-07-15T12:00:00Z") and bj.gpus == 20
    assert sh.gpus == 0 and sh.slo_ms == 15.0


def test_csv_fixture_equals_json_fixture(fixtures_dir: Path) -> None:
    a = read_workload(fixtures_dir / "workload" / "day.json")
    b = read_workload(fixtures_dir / "workload" / "day.csv")
    assert as_tuples(a) == as_tuples(b)


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    w = demo_workload(CHINA, "2023-07-15", seed=3)
    path = write_workload(w, tmp_path / f"w{suffix}")
    assert as_tuples(read_workload(path)) == as_tuples(w)


# --- errors name file, line or entry, and field -------------------------------------------------

def json_doc(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "workload" / "day.json").read_text())


JSON_BAD = [
    ("naive", ("jobs", 1, "earliest_start", "2023-07-15T00:00:00"),
     r"jobs\[1\] \(id 'batch-2'\), field 'earliest_start': timestamp '2023-07-15T00:00:00' is "
     r"naive \(no UTC offset\); add 'Z' for UTC"),
    # job times may be any instant (issue 14); inference demand stays per hour
    ("off the hour", ("inference", 0, "hour", "2023-07-15T20:30:00Z"),
     r"inference\[0\], field 'hour': timestamp .* is not on the hour"),
    ("zero gpus", ("jobs", 0, "gpus", 0),
     r"jobs\[0\] \(id 'train-1'\), field 'gpus': must be 1..100000 GPUs, got 0"),
    ("fractional minutes", ("jobs", 0, "duration_hours", 0.01),
     r"field 'duration_hours': 0.01 h is not a whole number of minutes; give "
     r"duration_minutes"),
    ("bad power", ("jobs", 1, "power_per_gpu_kw", "lots"),
     r"jobs\[1\] \(id 'batch-2'\), field 'power_per_gpu_kw': expected a number \[kW\], "
     r"got 'lots'"),
    ("bad kind", ("jobs", 0, "kind", "inference"),
     r"field 'kind': unknown job kind 'inference'; give 'training' or 'batch'"),
    ("deadline too early", ("jobs", 0, "deadline", "2023-07-15T05:00:00Z"),
     r"field 'deadline': deadline 2023-07-15T05:00:00\+00:00 is before earliest_start \+ "
     r"duration \(2023-07-15T06:00:00\+00:00\)"),
    ("unknown field", ("jobs", 1, "gpu", 1),
     r"jobs\[1\] \(id 'batch-2'\), field 'gpu': unknown field; remove it"),
    ("inference naive hour", ("inference", 1, "hour", "2023-07-15T13:00"),
     r"inference\[1\], field 'hour': timestamp '2023-07-15T13:00' is naive"),
    ("negative inference", ("inference", 0, "gpus", -1),
     r"inference\[0\], field 'gpus': must be 0..100000 GPUs, got -1"),
    ("sites not a list", ("jobs", 0, "allowed_sites", {"a": 1}),
     r"field 'allowed_sites': expected a list of site ids"),
]


@pytest.mark.parametrize(("what", "edit", "message"), JSON_BAD, ids=[b[0] for b in JSON_BAD])
def test_json_errors(tmp_path: Path, fixtures_dir: Path, what: str, edit: tuple,
                     message: str) -> None:
    doc = json_doc(fixtures_dir)
    key, i, field, value = edit
    doc[key][i][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match=message) as info:
        read_workload(path)
    assert str(path) in str(info.value)


def test_json_missing_field_and_duplicates(tmp_path: Path, fixtures_dir: Path) -> None:
    doc = json_doc(fixtures_dir)
    del doc["jobs"][0]["deadline"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match=r"jobs\[0\] \(id 'train-1'\), field 'deadline': is "
                                            r"missing; give deadline for every job"):
        read_workload(path)
    doc = json_doc(fixtures_dir)
    doc["jobs"][1]["id"] = "train-1"
    path.write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match=r"jobs\[1\] \(id 'train-1'\), field 'id': duplicate "
                                            r"job id 'train-1' \(also jobs\[0\]"):
        read_workload(path)
    doc = json_doc(fixtures_dir)
    doc["inference"][1]["area"] = "beijing"
    doc["inference"][1]["hour"] = "2023-07-15T12:00:00Z"
    path.write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match=r"inference\[1\]: duplicate inference demand for "
                                            r"area 'beijing'.* \(also inference\[0\]\)"):
        read_workload(path)


def test_json_syntax_and_shape(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"jobs": [\n  {"id": 1,}\n]}')
    with pytest.raises(WorkloadError, match=r"bad\.json, line 2: not valid JSON"):
        read_workload(path)
    path.write_text('{"tasks": []}')
    with pytest.raises(WorkloadError, match=r"expected an object with keys 'jobs' and "
                                            r"'inference', got keys \['tasks'\]"):
        read_workload(path)


def csv_lines(fixtures_dir: Path) -> list[str]:
    return (fixtures_dir / "workload" / "day.csv").read_text().splitlines()


CSV_BAD = [
    ("naive on line 3", 2,
     ("2023-07-15T00:00:00Z,2023-07-15T03", "2023-07-15T00:00:00,2023-07-15T03"),
     r"day\.csv, line 3, field 'earliest_start': timestamp '2023-07-15T00:00:00' is naive"),
    ("bad kind on line 2", 1, ("training,", "serving,"),
     r"day\.csv, line 2, field 'kind': unknown kind 'serving'; give one of training, batch, "
     r"inference"),
    ("missing gpus on line 4", 3, ("T4,20,", "T4,,"),
     r"day\.csv, line 4, field 'gpus': is missing; give gpus for every inference demand"),
    ("missing area on line 5", 4, ("shanghai", ""),
     r"day\.csv, line 5, field 'area': is missing"),
    ("unknown column", 0, ("slo_ms", "slo"),
     r"day\.csv, line 1: unknown column 'slo'; use the columns kind, id"),
    ("extra cells", 2, (",,,", ",,,,,"),
     r"day\.csv, line 3: has more cells than the header"),
]


@pytest.mark.parametrize(("what", "line", "edit", "message"), CSV_BAD, ids=[b[0] for b in CSV_BAD])
def test_csv_errors(tmp_path: Path, fixtures_dir: Path, what: str, line: int, edit: tuple,
                    message: str) -> None:
    lines = csv_lines(fixtures_dir)
    old, new = edit
    assert old in lines[line]
    lines[line] = lines[line].replace(old, new, 1)
    path = tmp_path / "day.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(WorkloadError, match=message):
        read_workload(path)


def test_csv_without_kind_column(tmp_path: Path) -> None:
    path = tmp_path / "j.csv"
    path.write_text("id,gpu_type\nx,A100\n")
    with pytest.raises(WorkloadError, match=r"j\.csv, line 1: missing column 'kind'"):
        read_workload(path)


def test_unknown_suffix_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"jobs\.yaml: unknown workload format '\.yaml'"):
        p = tmp_path / "jobs.yaml"
        p.write_text("")
        read_workload(p)
    with pytest.raises(WorkloadError, match=r"nope\.json: workload file not found"):
        read_workload(tmp_path / "nope.json")
    with pytest.raises(WorkloadError, match=r"unknown workload format '\.txt'"):
        write_workload(Workload([], []), tmp_path / "w.txt")


# --- demo --------------------------------------------------------------------------------------

def test_demo_workload_is_deterministic_and_valid() -> None:
    a = demo_workload(CHINA, "2023-07-15", seed=0)
    b = demo_workload(CHINA, "2023-07-15", seed=0)
    c = demo_workload(CHINA, "2023-07-15", seed=1)
    assert as_tuples(a) == as_tuples(b)
    assert as_tuples(a) != as_tuples(c)
    assert len(a.jobs) == 30
    assert len(a.inference) == 4 * 24
    for j in a.jobs:
        assert DAY0 <= j.earliest_start
        assert j.earliest_start + j.duration_hours * pd.Timedelta(hours=1) <= j.deadline <= DAY1
        assert max(s.gpu_count(j.gpu_type) for s in CHINA.sites) >= j.gpus
    # mean inference GPUs = 0.3 x 128 T4 = 38.4 (rounding per area and hour)
    assert sum(d.gpus for d in a.inference) / 24 == pytest.approx(38.4, abs=1.0)


def test_demo_workload_any_date() -> None:
    w = demo_workload(GLOBAL, "2031-02-28", seed=0)
    assert {j.earliest_start.date() for j in w.jobs} == {pd.Timestamp("2031-02-28").date()}
    assert {d.area for d in w.inference} == set(GLOBAL.areas)


def test_diurnal_factor() -> None:
    assert diurnal_factor(20.0, 0.4, 20.0) == pytest.approx(1.4)
    assert diurnal_factor(8.0, 0.4, 20.0) == pytest.approx(0.6)
    assert diurnal_factor(list(range(24)), 0.4, 20.0).mean() == pytest.approx(1.0)


# --- traces ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def china_day(shared_data: Path) -> Workload:
    return workload_from_traces(shared_data, "2023-07-15", CHINA, seed=0)


@pytest.mark.shared_data
def test_traces_counts_and_sums(china_day: Workload) -> None:
    jobs = china_day.jobs
    assert len(jobs) == 260  # GAIA PAI arrivals on trace day 195
    assert Counter(j.gpu_type for j in jobs) == {"A100": 192, "T4": 42, "V100": 26}
    assert Counter(j.gpus for j in jobs) == {1: 258, 8: 2}
    assert Counter(j.kind for j in jobs) == {WorkKind.BATCH: 254, WorkKind.TRAINING: 6}
    assert sum(j.gpus * j.duration_hours for j in jobs) == 821
    assert sum(j.energy_kwh for j in jobs) == pytest.approx(561.38, abs=0.01)
    n_typed = {t: sum(1 for s in CHINA.sites if s.gpu_count(t) > 0) for t in CHINA.gpu_types()}
    assert sum(1 for j in jobs if len(j.allowed_sites) < n_typed[j.gpu_type]) == 39
    assert len(china_day.inference) == 4 * 24
    # 821 GPU-h / 24 x (3867.52 / 2219.28) = 59.6 GPUs mean before the edge-capacity cap
    # (1430 GPU-h uncapped); the evening peaks are shed to 80 % of the T4s within SLO
    assert sum(d.gpus for d in china_day.inference) == 1406


@pytest.mark.shared_data
def test_traces_without_the_day_boundary(shared_data: Path, china_day: Workload) -> None:
    # the rolling horizon's workload: the same draws, each job at its arrival hour with its
    # unclipped deadline (issue 14: no deadline cut to midnight)
    free = workload_from_traces(shared_data, "2023-07-15", CHINA, seed=0, clip_to_day=False)
    assert [(j.id, j.gpu_type, j.gpus, j.duration_hours, j.allowed_sites, j.kind)
            for j in free.jobs] == [(j.id, j.gpu_type, j.gpus, j.duration_hours,
                                     j.allowed_sites, j.kind) for j in china_day.jobs]
    assert free.inference == china_day.inference
    moved = [(a, b) for a, b in zip(china_day.jobs, free.jobs, strict=True)
             if a.earliest_start != b.earliest_start]
    past_midnight = [b for b in free.jobs if b.deadline > DAY0 + pd.Timedelta(days=1)]
    # day-bounded: a job that would overrun the day starts earlier; here it keeps its arrival
    assert moved and all(b.earliest_start > a.earliest_start for a, b in moved)
    assert len(past_midnight) > 0
    for a, b in zip(china_day.jobs, free.jobs, strict=True):
        assert b.deadline >= a.deadline
        # slack unchanged where the day boundary did not bind
        if a.deadline < DAY0 + pd.Timedelta(days=1) and a.earliest_start == b.earliest_start:
            assert b.deadline == a.deadline
        assert b.earliest_start + b.duration_hours * pd.Timedelta(hours=1) <= b.deadline


@pytest.mark.shared_data
def test_traces_specific_jobs(china_day: Workload) -> None:
    first = china_day.jobs[0]
    assert (first.id, first.tenant, first.gpu_type, first.gpus, first.duration_hours) == \
        ("20230715-0000", "beijing", "A100", 1, 1)
    assert first.earliest_start == DAY0
    assert first.deadline == pd.Timestamp("2023-07-15T04:00Z")
    # cn-north residency group, home (nearest to beijing) first
    assert first.allowed_sites == ("cn-he-zhangjiakou", "cn-nm-horinger")
    assert first.power_per_gpu_kw == 0.8125
    big = [j for j in china_day.jobs if j.gpus == 8]
    assert [j.id for j in big] == ["20230715-0082", "20230715-0191"]
    assert all(j.kind == WorkKind.TRAINING and j.gpu_type == "A100" for j in big)


@pytest.mark.shared_data
def test_traces_inference_fits_edge_capacity_every_day(shared_data) -> None:
    """Proportional split over the sites within SLO never needs more than 80 % (+ rounding)."""
    from carbonsched.catalog import load_catalog

    for name in ("china-eastdata-westcompute", "global"):
        cat = load_catalog(name)
        for day in ("2023-07-02", "2023-07-03", "2023-12-20"):
            wl = workload_from_traces(shared_data, day, cat, seed=1)
            load: dict = {}
            for d in wl.inference:
                sites = [s for s in cat.sites if s.gpu_count(d.gpu_type) > 0
                         and s.latency_ms.get(d.area, 1e9) <= d.slo_ms]
                cap = sum(s.gpu_count(d.gpu_type) for s in sites)
                for s in sites:
                    key = (s.id, d.hour)
                    load[key] = load.get(key, 0.0) + d.gpus * s.gpu_count(d.gpu_type) / cap
            for (sid, _), used in load.items():
                assert used <= 0.8 * cat.site(sid).gpu_count("T4") + 0.5 * len(cat.areas)


@pytest.mark.shared_data
def test_traces_home_site_first(china_day: Workload) -> None:
    # the carbon-agnostic baseline runs a job at its first allowed site: the tenant's nearest
    for j in china_day.jobs:
        lat = [CHINA.site(s).latency_ms.get(j.tenant, float("inf")) for s in j.allowed_sites]
        assert lat[0] == min(lat)
        assert all(CHINA.site(s).gpu_count(j.gpu_type) > 0 for s in j.allowed_sites)
    unrestricted = [j for j in china_day.jobs if len(j.allowed_sites) == sum(
        1 for s in CHINA.sites if s.gpu_count(j.gpu_type) > 0)]
    assert len(unrestricted) == 260 - 39


@pytest.mark.shared_data
def test_traces_invariants(china_day: Workload) -> None:
    for j in china_day.jobs:
        assert DAY0 <= j.earliest_start
        assert j.earliest_start + j.duration_hours * pd.Timedelta(hours=1) <= j.deadline <= DAY1
        sites = [CHINA.site(s) for s in j.allowed_sites] or CHINA.sites
        assert any(s.gpu_count(j.gpu_type) >= j.gpus for s in sites), j.id
    # evening peak at 20:00 Beijing time = 12:00 UTC
    bj = {d.hour: d.gpus for d in china_day.inference if d.area == "beijing"}
    assert bj[pd.Timestamp("2023-07-15T12:00Z")] == max(bj.values()) == 23  # capped from 25
    # trough at 08:00 Beijing time = 00:00 UTC: 59.58 x 0.3 x 0.6 = 10.7 -> 11
    assert bj[DAY0] == min(bj.values()) == 11


@pytest.mark.shared_data
def test_traces_deterministic_and_scaled(shared_data: Path, china_day: Workload) -> None:
    again = workload_from_traces(shared_data, "2023-07-15", CHINA, seed=0)
    assert as_tuples(again) == as_tuples(china_day)
    other = workload_from_traces(shared_data, "2023-07-15", CHINA, seed=1)
    assert as_tuples(other) != as_tuples(china_day)
    assert len(workload_from_traces(shared_data, "2023-07-15", CHINA, scale=0.5).jobs) == 130
    assert len(workload_from_traces(shared_data, "2023-07-15", CHINA, scale=2.0).jobs) == 520
    with pytest.raises(WorkloadError, match=r"scale must be > 0, got 0"):
        workload_from_traces(shared_data, "2023-07-15", CHINA, scale=0)


@pytest.mark.shared_data
@pytest.mark.parametrize(("catalog", "lo", "hi"), [(CHINA, 0.40, 0.50), (GLOBAL, 0.35, 0.50)])
def test_fleet_is_loaded_30_to_50_pct(shared_data: Path, catalog, lo: float, hi: float) -> None:
    w = workload_from_traces(shared_data, "2023-07-15", catalog, seed=0)
    load = fleet_load(w, catalog)
    gpus = {t: sum(s.gpu_count(t) for s in catalog.sites) for t in load}
    overall = sum(load[t] * gpus[t] for t in load) / sum(gpus.values())
    assert lo <= overall <= hi
    assert all(0.2 <= v <= 0.55 for v in load.values()), load


@pytest.mark.shared_data
def test_gpu_mix_from_node_list(shared_data: Path) -> None:
    mix = trace_gpu_mix(shared_data, CHINA)
    # node list: G2 4392 + G3 312 = 4704 A100; V100M16 195 + V100M32 204 + P100 265 = 664;
    # T4 842 + A10 2 = 844; total 6212 GPUs
    assert mix["A100"] == pytest.approx(4704 / 6212)
    assert mix["V100"] == pytest.approx(664 / 6212)
    assert mix["T4"] == pytest.approx(844 / 6212)


def test_missing_traces(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"gaia_pai-100k\.csv: trace file not found; set "
                                            r"CARBONSCHED_SHARED_DATA"):
        workload_from_traces(tmp_path, "2023-07-15", CHINA)
