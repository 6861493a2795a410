"""``carbonsched dispatch`` and ``carbonsched status`` end to end (real Slurm and emulator)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import inspect

from carbonsched.store import Store

from .helpers import future_plan

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, url: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "carbonsched.cli.app", *args],
                          env={**os.environ, "CARBONSCHED_DATABASE_URL": url, **(env or {})},
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_migration_creates_the_outbox_table(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    cols = {c["name"] for c in inspect(store.engine).get_columns("dispatch_intents")}
    assert {"key", "job_id", "piece", "plan_id", "backend_id", "state", "reason",
            "actual_start", "actual_end", "times_source"} <= cols
    uniques = inspect(store.engine).get_unique_constraints("dispatch_intents")
    indexes = inspect(store.engine).get_indexes("dispatch_intents")
    assert any(u["column_names"] == ["key"] for u in uniques) or any(
        i["column_names"] == ["key"] and i["unique"] for i in indexes)


@pytest.mark.slurm
def test_dispatch_dry_run_then_dispatch_then_status(global_plan_doc, tmp_path, slurm_dir,
                                                    emulator_kubeconfig):
    url = f"sqlite:///{tmp_path / 's.db'}"
    doc = future_plan(global_plan_doc, prefix=uuid.uuid4().hex[:8])
    Store(url).save_plan(doc)
    env = {"CARBONSCHED_SLURM_CONF_DIR": str(slurm_dir),
           "CARBONSCHED_KUBECONFIG": str(emulator_kubeconfig)}
    n = len(doc["placements"])

    dry = _cli("dispatch", "--plan", "latest", "--dry-run", url=url, env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count(" sbatch --parsable ") + dry.stdout.count('"kind": "Job"') == n
    first = next(p for p in doc["placements"] if p["site"] == "ca-on-toronto")
    assert f"--gres=gpu:{first['gpu_type']}:{first['gpus']}" in dry.stdout
    assert f"--begin={first['start'][:19]}" in dry.stdout  # the host zone here is UTC
    assert '"nvidia.com/gpu":' in dry.stdout and '"suspend": true' in dry.stdout
    assert f"{n} submissions rendered, nothing submitted" in dry.stdout
    assert Store(url).list_plans()  # and nothing was written to the outbox:
    st = _cli("status", "--no-refresh", "--json", url=url, env=env)
    assert json.loads(st.stdout) == []

    run = _cli("dispatch", "--plan", doc["plan_id"], "--json", url=url, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["counts"] == {"submitted": n}
    again = _cli("dispatch", "--plan", doc["plan_id"], "--json", url=url, env=env)
    assert json.loads(again.stdout)["counts"] == {"recorded": n}

    st = _cli("status", "--plan", "latest", url=url, env=env)
    assert st.returncode == 0, st.stderr
    assert f"{n} jobs: {n} Dispatched" in st.stdout
    rows = json.loads(_cli("status", "--plan", doc["plan_id"], "--json", url=url,
                           env=env).stdout)
    ids = {r["site"]: r["backend_id"] for r in rows}
    assert ids["ca-on-toronto"].startswith("ontario:")
    assert ids["de-frankfurt"].startswith("eu-frankfurt/carbonsched/cs-")


def test_dispatch_refuses_bad_input_with_a_message(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    r = _cli("dispatch", "--plan", "latest", url=url)
    assert r.returncode == 2 and f"no plan recorded yet in {tmp_path / 's.db'};" in r.stderr
    assert "run `carbonsched plan` first" in r.stderr
    r = _cli("dispatch", "--plan", "nope", url=url)
    assert r.returncode == 2 and "no plan 'nope'" in r.stderr
    r = _cli("dispatch", "--plan", "x", "--commit-before", "2026-12-01T06:00", url=url)
    assert r.returncode == 2 and "has no offset; give UTC with Z" in r.stderr
    r = _cli("dispatch", "--plan", "x", "--commit-before", "tomorrow", url=url)
    assert r.returncode == 2 and "'tomorrow' is not ISO 8601" in r.stderr


def test_a_plan_for_another_catalog_or_site_is_refused(tmp_path, global_plan_doc):
    from carbonsched.dispatch.outbox import dispatch_plan
    from carbonsched.errors import InputError, UnknownSiteError

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    doc = future_plan(global_plan_doc)
    store.save_plan(doc)
    dry = dispatch_plan(store, doc["plan_id"], dry_run=True)
    n = len(doc["placements"])
    assert dry.counts == {"dry_run": n}
    # the plan's placements carry their jobs' deadlines and payloads (the demo jobs' command):
    # no fallback; a placement without a deadline falls back to its planned end + the slack
    assert dry.notes == []
    assert all("trap save USR1 TERM" in o.rendered for o in dry.outcomes)
    no_deadline = json.loads(json.dumps(doc))
    no_deadline["plan_id"] = "no-deadline"
    for p in no_deadline["placements"]:
        p.pop("deadline", None)
    store.save_plan(no_deadline)
    assert dispatch_plan(store, "no-deadline", dry_run=True).notes[0] == (
        f"{n} of {n} placements carry no deadline: the backend's deadline is their planned "
        "end + 3600 s (CARBONSCHED_DISPATCH_DEADLINE_SLACK_S)")
    with pytest.raises(InputError, match="made for catalog 'global', not 'us-2022'"):
        dispatch_plan(store, doc["plan_id"], "us-2022", dry_run=True)
    doc = future_plan(global_plan_doc)
    doc["placements"][0]["site"] = "mars-base"
    store.save_plan(doc)
    with pytest.raises(UnknownSiteError, match="unknown site 'mars-base'"):
        dispatch_plan(store, doc["plan_id"], dry_run=True)


def test_dispatch_and_status_take_the_plan_id_prefix_plan_prints(global_plan_doc, tmp_path):
    """``plan`` prints a 12-character id; ``dispatch`` and ``status`` resolve it like ``plans
    show`` (one resolver), and an ambiguous prefix is refused with its matches listed."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    a = future_plan(global_plan_doc, prefix=uuid.uuid4().hex[:8])
    b = future_plan(global_plan_doc, prefix=uuid.uuid4().hex[:8])
    a["plan_id"], b["plan_id"] = "abcdef123456" + "0" * 20, "abcdef999999" + "1" * 20
    Store(url).save_plan(a)
    Store(url).save_plan(b)

    st = _cli("status", "--plan", a["plan_id"][:12], "--no-refresh", url=url)
    assert st.returncode == 0, st.stderr
    assert f"dispatch status of plan {a['plan_id']}" in st.stdout
    for cmd in (["status", "--no-refresh"], ["dispatch", "--dry-run"]):
        amb = _cli(*cmd, "--plan", "abcdef", url=url)
        assert amb.returncode == 2, amb.stderr
        assert "'abcdef' names several plans" in amb.stderr
        assert a["plan_id"] in amb.stderr and b["plan_id"] in amb.stderr
    none = _cli("dispatch", "--plan", "fedcba987654", url=url)
    assert none.returncode == 2 and "no plan 'fedcba987654'" in none.stderr


