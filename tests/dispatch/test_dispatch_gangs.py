"""Gangs as the cluster sees them (issue 33 item 2), Slurm side: a gang larger than one node is
submitted as ``--nodes N --gres=gpu:<type>:<G>`` (per node) ``--ntasks-per-node=1`` and runs on
N real nodes of the catalog's node shape (scripts/slurm_conf.py starts one slurmd per node)."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.adapters.dispatch.slurm import SlurmAdapter
from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import _request_from_row, dispatch_plan, plan_requests
from carbonsched.errors import InputError
from carbonsched.store.models import DispatchRow

from .helpers import future_plan, one_plan

GLOBAL = load_catalog("global")
CHINA = "china-eastdata-westcompute"
PAI_DAY = "2023-07-15"
ROOT = Path(__file__).resolve().parents[2]


def _slurm_adapter(site_id: str, catalog=GLOBAL, conf: Path | None = None) -> SlurmAdapter:
    be = catalog.site(site_id).backend
    return SlurmAdapter(be.cluster, partition=be.partition, conf=conf)


def _argv_shape(argv: list[str]) -> dict[str, str]:
    """The gang's options of an sbatch command line: gres, nodes, ntasks-per-node."""
    out = {}
    for a in argv:
        m = re.fullmatch(r"--(gres|nodes|ntasks-per-node)=(.*)", a)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _placement(job_id: str, gpus: int, gpu_type: str = "A100", site: str = "ca-on-toronto",
               start: datetime | None = None, minutes: int = 60, command: str = "") -> dict:
    start = start or datetime.now(UTC).replace(microsecond=0, second=0) + timedelta(days=2)
    return {"job_id": job_id, "site": site, "start": start, "end": start + timedelta(
        minutes=minutes), "gpu_type": gpu_type, "gpus": gpus, "command": command}


# --- rendering (no cluster needed) ---------------------------------------------------------------

@pytest.mark.parametrize(("gpus", "gpu_type", "shape"), [
    (1, "A100", {"gres": "gpu:A100:1", "nodes": "1"}),
    (8, "A100", {"gres": "gpu:A100:8", "nodes": "1"}),      # one whole node: stays --nodes=1
    (16, "A100", {"gres": "gpu:A100:8", "nodes": "2", "ntasks-per-node": "1"}),
    (4, "V100", {"gres": "gpu:V100:4", "nodes": "1"}),
])
def test_sbatch_line_follows_the_node_shape(gpus, gpu_type, shape):
    doc = one_plan([_placement("j", gpus, gpu_type)])
    (req,) = plan_requests(doc, GLOBAL)
    assert req.nodes == int(shape["nodes"])
    _tz, argv = _slurm_adapter("ca-on-toronto").sbatch_argv(req)
    assert _argv_shape(argv) == shape


def test_a_plan_gang_the_node_shape_cannot_cut_is_refused_before_any_dispatch():
    doc = one_plan([_placement("ok", 8), _placement("twelve", 12)])
    with pytest.raises(InputError, match=(
            r"placement of job 'twelve' at site 'ca-on-toronto': 12 A100 GPUs is larger than one "
            r"node \(8 per node, gpus_per_node in the catalog\) and not a whole number of nodes")):
        plan_requests(doc, GLOBAL)


def test_the_outbox_keeps_the_node_count():
    (req,) = plan_requests(one_plan([_placement("j", 16)]), GLOBAL)
    from carbonsched.dispatch.outbox import _request_json

    row = DispatchRow(key=req.key, request_json=_request_json(req))
    back = _request_from_row(row)
    assert (back.nodes, back.gpus_per_node) == (2, 8)
    assert back == req


def _pai_day_renders(doc: dict, catalog) -> list[tuple[dict, DispatchRequest, dict[str, str]]]:
    out = []
    for req in plan_requests(doc, catalog):
        site = catalog.site(req.site)
        if site.backend.kind != "slurm":
            continue
        p = next(p for p in doc["placements"] if p["job_id"] == req.job_id)
        _tz, argv = _slurm_adapter(req.site, catalog).sbatch_argv(req)
        out.append((p, req, _argv_shape(argv)))
    return out


