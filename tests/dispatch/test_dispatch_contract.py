"""Offline parts of dispatch: squeue --json shapes, --begin across DST, the registry, names."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.adapters.dispatch.kubernetes import job_name, label_value
from carbonsched.adapters.dispatch.registry import (
    ADAPTERS,
    AdapterRegistry,
    AdapterSpec,
    BackendConfig,
    default_registry,
)
from carbonsched.adapters.dispatch.slurm import (
    SlurmAdapter,
    backend_job,
    begin_wall_time,
    make_comment,
    parse_comment,
    parse_squeue_json,
)
from carbonsched.catalog import load_catalog
from carbonsched.domain import JobState, ReasonCode
from carbonsched.errors import AdapterContractError, DataFormatError, TimeAxisError

T0 = datetime(2027, 3, 14, 6, 30, tzinfo=UTC)


def _req(**kw) -> DispatchRequest:
    base = dict(plan_id="p1", job_id="j1", piece=0, site="ca-on-toronto", start=T0,
                end=T0 + timedelta(hours=2), deadline=T0 + timedelta(hours=3), gpu_type="A100",
                gpus=4)
    base.update(kw)
    return DispatchRequest(**base)


@pytest.mark.parametrize("fixture", ["squeue_22.05.json", "squeue_23.11.json"])
def test_squeue_json_both_generations_parse_to_the_same_jobs(fixtures_dir, fixture):
    doc = json.loads((fixtures_dir / "slurm" / fixture).read_text())
    jobs = {j["job_id"]: j for j in parse_squeue_json(doc)}
    assert jobs[1]["states"][0] == "PENDING"
    assert jobs[1]["gres"] == "gpu:V100:1"
    assert jobs[1]["time_limit_min"] == 360
    assert jobs[1]["begin"] == datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert jobs[3]["states"] == ["COMPLETED"]
    ours = {bj.key: bj for j in jobs.values() if (bj := backend_job("britain", j))}
    # the foreign job (comment "someone else") is not ours
    assert "someone else" not in {j["comment"] for j in jobs.values() if
                                  backend_job("britain", j)}
    assert ours["demo-20230715-016#0"].state is JobState.DISPATCHED
    assert ours["demo-20230715-016#0"].backend_id == "britain:1"
    assert ours["demo-20230715-016#0"].actual_start is None  # squeue's start is a forecast
    done = ours["rec-job#0"]
    assert done.state is JobState.SUCCEEDED and done.reason is ReasonCode.COMPLETED
    assert done.actual_start is not None and done.actual_end > done.actual_start
    assert done.plan_id == "recplan"


def test_squeue_23_11_flags_and_infinite_numbers(fixtures_dir):
    doc = json.loads((fixtures_dir / "slurm" / "squeue_23.11.json").read_text())
    jobs = {j["job_id"]: j for j in parse_squeue_json(doc)}
    assert jobs[5]["states"] == ["RUNNING", "CONFIGURING"]
    assert jobs[5]["time_limit_min"] is None  # infinite
    bj = backend_job("britain", jobs[5])
    assert bj.key == "run job#0" and bj.state is JobState.RUNNING
    assert bj.raw_state == "RUNNING,CONFIGURING"


def test_squeue_json_that_is_not_a_job_list_is_refused():
    with pytest.raises(DataFormatError, match="no 'jobs' list"):
        parse_squeue_json({"meta": {}}, "ontario squeue")
    with pytest.raises(DataFormatError, match="job #0 lacks job_id or job_state"):
        parse_squeue_json({"jobs": [{"name": "x"}]}, "ontario squeue")


@pytest.mark.parametrize("job_id", ["a b=c#d", "日本-ジョブ", "x" * 150, "p%20q"])
def test_comment_round_trips_any_job_id(job_id):
    key = f"{job_id}#3"
    assert parse_comment(make_comment(key, "plan 1")) == (key, "plan 1")
    assert parse_comment("carbonschedX key=a") is None
    assert parse_comment("") is None


def _posix_epoch(tz: str, wall: str) -> int:
    out = subprocess.run(["date", "-d", wall, "+%s"], env={"TZ": tz}, capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


@pytest.mark.parametrize("instant", [
    datetime(2027, 11, 7, 5, 30, tzinfo=UTC),   # 01:30 EDT: first pass through the fall-back hour
    datetime(2027, 11, 7, 6, 30, tzinfo=UTC),   # 01:30 EST: the same wall time an hour later
    datetime(2027, 3, 14, 6, 30, tzinfo=UTC),   # 01:30 EST, before the spring-forward gap
    datetime(2027, 3, 14, 7, 30, tzinfo=UTC),   # 03:30 EDT, after it (02:30 does not exist)
])
def test_begin_wall_time_is_host_wall_time_read_exactly_across_dst(instant):
    zone = ZoneInfo("America/Toronto")
    tz, (wall,) = begin_wall_time(instant, zone)
    assert wall == instant.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%S")
    # glibc (what sbatch's parse_time uses) reads that wall time in that TZ as the instant
    assert _posix_epoch(tz, wall) == int(instant.timestamp())


def test_both_fall_back_instants_share_a_wall_time_but_not_a_tz():
    zone = ZoneInfo("America/Toronto")
    a = begin_wall_time(datetime(2027, 11, 7, 5, 30, tzinfo=UTC), zone)
    b = begin_wall_time(datetime(2027, 11, 7, 6, 30, tzinfo=UTC), zone)
    assert a[1] == b[1] == ["2027-11-07T01:30:00"]
    assert (a[0], b[0]) == ("<-0400>+04:00", "<-0500>+05:00")


def test_deadline_is_written_in_the_begin_offset_even_across_a_dst_change():
    start = datetime(2027, 3, 14, 6, 30, tzinfo=UTC)      # EST
    deadline = datetime(2027, 3, 14, 12, 0, tzinfo=UTC)   # EDT by then
    tz, (b, d) = begin_wall_time(start, ZoneInfo("America/Toronto"), (deadline,))
    assert _posix_epoch(tz, d) == int(deadline.timestamp())


def test_sbatch_line_carries_begin_gres_time_deadline_and_key():
    a = SlurmAdapter("ontario", partition="gpu", conf="/etc/slurm/ontario.conf",
                     timezone=ZoneInfo("America/Toronto"))
    line = a.render(_req(job_id="job 7", piece=1))
    assert line.startswith("SLURM_CONF=/etc/slurm/ontario.conf TZ='<-0500>+05:00' sbatch "
                           "--parsable ")
    for part in ("--begin=2027-03-14T01:30:00", "--deadline=2027-03-14T04:30:00",
                 "--time=120", "--gres=gpu:A100:4", "--partition=gpu", "--export=NONE",
                 "'--job-name=carbonsched-job 7-1'",
                 "'--comment=carbonsched key=job%207%231 plan=p1'"):
        assert part in line, part
    # the job's environment is set in its own script, not inherited from the dispatcher
    script = a.batch_script(_req(job_id="job 7", piece=1, placeholder=True))
    assert script.splitlines()[:5] == ["#!/bin/sh",
                                       "# carbonsched placeholder: the job names nothing to run",
                                       "export CARBONSCHED_JOB_ID='job 7'",
                                       "export CARBONSCHED_PLAN_ID=p1",
                                       "export CARBONSCHED_PIECE=1"]
    assert script.splitlines()[-1] == "sleep 7200"
    assert line.endswith("<<'EOF_CARBONSCHED'\n" + a.batch_script(_req(job_id="job 7", piece=1))
                         + "EOF_CARBONSCHED")


def test_clusters_flag_is_used_when_configured():
    a = SlurmAdapter("ontario", use_clusters_flag=True, timezone=UTC)
    assert "--clusters=ontario" in a.sbatch_argv(_req())[1]


def test_naive_or_inverted_request_times_are_refused():
    with pytest.raises(TimeAxisError, match="job j1 start .* is naive"):
        _req(start=datetime(2027, 1, 1))
    with pytest.raises(TimeAxisError, match="end .* is not after start"):
        _req(end=T0)


def test_registry_refuses_duplicates_missing_methods_and_unknown_kinds():
    class Half:
        def submit(self, r): ...

        def status(self, keys=None): ...

    with pytest.raises(AdapterContractError, match="'slurm' is registered twice"):
        AdapterRegistry([*ADAPTERS, ADAPTERS[0]])
    with pytest.raises(AdapterContractError,
                       match=r"Half for 'half' lacks required method\(s\) cancel, render"):
        AdapterRegistry([AdapterSpec("half", Half, lambda s, c: Half())])
    reg = AdapterRegistry([ADAPTERS[0]])
    cat = load_catalog("global")
    with pytest.raises(AdapterContractError,
                       match="site us-ny-newyork: no dispatch adapter for backend kind "
                             "'kubernetes'; registered: slurm"):
        reg.build_for_sites(cat.sites, BackendConfig())


def test_registry_builds_one_adapter_per_backend_at_start_up(tmp_path):
    cat = load_catalog("global")
    with pytest.raises(Exception, match="no slurm.conf for cluster 'ontario'"):
        default_registry().build_for_sites(cat.sites, BackendConfig(slurm_conf_dir=tmp_path))
    adapters = default_registry().build_for_sites(cat.sites, BackendConfig())
    assert adapters["ca-on-toronto"].name == "slurm:ontario"
    assert adapters["de-frankfurt"].name == "kubernetes:eu-frankfurt/carbonsched"
    assert len({a.name for a in adapters.values()}) == 8


@pytest.mark.parametrize("job_id", ["Demo_Job.1", "a" * 200, "ü/ß:é", "--x--", "job#1"])
def test_kubernetes_names_and_labels_are_valid_for_any_job_id(job_id):
    name = job_name(job_id, 12)
    assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)
    v = label_value(job_id)
    assert len(v) <= 63 and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", v)
    assert job_name(job_id, 12) != job_name(job_id + "x", 12)


def test_host_zone_comes_from_tz_first(monkeypatch):
    from carbonsched.adapters.dispatch.slurm import host_timezone_source

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert host_timezone_source() == (ZoneInfo("Asia/Tokyo"), "TZ")
    monkeypatch.setenv("TZ", "Not/AZone")
    assert host_timezone_source()[1] != "TZ"
    assert SlurmAdapter("x", timezone=UTC).timezone_source == "configured"