@pytest.mark.slurm
def test_dispatch_of_a_stale_plan_prints_one_line_per_outcome(global_plan_doc, tmp_path,
                                                               slurm_dir, emulator_kubeconfig):
    """Every placement of a plan for a past day is past its deadline: one counted line on
    stderr (per site counts, the first placement's detail), ``--verbose`` one per placement."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    doc = json.loads(json.dumps(global_plan_doc))
    doc["plan_id"] = uuid.uuid4().hex
    Store(url).save_plan(doc)
    env = {"CARBONSCHED_SLURM_CONF_DIR": str(slurm_dir),
           "CARBONSCHED_KUBECONFIG": str(emulator_kubeconfig)}
    n = len(doc["placements"])
    per_site: dict[str, int] = {}
    for p in doc["placements"]:
        per_site[p["site"]] = per_site.get(p["site"], 0) + 1

    run = _cli("dispatch", "--plan", doc["plan_id"][:12], url=url, env=env)
    # nothing submitted: exit 2 with one line saying why and what to run
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1].startswith("error: nothing submitted: ")
    lines = [ln for ln in run.stderr.splitlines() if "deadline_passed" in ln]
    assert len(lines) == 1 and n > 10
    assert lines[0].startswith(f"deadline_passed {n} placement(s) (")
    assert all(f"{site} {k}" in lines[0] for site, k in per_site.items())
    assert "is after the deadline" in lines[0] and lines[0].endswith("--verbose lists each")

    again = _cli("dispatch", "--plan", doc["plan_id"], "--verbose", url=url, env=env)
    assert again.returncode == 2, again.stderr
    # the second run finds every placement recorded (failed, past its deadline): nothing to say
    assert "deadline_passed" not in again.stderr
    fresh = f"sqlite:///{tmp_path / 't.db'}"
    Store(fresh).save_plan(doc)
    verbose = _cli("dispatch", "--plan", doc["plan_id"], "--verbose", url=fresh, env=env)
    assert len([ln for ln in verbose.stderr.splitlines()
                if ln.startswith("deadline_passed ")]) == n



NO_CONFIG = ("error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host",
             "error: fetch_config: DNS SRV lookup failed",
             "fatal: Could not establish a configuration source")
OTHER_FAILURE = ("error: Invalid cluster name nowhere",)


def _host_with_fake_slurm(plan_doc: dict, tmp_path: Path,
                          said: tuple[str, ...]) -> tuple[dict, dict[str, str]]:
    """A stored future copy of ``plan_doc`` and the environment of a host whose Slurm tools
    print ``said`` and fail, with no Slurm or Kubernetes configuration."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    doc = future_plan(plan_doc, prefix=uuid.uuid4().hex[:8])
    Store(url).save_plan(doc)
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("squeue", "sbatch", "sacct"):
        lines = "".join(f"echo '{tool}: {line}' >&2\n" for line in said)
        (tools / tool).write_text(f"#!/bin/sh\n{lines}exit 1\n")
        (tools / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CARBONSCHED_SLURM_CONF_DIR", "SLURM_CONF", "KUBECONFIG",
                        "CARBONSCHED_KUBECONFIG")}
    env.update(HOME=str(tmp_path), PATH=f"{tools}:{os.environ['PATH']}",
               CARBONSCHED_DATABASE_URL=url)
    return doc, env


