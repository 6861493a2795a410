"""The real-data day reaches dispatch (issue 33 item 5), on the real local Slurm clusters and the
Kubernetes emulator: a replayed PAI-trace day of the ``global`` catalog is submitted (not
``deadline_passed``), ``status`` shows it, ``plans show`` and the report state the replay; and
``dispatch`` exits 2 when nothing it was asked to submit was submitted, 0 otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.dispatch.slurm import parse_comment
from carbonsched.dispatch.outbox import DispatchOutcome, DispatchSummary
from carbonsched.store import Store

from .conftest import PLAN_DAY
from .helpers import future_plan, squeue_jobs

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, url: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "carbonsched.cli.app", *args],
                          env={**os.environ, "CARBONSCHED_DATABASE_URL": url, **env},
                          capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture
def env(slurm_dir, emulator_kubeconfig, shared_data) -> dict:
    return {"CARBONSCHED_SLURM_CONF_DIR": str(slurm_dir),
            "CARBONSCHED_KUBECONFIG": str(emulator_kubeconfig),
            "CARBONSCHED_DATA_DIR": str(shared_data), "COLUMNS": "200"}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _outcome(action: str, backend_id: str | None = None,
             reason: str = "Submitted") -> DispatchOutcome:
    return DispatchOutcome(key=f"j{uuid.uuid4().hex[:6]}#0", job_id="j", piece=0, site="s",
                           backend="slurm:x", action=action, state="Dispatched", reason=reason,
                           plan_id="p", backend_id=backend_id)


def test_nothing_submitted_counts_only_what_was_asked():
    def summary(*outcomes: DispatchOutcome) -> DispatchSummary:
        return DispatchSummary("p", False, None, datetime.now(UTC), outcomes=list(outcomes))

    late = _outcome("deadline_passed", reason="DeadlinePassed")
    assert summary(late, late).nothing_submitted                          # the past day
    # at the limit: one unit of many on its backend is enough
    assert not summary(late, late, _outcome("submitted", "c:1")).nothing_submitted
    assert not summary(late, _outcome("reconciled", "c:2")).nothing_submitted
    # a second run: recorded with a backend id is on it, recorded as DeadlinePassed is not
    assert not summary(_outcome("recorded", "c:3")).nothing_submitted
    assert summary(_outcome("recorded", None, "DeadlinePassed")).nothing_submitted
    assert summary(_outcome("already_dispatched", None, "DeadlinePassed")).nothing_submitted
    # nothing asked: an empty plan, a dry run, everything after --commit-before
    assert not summary().nothing_submitted
    assert not summary(_outcome("dry_run"), _outcome("not_committed")).nothing_submitted
    assert summary(late, _outcome("not_committed")).nothing_submitted
    assert summary(late).to_dict()["nothing_submitted"] is True


@pytest.mark.slurm
@pytest.mark.kube_emulator
@pytest.mark.shared_data
def test_a_replayed_real_day_is_dispatched_to_the_local_clusters(tmp_path, env, slurm_dir):
    url = f"sqlite:///{tmp_path / 's.db'}"
    tomorrow = (pd.Timestamp.now(tz="UTC").normalize() + pd.Timedelta(days=1))
    day = tomorrow.strftime("%Y-%m-%d")
    r = _cli("workload", "from-traces", "--date", PLAN_DAY, "--out", "day.json", url=url,
             env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # ids of this test's own: the clusters are shared by the whole suite (dispatch keys)
    prefix = uuid.uuid4().hex[:8]
    wl = json.loads((tmp_path / "day.json").read_text())
    for j in wl["jobs"]:
        j["id"] = f"{prefix}-{j['id']}"
    (tmp_path / "day.json").write_text(json.dumps(wl))

    r = _cli("plan", "--catalog", "global", "--replay-from", PLAN_DAY, "--jobs", "day.json",
             "--out", "plan.json", url=url, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["date"] == day and doc["signal_quality"] == "replayed"
    assert doc["replay"]["source_date"] == PLAN_DAY
    sentence = (f"signals: REPLAYED - the real signals (estimated) and work of "
                f"{pd.Timestamp(PLAN_DAY):%A} {PLAN_DAY}, moved {doc['replay']['shift_days']} "
                f"days forward onto {tomorrow:%A} {day}")
    assert sentence in _flat(r.stdout)
    n = len(doc["placements"])
    assert n == len(wl["jobs"]) > 100 and not doc["unplaced"]
    shown = _cli("plans", "show", "latest", url=url, env=env, cwd=tmp_path)
    assert shown.returncode == 0 and sentence in _flat(shown.stdout)
    assert "· signals replayed" in _flat(shown.stdout)

    run = _cli("dispatch", "--json", url=url, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["counts"] == {"submitted": n}, summary["counts"]
    assert summary["nothing_submitted"] is False
    # on the Slurm clusters, held until the planned start (tomorrow), and on the emulator
    slurm = [p for p in doc["placements"] if p["site"] in ("ca-on-toronto", "br-sp-saopaulo",
                                                           "gb-london")]
    kube = [p for p in doc["placements"] if p not in slurm]
    assert slurm and kube
    on_ontario = {c[0]: j for j in squeue_jobs(slurm_dir / "ontario" / "slurm.conf")
                  if (c := parse_comment(j["comment"])) and c[1] == doc["plan_id"]}
    mine = [p for p in slurm if p["site"] == "ca-on-toronto"]
    assert set(on_ontario) == {f"{p['job_id']}#0" for p in mine}
    for p in mine:   # held until the planned start, tomorrow
        job = on_ontario[f"{p['job_id']}#0"]
        assert pd.Timestamp(job["begin"]) == pd.Timestamp(p["start"]) >= tomorrow
        assert job["gres"] == f"gpu:{p['gpu_type']}:{p['gpus']}"
    st = _cli("status", "--plan", "latest", "--json", url=url, env=env, cwd=tmp_path)
    assert st.returncode == 0, st.stderr
    rows = json.loads(st.stdout)
    assert len(rows) == n and {r["state"] for r in rows} == {"Dispatched"}
    ids = {r["site"]: r["backend_id"] for r in rows}
    assert ids["ca-on-toronto"].startswith("ontario:")
    assert ids["de-frankfurt"].startswith("eu-frankfurt/carbonsched/cs-")
    st = _cli("status", "--plan", "latest", url=url, env=env, cwd=tmp_path)
    assert f"{n} jobs: {n} Dispatched" in st.stdout
    again = _cli("dispatch", "--json", url=url, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["counts"] == {"recorded": n}

    rep = _cli("report", "--from", day, "--to", day, "--out", "report.json", url=url, env=env,
               cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert (f"note: REPLAYED: the 1 plan(s) of this report were made on the real signals of "
            f"{PLAN_DAY}, moved {doc['replay']['shift_days']} days forward onto {day}"
            in _flat(rep.stderr))
    meta = json.loads((tmp_path / "report.json").read_text())["metadata"]
    assert meta["replay"]["source_dates"] == [PLAN_DAY]


@pytest.mark.slurm
@pytest.mark.kube_emulator
def test_dispatch_exits_2_when_nothing_was_submitted_and_0_otherwise(tmp_path, env,
                                                                     global_plan_doc):
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url)
    past = json.loads(json.dumps(global_plan_doc))             # the real day, as planned
    prefix = uuid.uuid4().hex[:8]
    for p in past["placements"]:
        p["job_id"] = f"{prefix}-{p['job_id']}"
    store.save_plan(past)
    n = len(past["placements"])
    r = _cli("dispatch", "--plan", past["plan_id"], url=url, env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == (
        f"error: nothing submitted: none of the {n} placement(s) asked for is on its backend "
        f"({n} DeadlinePassed); every placement of plan {past['plan_id'][:12]} (for "
        f"{PLAN_DAY}) ends past its deadline: the day is over. Dispatch a plan that lies "
        "ahead: `carbonsched plan --catalog global` plans tomorrow, or `carbonsched plan "
        f"--catalog global --replay-from {PLAN_DAY}` plans tomorrow on that past day's real "
        "signals (signal_quality 'replayed'); then `carbonsched dispatch`")
    # run again: the units are recorded DeadlinePassed, still nothing on a backend
    r = _cli("dispatch", "--plan", past["plan_id"], "--json", url=url, env=env, cwd=tmp_path)
    assert r.returncode == 2 and json.loads(r.stdout)["counts"] == {"recorded": n}
    assert "error: nothing submitted" in r.stderr

    # nothing asked: every placement after --commit-before, or a dry run: exit 0
    ahead = future_plan(global_plan_doc, prefix=uuid.uuid4().hex[:8])
    store.save_plan(ahead)
    first = min(p["start"] for p in ahead["placements"])
    r = _cli("dispatch", "--plan", ahead["plan_id"], "--commit-before", first, url=url, env=env,
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "nothing submitted" not in r.stderr
    r = _cli("dispatch", "--plan", ahead["plan_id"], "--dry-run", url=url, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr

    # something submitted, the rest past its deadline: exit 0, the late ones named
    mixed = future_plan(global_plan_doc, prefix=uuid.uuid4().hex[:8])
    yesterday = pd.Timestamp.now(tz="UTC").normalize() - pd.Timedelta(days=1)
    late = mixed["placements"][0]
    for k in ("start", "end", "deadline"):
        late[k] = (yesterday + pd.Timedelta(hours=2 if k == "start" else 3)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
    store.save_plan(mixed)
    r = _cli("dispatch", "--plan", mixed["plan_id"], "--json", url=url, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counts"] == {"deadline_passed": 1,
                                              "submitted": len(mixed["placements"]) - 1}
    assert "nothing submitted" not in r.stderr