def _check_every_render(renders, catalog) -> int:
    """Every gang larger than one node is a multi-node line of whole nodes; returns how many."""
    multi = 0
    for p, _req, shape in renders:
        per_node = catalog.site(p["site"]).gpus[p["gpu_type"]].gpus_per_node
        if p["gpus"] > per_node:
            multi += 1
            assert shape == {"gres": f"gpu:{p['gpu_type']}:{per_node}",
                             "nodes": str(p["gpus"] // per_node), "ntasks-per-node": "1"}, p
        else:
            assert shape == {"gres": f"gpu:{p['gpu_type']}:{p['gpus']}", "nodes": "1"}, p
    return multi


def _pai_day_plan(catalog_name: str) -> dict:
    """The PAI-trace day (workload_from_traces, seed 0) planned on ``catalog_name``."""
    from carbonsched.pipeline.daily import run_daily_plan
    from carbonsched.workload.files import workload_from_traces

    data = Path(os.environ.get("CARBONSCHED_SHARED_DATA", ROOT.parent.parent / "shared" / "data"))
    if not (data / "README.md").exists():
        pytest.skip(f"shared data not found at {data}")
    wl = workload_from_traces(data, PAI_DAY, load_catalog(catalog_name), seed=0)
    return run_daily_plan(PAI_DAY, catalog_name, workload=wl, data_dir=data,
                          time_limit_s=60).document


@pytest.fixture(scope="module")
def pai_global() -> dict:
    return _pai_day_plan("global")


def test_pai_day_on_global_renders_every_gang_on_whole_nodes(pai_global):
    renders = _pai_day_renders(pai_global, GLOBAL)
    assert len(renders) > 100
    # the PAI day's largest gang is 8 A100 (the Alibaba pods ask for at most 8 GPUs): one node
    # of the 8-GPU hubs, so on `global` no gang spans nodes and none is refused
    assert _check_every_render(renders, GLOBAL) == 0
    assert max(p["gpus"] for p, _r, _s in renders) == 8
    assert not [u for u in pai_global["unplaced"] if u["reason"] == "GangNotWholeNodes"]


def test_pai_day_on_china_cuts_its_8_gpu_gangs_into_the_hubs_4_gpu_nodes():
    catalog = load_catalog(CHINA)
    doc = _pai_day_plan(CHINA)
    renders = _pai_day_renders(doc, catalog)
    eights = [p for p, _r, _s in renders if p["gpus"] == 8]
    assert eights and {p["gpu_type"] for p in eights} == {"A100"}
    assert _check_every_render(renders, catalog) == len(eights)   # each: --nodes=2, 4 per node
    assert not [u for u in doc["unplaced"] if u["reason"] == "GangNotWholeNodes"]


# --- real Slurm ----------------------------------------------------------------------------------

def _scontrol(slurm_dir: Path, cluster: str, job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "-d", "show", "job", job_id], capture_output=True,
                         text=True, check=True,
                         env={**os.environ, "SLURM_CONF": str(slurm_dir / cluster / "slurm.conf")})
    fields = dict(re.findall(r"(\w+)=(\S+)", out.stdout))
    fields["per_node"] = " ".join(re.findall(r"Nodes=\S+ CPU_IDs=\S+ Mem=\S+ GRES=(\S+)",
                                             out.stdout))
    return fields


def _rows(store) -> dict[str, DispatchRow]:
    with Session(store.engine) as s:
        return {r.key: r for r in s.scalars(select(DispatchRow))}


@pytest.mark.slurm
def test_a_16_gpu_gang_runs_on_two_8_gpu_nodes(store, settings, slurm_dir, tmp_path):
    prefix = uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    marks = tmp_path / "marks"
    marks.mkdir(mode=0o777)
    # one task per node writes a file named after its node (the gang really runs on both), then
    # the batch shell waits for the test's release file: the test reads the running allocation
    # (absolute paths: --export=NONE reaches srun's tasks as SLURM_EXPORT_ENV=NONE, no PATH)
    cmd = (f"srun /bin/sh -c '/usr/bin/touch {marks}/$SLURMD_NODENAME'; "
           f"while [ ! -e {marks}/release ]; do sleep 0.2; done")
    doc = one_plan([_placement(f"{prefix}-gang", 16, start=now, command=cmd),
                    _placement(f"{prefix}-one", 8, start=now + timedelta(days=2))])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 2}
    rows = _rows(store)
    gang_id = rows[f"{prefix}-gang#0"].backend_id.split(":")[1]
    one_id = rows[f"{prefix}-one#0"].backend_id.split(":")[1]
    one = _scontrol(slurm_dir, "ontario", one_id)
    assert (one["NumNodes"], one["TresPerNode"]) == ("1-1", "gres:gpu:A100:8")   # pending: min-max

    def wait_for(done, what: str) -> dict[str, str]:
        # the gang waits for two free A100 nodes (other tests share the cluster): long deadline
        end = time.monotonic() + 300
        job: dict[str, str] = {}
        while time.monotonic() < end:
            job = _scontrol(slurm_dir, "ontario", gang_id)
            if done(job):
                return job
            time.sleep(0.2)
        raise AssertionError(f"gang not {what} after 300 s: {job}")

    try:
        job = wait_for(lambda j: j["JobState"] == "RUNNING" and len(list(marks.iterdir())) == 2,
                       "running on two nodes")
        assert job["NumNodes"] == "2" and job["TresPerNode"] == "gres:gpu:A100:8"
        assert job["NodeList"] in ("ontario-n[1-2]", "ontario-n1,ontario-n2")
        assert job["per_node"] == "gpu:A100:8(IDX:0-7)"     # one line for both nodes: 8 each
        assert job["JOB_GRES"] == "gpu:A100:16"
        assert sorted(p.name for p in marks.iterdir()) == ["ontario-n1", "ontario-n2"]
    finally:
        (marks / "release").touch()
    job = wait_for(lambda j: j["JobState"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"),
                   "finished")
    assert job["JobState"] == "COMPLETED", job
    subprocess.run(["scancel", one_id], check=True,
                   env={**os.environ, "SLURM_CONF": str(slurm_dir / "ontario" / "slurm.conf")})


@pytest.mark.slurm
def test_pai_day_gangs_submitted_for_real_keep_their_shape(store, settings, slurm_dir,
                                                           pai_global):
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(pai_global, prefix=prefix)
    slurm_sites = {s.id for s in GLOBAL.sites if s.backend.kind == "slurm"}
    ours = [p for p in doc["placements"] if p["site"] in slurm_sites]
    # a few real submissions: the largest gangs and one 1-GPU job per Slurm site
    pick = sorted(ours, key=lambda p: -p["gpus"])[:3]
    for site in sorted({p["site"] for p in ours}):
        pick += [p for p in ours if p["site"] == site and p not in pick][:1]
    doc["placements"] = pick
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {
        "submitted": len(pick)}
    rows = _rows(store)
    for p in pick:
        row = rows[f"{p['job_id']}#0"]
        cluster, job_id = row.backend_id.split(":")
        per_node = GLOBAL.site(p["site"]).gpus[p["gpu_type"]].gpus_per_node
        job = _scontrol(slurm_dir, cluster, job_id)
        nodes = p["gpus"] // per_node if p["gpus"] > per_node else 1
        assert job["NumNodes"] == f"{nodes}-{nodes}", (p, job)    # pending: min-max nodes
        assert job["TresPerNode"] == f"gres:gpu:{p['gpu_type']}:{p['gpus'] // nodes}"
        subprocess.run(["scancel", job_id], check=True,
                       env={**os.environ, "SLURM_CONF": str(slurm_dir / cluster / "slurm.conf")})


def test_an_outbox_row_from_before_payloads_runs_its_command_and_is_written_back_once():
    # the payload is the one place a request says what runs: a legacy row's "command" is read
    # into it, and the request is written back without a second copy
    import json

    from carbonsched.dispatch.outbox import _request_json

    (req,) = plan_requests(one_plan([_placement("j", 8)]), GLOBAL)
    legacy = json.loads(_request_json(req))
    legacy.pop("payload")
    legacy["command"] = "python3 train.py"
    back = _request_from_row(DispatchRow(key=req.key, request_json=json.dumps(legacy)))
    assert back.payload is not None and back.payload.command == "python3 train.py"
    again = json.loads(_request_json(back))
    assert "command" not in again and again["payload"]["command"] == "python3 train.py"
    # a legacy placement's "command" in a plan document: the same payload
    p = _placement("k", 8)
    p.pop("payload", None)
    p["command"] = "sleep 5"
    (req2,) = plan_requests(one_plan([p]), GLOBAL)
    assert req2.payload is not None and req2.payload.command == "sleep 5"