def test_dispatch_on_a_host_without_slurm_or_kubeconfig_keeps_every_intent(global_plan_doc,
                                                                            tmp_path):
    """A host with no slurm.conf and no kubeconfig (a new user's): every placement stays pending
    as 'unavailable' (nothing lost, retried by the next run), exit 3, and the message names the
    setting that fixes it. The fake tools say what Slurm 22.05's say on a host with neither
    ``SLURM_CONF`` nor ``/etc/slurm/slurm.conf`` nor a configless DNS record."""
    expected = ("no Slurm configuration for cluster 'ontario' on this host (squeue: error: "
                "resolve_ctls_from_dns_srv")
    doc, env = _host_with_fake_slurm(global_plan_doc, tmp_path, NO_CONFIG)
    run = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "dispatch", "--plan",
                          "latest", "--placeholder", "--verbose"], env=env, capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 3, run.stderr
    n = len(doc["placements"])
    assert f"{n} unavailable · " in run.stdout          # counted in words, not a dict
    said_err = " ".join(run.stderr.split())
    assert expected in said_err
    assert ("set CARBONSCHED_SLURM_CONF_DIR to a folder holding <cluster>/slurm.conf (or "
            "SLURM_CONF to the cluster's slurm.conf)") in said_err
    assert "set CARBONSCHED_KUBECONFIG to a kubeconfig with that context" in said_err
    # nothing lost: every placement is an intent the next run retries
    st = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "status", "--no-refresh",
                         "--json"], env=env, capture_output=True, text=True, cwd=ROOT,
                        timeout=300)
    rows = json.loads(st.stdout)
    assert len(rows) == n and {r["reason"] for r in rows} == {"BackendUnavailable"}
    table = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "status",
                            "--no-refresh"], env=env, capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
    assert f"{n} jobs: {n} Pending" in table.stdout


def test_a_squeue_failing_otherwise_stops_the_run_loudly_and_loses_nothing(global_plan_doc,
                                                                           tmp_path):
    """Not an outage (a cluster name squeue refuses): exit 2 with squeue's message, as a fault an
    operator must fix; the intents stay in the outbox for the run after the fix."""
    doc, env = _host_with_fake_slurm(global_plan_doc, tmp_path, OTHER_FAILURE)
    run = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "dispatch", "--plan",
                          "latest", "--placeholder"], env=env, capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 2, run.stderr
    assert ("squeue failed: squeue: error: Invalid cluster name nowhere"
            in " ".join(run.stderr.split()))
    st = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "status", "--no-refresh",
                         "--json"], env=env, capture_output=True, text=True, cwd=ROOT,
                        timeout=300)
    assert len(json.loads(st.stdout)) == len(doc["placements"])


def test_an_attempted_submission_past_its_deadline_waits_for_the_backend(tmp_path,
                                                                         monkeypatch):
    """An sbatch whose answer was lost may have made the job. If the cluster still cannot be
    asked once the unit's deadline has passed, the unit stays pending, named as possibly on the
    cluster; it is not failed as "not submitted" (a final state nothing tracks again)."""
    from datetime import UTC, datetime, timedelta

    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import dispatch_plan

    from .helpers import one_plan

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=1)
    doc = one_plan([{"job_id": f"{uuid.uuid4().hex[:8]}-attempted", "site": "ca-on-toronto",
                     "start": start, "end": start + timedelta(hours=1), "gpu_type": "V100",
                     "gpus": 1}])
    store.save_plan(doc)
    tools = tmp_path / "bin"
    tools.mkdir()

    def tool(name: str, body: str) -> None:
        (tools / name).write_text(f"#!/bin/sh\n{body}\n")
        (tools / name).chmod(0o755)

    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    # the tool timeout is the time an attempted submission may take to show: 1 s here
    settings = Settings(slurm_conf_dir=None, dispatch_backoff_s=0.01,
                        dispatch_backend_timeout_s=1.0)

    def run(days_on: int = 0):
        return dispatch_plan(store, doc["plan_id"], settings=settings, max_attempts=1,
                             sleep=lambda _: None, placeholder=True,
                             clock=lambda: datetime.now(UTC) + timedelta(days=days_on))
    # the controller lists no job, then sbatch's answer is lost: the submission may be made
    tool("squeue", "echo '{\"jobs\": [], \"errors\": []}'")
    tool("sbatch", "echo 'sbatch: error: Batch job submission failed: Unable to contact slurm "
                   "controller (connect failure)' >&2; exit 1")
    first = run()
    assert first.counts == {"unavailable": 1}
    # two days on, past the deadline, the controller still cannot be asked
    tool("squeue", "echo 'squeue: error: Unable to contact slurm controller (connect "
                   "failure)' >&2; exit 1")
    tool("sbatch", f"touch {tmp_path}/sbatch-ran; exit 1")
    later = run(days_on=2)
    assert later.counts == {"unavailable": 1}
    (o,) = later.outcomes
    assert "may have reached slurm:ontario, which cannot be asked now" in o.detail
    # the cluster answers again and holds no such job, in its list or its records: now it is
    # late, and it is never submitted (sbatch would leave a file behind)
    time.sleep(1.5)
    tool("squeue", "echo '{\"jobs\": [], \"errors\": []}'")
    tool("sacct", "exit 0")
    last = run(days_on=2)
    assert last.counts == {"deadline_passed": 1}
    (o,) = last.outcomes
    assert "is after the deadline" in o.detail
    assert "is in neither the backend's job list nor its records" in o.detail
    assert not (tmp_path / "sbatch-ran").exists()


def test_status_says_which_backends_it_could_not_ask(tmp_path):
    # the last refresh could not reach slurm:ontario: its running row reads "(not refreshed)"
    # and a line names the backend and why; a row refreshed fine (at the limit: its detail
    # only mentions the word) is not flagged. Before, the table showed the old state as current
    from datetime import UTC, datetime

    from sqlalchemy.orm import Session

    from carbonsched.store.models import DispatchRow

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url)
    now = datetime(2030, 1, 1, tzinfo=UTC)
    with Session(store.engine) as s:
        for key, backend, detail in (
                ("a#0", "slurm:ontario", "BackendUnavailable: controller unreachable: squeue "
                                         "could not list the jobs"),
                ("b#0", "slurm:quebec", "no BackendUnavailable here")):
            s.add(DispatchRow(key=key, job_id=key[0], piece=0, plan_id="p", site="s",
                              backend=backend, state="Running", reason="Started",
                              detail=detail, backend_id=f"{backend}:1", request_json="{}",
                              planned_start=now, planned_end=now, attempts=1, created_at=now,
                              updated_at=now, submit_attempted_at=now))
        s.commit()
    st = _cli("status", "--no-refresh", url=url, env={"COLUMNS": "200"})
    assert st.returncode == 0, st.stderr
    rows = {ln.split("│")[1].strip(): ln for ln in st.stdout.splitlines()
            if ln.startswith("│") and "#0" in ln}
    assert "Running (not refreshed)" in rows["a#0"]
    assert "not refreshed" not in rows["b#0"]
    said = " ".join(st.stderr.split())
    assert ("backend slurm:ontario unreachable: controller unreachable: squeue could not list "
            "the jobs; its 1 job(s) show the state last recorded (not refreshed); run "
            "`carbonsched status` again once it answers") in said
    assert "quebec" not in said


def test_status_shows_rows_with_and_without_a_reason_side_by_side(tmp_path):
    # a unit not yet on its backend (no backend id, no times source) beside one ended with
    # both: pandas 3 read a mixed text column's NULLs as NaN, a float, and the table crashed
    # ("unable to render float"; the tour met it when it dispatched at midnight: late rows
    # beside submitted ones). At the limit: every nullable text column NULL on one row
    from datetime import UTC, datetime

    from sqlalchemy.orm import Session

    from carbonsched.dispatch.outbox import dispatch_records
    from carbonsched.store.models import DispatchRow

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url)
    now = datetime(2030, 1, 1, tzinfo=UTC)
    with Session(store.engine) as s:
        for key, state, reason, bid, src in (("a#0", "Pending", "", None, None),
                                             ("b#0", "Failed", "DeadlinePassed", "slurm:1",
                                              "sacct")):
            s.add(DispatchRow(key=key, job_id=key[0], piece=0, plan_id="p", site="s",
                              backend="slurm:ontario", state=state, reason=reason, detail="",
                              backend_id=bid, times_source=src, request_json="{}",
                              planned_start=now, planned_end=now, attempts=1, created_at=now,
                              updated_at=now))
        s.commit()
    df = dispatch_records(store)
    assert df.loc[df["key"] == "a#0", ["backend_id", "times_source", "lease_owner"]].iloc[
        0].tolist() == [None, None, None]
    st = _cli("status", "--no-refresh", url=url, env={"COLUMNS": "200"})
    assert st.returncode == 0, st.stderr
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]]
            for ln in st.stdout.splitlines() if ln.startswith("│") and "#0" in ln}
    assert rows["a#0"][3:5] == ["Pending", ""] and rows["a#0"][2] == ""
    assert rows["b#0"][2:5] == ["slurm:1", "Failed", "DeadlinePassed"]
    assert "2 jobs" in st.stdout
