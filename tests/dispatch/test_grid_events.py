"""Grid events, live (issue 38 item 3): re-plan a site's window, pause and hold through dispatch,
resume at the end; every action once, on the real local Slurm and the Kubernetes emulator.

Exactly once is counted where the backend records it: each ``scontrol suspend``/``resume`` is a
``_slurm_rpc_suspend(...) for <id>`` line and each ``hold``/``release`` a ``_hold_job_rec`` /
``_release_job_rec`` line in the cluster's slurmctld log; on Kubernetes the Job's
``generation`` counts its spec changes. The re-plan's choice is checked offline against the
deadlines it must keep.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carbonsched.adapters.dispatch.base import CHECKPOINT_SIGNAL_LEAD_S
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.grid import Unit, baseline_kw, choose_actions, delayed_end
from carbonsched.dispatch.outbox import (
    build_adapters,
    dispatch_plan,
    mark_grid_event,
    refresh_status,
    release_due,
)
from carbonsched.errors import InputError, UnknownSiteError
from carbonsched.flex import GridEvent
from carbonsched.service.grid_events import announce_event, apply_events, show_event
from carbonsched.store.grid_events import held_keys
from carbonsched.workload.files import it_power_per_gpu_kw

from .helpers import one_plan, poll, squeue_jobs

T0 = datetime(2026, 7, 1, 17, tzinfo=UTC)
SLURM_SITE, CLUSTER = "ca-on-toronto", "ontario"
K8S_SITE = "us-ny-newyork"
POLL_S = 180.0
HERE = Path(__file__).resolve().parent


def _unit(key, running=True, preemptible=True, start=T0 - timedelta(hours=1),
          end=T0 + timedelta(hours=2), deadline=T0 + timedelta(hours=8), gpus=1, kw=1.0,
          next_key=None, next_start=None):
    return Unit(key=key, backend_id=None, running=running, preemptible=preemptible, gpus=gpus,
                power_kw=kw, planned_start=start, planned_end=end, deadline=deadline,
                next_key=next_key, next_start=next_start)


# --- the event ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("kw", "message"), [
    (dict(target_kw=None, target_fraction=None), "give exactly one of target_kw"),
    (dict(target_kw=5.0, target_fraction=0.2), "give exactly one of target_kw"),
    (dict(target_kw=0.0), "target_kw [kW] must be a finite number > 0"),
    (dict(target_fraction=1.0001), "target_fraction [-] must be a finite number > 0 and <= 1"),
    (dict(target_kw=1.0, notice=timedelta(seconds=-1)),
     "notice_minutes [min] (how long before the start the event was announced, at most a year) "
     "must be a finite number >= 0 and <= 527040"),
    (dict(target_kw=1.0, start=T0 + timedelta(minutes=1)), "is not on the hour"),
])
def test_a_bad_event_is_refused_naming_the_field(kw, message):
    kw = {"start": T0, "end": T0 + timedelta(hours=1)} | kw
    with pytest.raises(InputError, match=re.escape(message)):
        GridEvent(site="s1", **kw)


def test_an_event_at_the_limits_is_accepted():
    ev = GridEvent(site="s1", start=T0, end=T0 + timedelta(hours=1), target_fraction=1.0,
                   notice=timedelta(0))
    assert ev.reduction_kw(80.0) == 80.0                   # the whole baseline, just allowed
    with pytest.raises(InputError, match="is not after start"):
        GridEvent(site="s1", start=T0, end=T0, target_kw=1.0)
    with pytest.raises(InputError, match="has no time zone"):
        GridEvent(site="s1", start=T0.replace(tzinfo=None), end=T0 + timedelta(hours=1),
                  target_kw=1.0)


# --- the re-plan (offline) ----------------------------------------------------------------------

def test_delay_keeps_the_remaining_run_and_a_hold_moves_the_whole_run():
    ev = GridEvent(site="s1", start=T0, end=T0 + timedelta(hours=3), target_kw=1.0)
    u = _unit("a#0", end=T0 + timedelta(hours=1))                  # 1 h left at the start
    assert delayed_end(u, ev, T0, "pause") == T0 + timedelta(hours=4)
    h = _unit("b#0", running=False, start=T0 + timedelta(hours=1), end=T0 + timedelta(hours=2))
    assert delayed_end(h, ev, T0, "hold") == T0 + timedelta(hours=4)


def test_the_replan_never_delays_work_past_its_deadline_and_the_limit_is_inclusive():
    ev = GridEvent(site="s1", start=T0, end=T0 + timedelta(hours=3), target_fraction=1.0)
    at_limit = _unit("at#0", end=T0 + timedelta(hours=1), deadline=T0 + timedelta(hours=4))
    past = _unit("past#0", end=T0 + timedelta(hours=1),
                 deadline=T0 + timedelta(hours=4) - timedelta(seconds=1))
    rigid = _unit("rigid#0", preemptible=False)
    plan = choose_actions(ev, [at_limit, past, rigid], T0)
    assert [(c.unit.key, c.action) for c in plan.choices] == [("at#0", "pause")]
    assert plan.left == {"deadline": 1, "not_preemptible": 1}
    assert plan.baseline_kw == 3.0 and plan.target_kw == 3.0 and plan.planned_kw == 1.0
    assert plan.shortfall_kw == 2.0 and "SHORTFALL 2.0 kW" in plan.describe()


def test_holds_come_first_then_pauses_most_slack_first_until_the_target():
    ev = GridEvent(site="s1", start=T0, end=T0 + timedelta(hours=1), target_kw=3.0)
    units = [_unit("p-tight#0", deadline=T0 + timedelta(hours=4), kw=2.0),
             _unit("p-loose#0", deadline=T0 + timedelta(hours=9), kw=2.0),
             _unit("h#0", running=False, start=T0 + timedelta(minutes=30), kw=1.5),
             _unit("later#0", running=False, start=T0 + timedelta(hours=1), kw=9.0)]
    plan = choose_actions(ev, units, T0)
    assert [(c.unit.key, c.action) for c in plan.choices] == [("h#0", "hold"),
                                                              ("p-loose#0", "pause")]
    assert plan.planned_kw == 3.5 and plan.shortfall_kw == 0.0
    assert plan.left == {"not_needed": 1}        # p-tight; "later" starts after the window
    # the baseline is the peak of the planned power in the window, not the sum of all units
    assert baseline_kw(units, ev, T0) == 5.5


@pytest.mark.parametrize("action", ["hold", "pause"])
def test_a_piece_is_never_delayed_into_its_jobs_next_piece_and_the_limit_is_inclusive(action):
    """A hold (or pause) that would make a piece run past the start of its job's next piece is
    refused, naming the piece, the hours and the next piece; one that ends exactly when the next
    piece starts is taken. Before, only the job's deadline was checked, and two pieces of one
    job ran at once after the event."""
    ev = GridEvent(site="s1", start=T0, end=T0 + timedelta(hours=2), target_fraction=1.0)
    running = action == "pause"
    start = T0 - timedelta(hours=1) if running else T0 + timedelta(hours=1)
    end = T0 + timedelta(hours=1) if running else T0 + timedelta(hours=2)
    # held: runs [T0+2h, T0+3h); paused at T0 with 1 h left: runs on until T0+3h
    limit = T0 + timedelta(hours=3)
    at = _unit("at#0", running=running, start=start, end=end, next_key="at#1", next_start=limit)
    bad = _unit("bad#0", running=running, start=start, end=end, next_key="bad#1",
                next_start=limit - timedelta(seconds=1))
    last = _unit("last#1", running=running, start=start, end=end)      # no next piece
    plan = choose_actions(ev, [at, bad, last], T0)
    assert [(c.unit.key, c.action, c.new_end) for c in plan.choices] == [
        ("at#0", action, limit), ("last#1", action, limit)]
    assert plan.left == {"next_piece": 1}
    verb = {"hold": "held", "pause": "paused"}[action]
    hours = ("would run 2026-07-01 19:00 UTC to 2026-07-01 20:00 UTC (planned 2026-07-01 "
             "18:00 UTC to 2026-07-01 19:00 UTC)" if action == "hold" else
             "would run on until 2026-07-01 20:00 UTC (planned to end 2026-07-01 18:00 UTC)")
    (why,) = plan.refused
    assert why == (f"bad#0 not {verb}: {verb} to the event's end it {hours}, past 2026-07-01 "
                   "19:59 UTC, when its job's next piece bad#1 starts; pieces of one job never "
                   "overlap")
    assert ("left running or due: 1 would run into its job's next piece if delayed to the "
            f"event's end; {why}; SHORTFALL 1.0 kW") in plan.describe()


def test_a_hold_into_the_next_piece_is_refused_on_kubernetes_and_the_event_says_why(
        store, emulator_kubeconfig):
    """Live: the next piece is read from the outbox (any site); the piece whose hold would end
    exactly at its next piece's start is held, the one a minute too long is not, and the event's
    detail names it, its hours and its next piece."""
    catalog = load_catalog("global")
    settings = Settings(kubeconfig=emulator_kubeconfig)
    adapter = build_adapters(catalog, settings=settings)[K8S_SITE]
    start, end = _window()
    ph = f"gnp-{uuid.uuid4().hex[:6]}"
    deadline = (end + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    first = start + timedelta(hours=1)     # held to the event's end: runs [end, end + 1 h)

    def piece(job, n, at, site=K8S_SITE):
        return {"job_id": f"{ph}-{job}", "site": site, "start": at,
                "end": at + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
                "command": "sleep 3000", "piece": n, "pieces": 2, "deadline": deadline}

    doc = one_plan([piece("at", 0, first), piece("at", 1, end + timedelta(hours=1)),
                    piece("bad", 0, first),
                    piece("bad", 1, end + timedelta(minutes=59), site="jp-tk-tokyo")])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 4}
    try:
        ev = announce_event(store, catalog, GridEvent(site=K8S_SITE, start=start, end=end,
                                                      target_fraction=1.0), datetime.now(UTC))
        s = apply_events(store, catalog, {K8S_SITE: adapter}, settings,
                         lambda: datetime.now(UTC))
        assert [(k, a, o) for _, k, a, o in s.taken] == [(f"{ph}-at#0", "hold", "done")]
        shown = show_event(store, ev["event_id"], datetime.now(UTC))
        assert [(a["key"], a["action"]) for a in shown["actions"]] == [
            (f"{ph}-at#0", "hold")]
        fmt = "%Y-%m-%d %H:%M UTC"
        assert (f"{ph}-bad#0 not held: held to the event's end it would run "
                f"{end.strftime(fmt)} to {(end + timedelta(hours=1)).strftime(fmt)} (planned "
                f"{first.strftime(fmt)} to {end.strftime(fmt)}), past "
                f"{(end + timedelta(minutes=59)).strftime(fmt)}, when its job's next piece "
                f"{ph}-bad#1 starts; pieces of one job never overlap") in shown["detail"]
    finally:
        adapters = build_adapters(catalog, settings=settings)
        for job, site1 in (("at", K8S_SITE), ("bad", "jp-tk-tokyo")):
            adapters[K8S_SITE].cancel(f"{ph}-{job}#0")
            adapters[site1].cancel(f"{ph}-{job}#1")


# --- real Slurm ---------------------------------------------------------------------------------

def _conf(settings) -> Path:
    return settings.slurm_conf_dir / CLUSTER / "slurm.conf"


def _ctld_log(settings) -> str:
    return (settings.slurm_conf_dir / CLUSTER / "slurmctld.log").read_text(errors="replace")


def _rpc_counts(settings, slurm_id: str) -> dict[str, int]:
    log = _ctld_log(settings)
    return {"suspend": len(re.findall(rf"_slurm_rpc_suspend\(suspend\) for {slurm_id}\b", log)),
            "resume": len(re.findall(rf"_slurm_rpc_suspend\(resume\) for {slurm_id}\b", log)),
            "hold": len(re.findall(rf"_hold_job_rec: hold on JobId={slurm_id}\b", log)),
            "release": len(re.findall(rf"_release_job_rec: release hold on JobId={slurm_id}\b",
                                      log))}


def _ours(settings, prefix: str) -> dict[str, dict]:
    """Our jobs on the cluster by job name prefix -> squeue entry."""
    return {j["name"]: j for j in squeue_jobs(_conf(settings)) if prefix in j["name"]}


def _running_gpus(jobs: dict[str, dict]) -> int:
    n = 0
    for j in jobs.values():
        if j["states"][:1] == ["RUNNING"]:
            n += int(j["gres"].rsplit(":", 1)[-1] or 0)
    return n


def _poll(fn, until, what: str):
    return poll(fn, until, what, POLL_S, 0.5)


def _states(df, prefix: str) -> dict[str, tuple[str, str]]:
    """``{job suffix: (state, reason)}`` of the status rows of one test's jobs."""
    return {r.job_id.split("-")[-1]: (r.state, r.reason) for r in df.itertuples()
            if r.job_id.startswith(prefix)}


def _slurm_setup(store, settings, tag: str):
    """A running preemptible job (2 GPUs, piece 0 of 2), a running rigid job (1 GPU), a job due
    in the window (1 GPU, held by --begin), a due job whose deadline forbids a delay."""
    now = datetime.now(UTC).replace(microsecond=0)
    go = now + timedelta(seconds=2)
    later = now + timedelta(minutes=20)
    day = timedelta(days=1)
    ph = f"{tag}-{uuid.uuid4().hex[:6]}"
    rows = [
        {"job_id": f"{ph}-pre", "site": SLURM_SITE, "start": go, "end": go + timedelta(hours=1),
         "gpu_type": "A100", "gpus": 2, "command": "sleep 3000", "piece": 0, "pieces": 2,
         "deadline": (go + day).strftime("%Y-%m-%dT%H:%M:%SZ")},
        {"job_id": f"{ph}-rigid", "site": SLURM_SITE, "start": go,
         "end": go + timedelta(hours=1), "gpu_type": "A100", "gpus": 1, "command": "sleep 3000",
         "deadline": (go + day).strftime("%Y-%m-%dT%H:%M:%SZ")},
        {"job_id": f"{ph}-due", "site": SLURM_SITE, "start": later,
         "end": later + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
         "command": "sleep 3000", "deadline": (later + day).strftime("%Y-%m-%dT%H:%M:%SZ")},
        {"job_id": f"{ph}-tight", "site": SLURM_SITE, "start": later,
         "end": later + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
         "command": "sleep 3000",
         "deadline": (later + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}]
    doc = one_plan(rows)
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 4}
    jobs = _poll(lambda: _ours(settings, ph),
                 lambda js: sum(j["states"][:1] == ["RUNNING"] for j in js.values()) == 2,
                 "the two jobs starting")
    return ph, {n.split("-")[-2]: j for n, j in jobs.items()}


def _window() -> tuple[datetime, datetime]:
    """An event window on the hour that holds now for at least an hour: [this hour, +2 h)."""
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return start, start + timedelta(hours=2)


def _cleanup(settings, prefix: str) -> None:
    ids = [str(j["job_id"]) for j in _ours(settings, prefix).values()]
    if ids:
        subprocess.run(["scancel", *ids], env={**os.environ, "SLURM_CONF": str(_conf(settings))},
                       capture_output=True)


def test_an_event_pauses_holds_and_resumes_each_once_on_real_slurm(store, settings):
    catalog = load_catalog("global")
    adapters = build_adapters(catalog, settings=settings)
    adapters = {SLURM_SITE: adapters[SLURM_SITE]}
    ph, jobs = _slurm_setup(store, settings, "ge")
    try:
        pre, due, tight = (str(jobs[k]["job_id"]) for k in ("pre", "due", "tight"))
        kw = it_power_per_gpu_kw("A100", catalog)
        before = _running_gpus(_ours(settings, ph))
        assert before == 3
        start, end = _window()
        ev = announce_event(store, catalog, GridEvent(
            site=SLURM_SITE, start=start, end=end, target_kw=3 * kw), datetime.now(UTC),
            "test")
        assert ev["state"] == "active" and ev["planned_at"] is None
        t0 = time.monotonic()
        summary = apply_events(store, catalog, adapters, settings, lambda: datetime.now(UTC))
        after = _poll(lambda: _ours(settings, ph), lambda js: _running_gpus(js) == 1,
                      "the pause reaching the cluster")
        reached_s = time.monotonic() - t0
        assert summary.planned == [ev["event_id"]]
        assert sorted((k.split("-")[-1], a, o) for _, k, a, o in summary.taken) == [
            ("due#0", "hold", "done"), ("pre#0", "pause", "done")]
        # measured from the cluster: 2 of the 3 running GPUs stopped, the due job held
        assert after[f"carbonsched-{ph}-pre-0"]["states"][0] == "SUSPENDED"
        assert after[f"carbonsched-{ph}-rigid-0"]["states"][0] == "RUNNING"
        assert after[f"carbonsched-{ph}-due-0"]["state_reason"] == "JobHeldAdmin"
        assert after[f"carbonsched-{ph}-tight-0"]["state_reason"] != "JobHeldAdmin"
        # the reduction within the event's first interval (a 5-minute metering interval)
        assert reached_s < 300, reached_s
        print(f"reduction {before - _running_gpus(after)} GPU(s) = "
              f"{(before - _running_gpus(after)) * kw:.2f} kW reached {reached_s:.1f} s after "
              "the pass began")
        shown = show_event(store, ev["event_id"], datetime.now(UTC))
        assert shown["baseline_kw"] == pytest.approx(5 * kw)          # 2+1 running, 1+1 due
        assert shown["planned_reduction_kw"] == pytest.approx(3 * kw)
        assert shown["shortfall_kw"] == 0.0
        assert "1 would miss its deadline" in shown["detail"]
        assert "1 running and not preemptible" in shown["detail"]
        # `carbonsched status` shows the pause and the hold (Slurm calls the suspended job's
        # state SUSPENDED, which read as Running before)
        st = _states(refresh_status(store, catalog, adapters=adapters), ph)
        assert st["pre"] == ("Paused", "GridEventPaused")
        assert st["due"] == ("Dispatched", "GridEventHeld")
        assert st["rigid"] == ("Running", "Started")
        assert st["tight"][1] not in ("GridEventHeld", "GridEventPaused")
        # a second pass in the window finds everything done: nothing is sent again
        again = apply_events(store, catalog, adapters, settings, lambda: datetime.now(UTC))
        assert again.taken == [] and again.planned == []
        assert held_keys(store) == {f"{ph}-pre#0", f"{ph}-due#0"}
        # the event ends (the actor's clock is moved past it): resume and release, once each
        past = lambda: end + timedelta(seconds=1)  # noqa: E731
        done = apply_events(store, catalog, adapters, settings, past)
        assert sorted((k.split("-")[-1], a, o) for _, k, a, o in done.taken) == [
            ("due#0", "release", "done"), ("pre#0", "resume", "done")]
        assert done.ended == [ev["event_id"]]
        final = _ours(settings, ph)
        assert final[f"carbonsched-{ph}-pre-0"]["states"][0] == "RUNNING"
        assert final[f"carbonsched-{ph}-due-0"]["state_reason"] != "JobHeldAdmin"
        assert apply_events(store, catalog, adapters, settings, past).taken == []
        assert held_keys(store) == set()
        st = _poll(lambda: _states(refresh_status(store, catalog, adapters=adapters), ph),
                   lambda st: st["pre"][0] == "Running", "the resume read back")
        assert st["pre"] == ("Running", "GridEventResumed")
        assert _rpc_counts(settings, pre) == {"suspend": 1, "resume": 1, "hold": 0,
                                              "release": 0}
        assert _rpc_counts(settings, due) == {"suspend": 0, "resume": 0, "hold": 1,
                                              "release": 1}
        assert _rpc_counts(settings, tight) == {"suspend": 0, "resume": 0, "hold": 0,
                                                "release": 0}
        shown = show_event(store, ev["event_id"], datetime.now(UTC))
        assert shown["state"] == "ended"
        assert shown["counts"] == {"pause:done": 1, "hold:done": 1, "resume:done": 1,
                                   "release:done": 1}
        assert len(_ours(settings, ph)) == 4            # nothing submitted twice
    finally:
        _cleanup(settings, ph)


def test_a_kill_9_mid_action_then_a_restart_neither_repeats_nor_loses_it(any_store, settings,
                                                                         tmp_path):
    """The actor is killed right after ``scontrol suspend`` returned, before it recorded it; a
    new actor takes the claim over (the holder is a dead process of this host), reads the
    cluster, finds the job suspended and records it: one suspend on the cluster, then one
    resume at the end. On SQLite and on PostgreSQL."""
    store = any_store
    catalog = load_catalog("global")
    ph, jobs = _slurm_setup(store, settings, "gk")
    try:
        pre, due = str(jobs["pre"]["job_id"]), str(jobs["due"]["job_id"])
        kw = it_power_per_gpu_kw("A100", catalog)
        start, end = _window()
        ev = announce_event(store, catalog, GridEvent(site=SLURM_SITE, start=start, end=end,
                                                      target_kw=3 * kw), datetime.now(UTC),
                            "test")
        spec = {"url": store.url, "settings": {"slurm_conf_dir": str(settings.slurm_conf_dir)},
                "site": SLURM_SITE, "kill_after": "pause", "out": str(tmp_path / "out")}
        proc = subprocess.run([sys.executable, str(HERE / "run_grid_actor.py"),
                               json.dumps(spec)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
        assert (tmp_path / "out.killed").read_text() == f"{ph}-pre#0"
        rows = {a["key"]: a for a in show_event(store, ev["event_id"], start)["actions"]}
        assert rows[f"{ph}-pre#0"]["state"] == "claimed"       # made, never recorded
        assert rows[f"{ph}-due#0"]["state"] == "done"          # the hold came first
        assert _ours(settings, ph)[f"carbonsched-{ph}-pre-0"]["states"][0] == "SUSPENDED"
        assert _rpc_counts(settings, pre)["suspend"] == 1
        # the restart: another actor (this process) takes the dead actor's claim over
        adapters = {SLURM_SITE: build_adapters(catalog, settings=settings)[SLURM_SITE]}
        s1 = apply_events(store, catalog, adapters, settings, lambda: datetime.now(UTC))
        assert [(k, a, o) for _, k, a, o in s1.taken] == [(f"{ph}-pre#0", "pause", "already")]
        row = {a["key"]: a for a in show_event(store, ev["event_id"], start)["actions"]}[
            f"{ph}-pre#0"]
        assert row["state"] == "done" and row["attempts"] == 2
        assert row["detail"].startswith("taken over") and "already SUSPENDED" in row["detail"]
        assert _rpc_counts(settings, pre)["suspend"] == 1        # not suspended again
        s2 = apply_events(store, catalog, adapters, settings, lambda: end + timedelta(seconds=1))
        assert sorted(a for _, _, a, _ in s2.taken) == ["release", "resume"]
        assert _rpc_counts(settings, pre) == {"suspend": 1, "resume": 1, "hold": 0,
                                              "release": 0}
        assert _rpc_counts(settings, due) == {"suspend": 0, "resume": 0, "hold": 1,
                                              "release": 1}
        assert len(_ours(settings, ph)) == 4
    finally:
        _cleanup(settings, ph)


# --- the Kubernetes emulator --------------------------------------------------------------------

def _k8s_api(kubeconfig, context):
    from kubernetes import client, config

    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig),
                                                                 context=context))


def _job(api, name):
    return api.get_namespaced_custom_object("batch", "v1", "carbonsched", "jobs", name)


def test_an_event_pauses_and_resumes_a_job_once_and_keeps_a_due_one_held_on_kubernetes(
        store, settings, emulator_kubeconfig):
    catalog = load_catalog("global")
    site = catalog.site(K8S_SITE)
    adapters = {K8S_SITE: build_adapters(catalog, settings=settings)[K8S_SITE]}
    api = _k8s_api(emulator_kubeconfig, site.backend.context)
    now = datetime.now(UTC).replace(microsecond=0)
    ph = f"gk8-{uuid.uuid4().hex[:6]}"
    doc = one_plan([
        {"job_id": f"{ph}-run", "site": K8S_SITE, "start": now, "end": now + timedelta(hours=1),
         "gpu_type": "A100", "gpus": 1, "command": "sleep 3000", "piece": 0, "pieces": 2,
         "deadline": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")},
        {"job_id": f"{ph}-due", "site": K8S_SITE, "start": now + timedelta(minutes=10),
         "end": now + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
         "command": "sleep 3000",
         "deadline": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 2}
    names = {o["metadata"]["annotations"]["carbonsched.io/key"]: o["metadata"]["name"]
             for o in api.list_namespaced_custom_object(
                 "batch", "v1", "carbonsched", "jobs",
                 label_selector=f"carbonsched.io/plan={doc['plan_id'][:63]}")["items"]}
    run, due = names[f"{ph}-run#0"], names[f"{ph}-due#0"]
    for n in (run, due):   # long enough to be paused (the emulator's test hook)
        api.patch_namespaced_custom_object(
            "batch", "v1", "carbonsched", "jobs", n,
            {"metadata": {"annotations": {"emulator.carbonsched.io/run-seconds": "3000"}}})
    assert release_due(store, catalog, adapters=adapters) == [f"{ph}-run#0"]
    assert _job(api, run)["status"]["active"] == 1
    gen0 = _job(api, run)["metadata"]["generation"]
    start, end = _window()
    ev = announce_event(store, catalog, GridEvent(site=K8S_SITE, start=start, end=end,
                                                  target_fraction=1.0), datetime.now(UTC),
                        "test")
    s = apply_events(store, catalog, adapters, settings, lambda: datetime.now(UTC))
    assert sorted((k, a, o) for _, k, a, o in s.taken) == [
        (f"{ph}-due#0", "hold", "done"), (f"{ph}-run#0", "pause", "done")]
    paused = _job(api, run)
    assert paused["spec"]["suspend"] is True and paused["status"]["active"] == 0
    assert {c["type"]: c["reason"] for c in paused["status"]["conditions"]} == {
        "Suspended": "JobSuspended"}
    # `carbonsched status`: the paused Job (spec.suspend read as Dispatched before) and the held
    st = _states(refresh_status(store, catalog, adapters=adapters), ph)
    assert st == {"run": ("Paused", "GridEventPaused"), "due": ("Dispatched", "GridEventHeld")}
    # the due Job's planned start comes during the event: the release loop leaves it held
    late = lambda: now + timedelta(minutes=11)  # noqa: E731
    assert release_due(store, catalog, adapters=adapters, clock=late) == []
    assert _job(api, due)["spec"]["suspend"] is True
    assert apply_events(store, catalog, adapters, settings, late).taken == []
    after = lambda: end + timedelta(seconds=1)  # noqa: E731
    t0 = datetime.now(UTC)
    s = apply_events(store, catalog, adapters, settings, after)
    t1 = datetime.now(UTC)
    assert sorted((k, a, o) for _, k, a, o in s.taken) == [
        (f"{ph}-due#0", "release", "done"), (f"{ph}-run#0", "resume", "done")]
    resumed, released = _job(api, run), _job(api, due)
    assert resumed["spec"]["suspend"] is False and resumed["status"]["active"] == 1
    # startTime is reset: the deadline is the time left to the piece's planned stop (120 s
    # before its end), moved later by the pause (to after the event's end), counted on the
    # adapter's (wall) clock; before, its whole length again
    stop = datetime.fromisoformat(resumed["metadata"]["annotations"][
        "carbonsched.io/stop-at"].replace("Z", "+00:00"))
    assert stop > after() + timedelta(minutes=30)
    left = timedelta(seconds=resumed["spec"]["activeDeadlineSeconds"])
    assert t0 <= stop - left <= t1 + timedelta(seconds=1)   # whole seconds, rounded down
    assert {c["type"]: (c["status"], c["reason"]) for c in resumed["status"]["conditions"]} == {
        "Suspended": ("False", "JobResumed")}
    assert released["spec"]["suspend"] is False
    st = _states(refresh_status(store, catalog, adapters=adapters), ph)
    assert st["run"] == ("Running", "GridEventResumed")
    # the run Job's spec changed exactly twice (suspend, resume); nothing more after another pass
    assert apply_events(store, catalog, adapters, settings, after).taken == []
    assert _job(api, run)["metadata"]["generation"] == gen0 + 2
    assert show_event(store, ev["event_id"], datetime.now(UTC))["state"] == "ended"
    for n in (run, due):
        api.delete_namespaced_custom_object("batch", "v1", "carbonsched", "jobs", n)


def test_an_event_at_an_unknown_site_is_refused_with_the_sites(store):
    catalog = load_catalog("global")
    with pytest.raises(UnknownSiteError, match="ca-on-toronto"):
        announce_event(store, catalog, GridEvent(site="nowhere", start=T0,
                                                 end=T0 + timedelta(hours=1), target_kw=1.0),
                       T0)


@pytest.mark.parametrize(("attempts", "undone"), [(1, True), (0, False)])
def test_a_pause_tried_before_the_event_ended_is_undone(store, attempts, undone):
    # scontrol suspend timed out (BackendUnavailable) but the controller applied it: the
    # action went back to "planned" with its attempt counted. The event ended before a later
    # pass found it ALREADY: before, it was skipped and no resume was written, so the job
    # stayed suspended. Now a tried action is settled done and its undo (which reads the
    # backend first) is taken. At the limit: never tried (0 attempts) is skipped, no undo
    from sqlalchemy.orm import Session

    from carbonsched.adapters.dispatch.base import WorkAction, WorkOutcome
    from carbonsched.dispatch.grid import grid_pass
    from carbonsched.store.grid_events import action_rows
    from carbonsched.store.grid_models import GridActionRow, GridEventRow

    class Fake:
        name = "slurm:fake"
        pauses_running = True
        calls: list = []

        def pause(self, key):
            return WorkAction(WorkOutcome.ALREADY, None, "")

        def resume(self, key, end_by=None):
            Fake.calls.append(("resume", key))
            return WorkAction(WorkOutcome.DONE, "fake:1", "scontrol resume 1")

        def hold(self, key):
            return WorkAction(WorkOutcome.ALREADY, None, "")

        def unhold(self, key, planned_start, now, end_by=None):
            Fake.calls.append(("release", key))
            return WorkAction(WorkOutcome.DONE, "fake:1", "")

    Fake.calls = []
    end = T0 + timedelta(hours=1)
    with Session(store.engine) as s:
        s.add(GridEventRow(event_id="ge-000000000001", site=SLURM_SITE, start=T0, end=end,
                           target_kw=5.0, notice_s=0.0, source="test", created_at=T0,
                           planned_at=T0, detail=""))
        s.flush()
        s.add(GridActionRow(event_id="ge-000000000001", key="j#0", action="pause",
                            site=SLURM_SITE, gpus=1, power_kw=5.0, state="planned",
                            attempts=attempts, created_at=T0, updated_at=T0,
                            detail="BackendUnavailable at ..., retried next pass: timed out"))
        s.commit()
    grid_pass(store, load_catalog("global"), {SLURM_SITE: Fake()},
              clock=lambda: end + timedelta(minutes=5), owner="actor-1")
    acts = {(a.key, a.action): a.state for a in action_rows(store, "ge-000000000001")}
    if undone:
        assert acts == {("j#0", "pause"): "done", ("j#0", "resume"): "done"}
        assert Fake.calls == [("resume", "j#0")]
    else:
        assert acts == {("j#0", "pause"): "skipped"} and Fake.calls == []


# --- what a pass says it did: taken, found done, skipped ----------------------------------------
# Before, `grid-event apply` printed "N action(s) taken or found done" with N counting actions the
# backend skipped (a hold of work already running, a pause of work not started, a backend that
# cannot pause) and exited 0: a cron saw success while the load the re-plan counted on ran on.

class _Backend:
    """A backend that answers each key's pause or hold with the outcome ``said`` gives it."""

    name = "slurm:fake"
    pauses_running = True

    def __init__(self, said):
        from carbonsched.adapters.dispatch.base import WorkAction, WorkOutcome

        self._said = {k: (WorkOutcome(o), d) for k, (o, d) in said.items()}
        self._action = WorkAction

    def _answer(self, key):
        outcome, detail = self._said[key]
        return self._action(outcome, f"fake:{key}", detail)

    pause = hold = _answer

    def resume(self, key, end_by=None):  # pragma: no cover - no event ends in these passes
        return self._answer(key)

    def unhold(self, key, planned_start, now, end_by=None):  # pragma: no cover
        return self._answer(key)


def _planned_event(store, start, actions, planned_kw, shortfall_kw=1.0, target_kw=20.0):
    """An event at the Slurm site re-planned at ``start`` with ``actions`` ((key, action, kW))."""
    from sqlalchemy.orm import Session

    from carbonsched.store.grid_models import GridActionRow, GridEventRow

    with Session(store.engine) as s:
        s.add(GridEventRow(event_id="ge-00000000000a", site=SLURM_SITE, start=start,
                           end=start + timedelta(hours=2), target_kw=target_kw, notice_s=0.0,
                           source="test", created_at=start, planned_at=start,
                           baseline_kw=40.0, target_reduction_kw=target_kw,
                           planned_reduction_kw=planned_kw, shortfall_kw=shortfall_kw,
                           detail="baseline 40.0 kW"))
        s.flush()
        for key, action, kw in actions:
            s.add(GridActionRow(event_id="ge-00000000000a", key=key, action=action,
                                site=SLURM_SITE, gpus=1, power_kw=kw, state="planned",
                                attempts=0, created_at=start, updated_at=start, detail=""))
        s.commit()


def _apply_cli(store, monkeypatch, backend):
    """`carbonsched grid-event apply` in this process, on ``store``, with ``backend``."""
    from typer.testing import CliRunner

    import carbonsched.dispatch.outbox as outbox
    from carbonsched.cli.app import app
    from carbonsched.config import get_settings

    monkeypatch.setattr(outbox, "build_adapters", lambda *a, **k: {SLURM_SITE: backend})
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", str(store.engine.url))
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(app, ["grid-event", "apply", "--catalog", "global"])
    finally:
        get_settings.cache_clear()


def _this_hour():
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def test_a_skipped_hold_is_counted_apart_named_and_fails_the_pass(store, monkeypatch):
    _planned_event(store, _this_hour(), [("run#0", "pause", 12.0), ("due#0", "hold", 7.0)],
                   planned_kw=19.0)
    backend = _Backend({"run#0": ("done", "scontrol suspend 41"),
                        "due#0": ("wrong_state", "job is RUNNING, not PENDING: scontrol hold "
                                                 "not sent")})
    r = _apply_cli(store, monkeypatch, backend)
    assert r.exit_code == 2, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == ("grid events: 0 re-planned, 1 action(s) taken, 0 found done, 1 skipped, "
                        "0 left for the next pass, 0 failed, 0 ended")
    assert lines[1] == ("  skipped ge-00000000000a hold due#0 (NOT SHED, wrong_state, 7.0 kW): "
                        "job is RUNNING, not PENDING: scontrol hold not sent")
    # the event's figures are the re-plan's: said so, with what this pass left unshed
    assert lines[2] == ("  ge-00000000000a: 7.0 kW of the 19.0 kW its re-plan chose to shed is "
                        "not shed (1 pause or hold skipped in this pass); its recorded "
                        "shortfall (1.0 kW) is the re-plan's figure and does not count it: "
                        "8.0 kW short of the 20.0 kW asked")
    shown = show_event(store, "ge-00000000000a", datetime.now(UTC))
    assert shown["counts"] == {"pause:done": 1, "hold:skipped": 1}


@pytest.mark.parametrize(("planned_kw", "short"), [(30.0, 7.0), (27.0, 0.0), (32.0, 0.0)])
def test_the_shortfall_of_a_skip_counts_what_the_re_plan_shed_beyond_the_target(
        store, monkeypatch, planned_kw, short):
    # a re-plan shedding 30 kW for a 20 kW target, a 7 kW hold skipped: 23 kW shed, 0 short;
    # at the limit 27 - 7 = 20 kW: 0 short; 30 kW with a 17 kW hold: 20 - 13 = 7 kW short
    # (before, the recorded shortfall plus every skipped kW: 7 and 17 kW short)
    hold = 7.0 if planned_kw != 30.0 else 17.0
    _planned_event(store, _this_hour(), [("run#0", "pause", planned_kw - hold),
                                         ("due#0", "hold", hold)],
                   planned_kw=planned_kw, shortfall_kw=0.0)
    backend = _Backend({"run#0": ("done", "scontrol suspend 41"),
                        "due#0": ("wrong_state", "job is RUNNING, not PENDING")})
    r = _apply_cli(store, monkeypatch, backend)
    assert r.exit_code == 2, r.output
    assert r.stdout.splitlines()[2].endswith(f"{short:.1f} kW short of the 20.0 kW asked")


def test_a_pass_taking_every_action_exits_0(store, monkeypatch):
    # the limit: nothing skipped, the counts as before (taken and found done apart)
    _planned_event(store, _this_hour(), [("run#0", "pause", 12.0), ("due#0", "hold", 7.0)],
                   planned_kw=19.0)
    backend = _Backend({"run#0": ("done", "scontrol suspend 41"),
                        "due#0": ("already", "already PENDING (JobHeldAdmin)")})
    r = _apply_cli(store, monkeypatch, backend)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [
        "grid events: 0 re-planned, 1 action(s) taken, 1 found done, 0 skipped, 0 left for the "
        "next pass, 0 failed, 0 ended"]


def test_a_hold_of_a_job_gone_from_its_backend_is_named_but_sheds_nothing_less(store):
    # absent: the job is over (or gone) there and draws nothing; skipped, not load left on
    from carbonsched.dispatch.grid import SkippedAction, grid_pass

    start = _this_hour()
    _planned_event(store, start, [("run#0", "pause", 12.0), ("due#0", "hold", 7.0)],
                   planned_kw=19.0)
    backend = _Backend({"run#0": ("unsupported", "cannot pause this kind"),
                        "due#0": ("absent", "slurm:fake has no live job of key due#0")})
    s = grid_pass(store, load_catalog("global"), {SLURM_SITE: backend},
                  clock=lambda: start + timedelta(minutes=1), owner="actor-1")
    assert s.taken == []
    assert s.skipped == [
        SkippedAction("ge-00000000000a", "run#0", "pause", "unsupported",
                      "cannot pause this kind", 12.0),
        SkippedAction("ge-00000000000a", "due#0", "hold", "absent",
                      "slurm:fake has no live job of key due#0", 7.0)]
    assert [a.key for a in s.load_not_shed] == ["run#0"]
    assert s.to_dict()["skipped"][1]["load_not_shed"] is False


def test_a_shedding_action_never_taken_in_the_window_is_named_skipped_at_its_end(store):
    from carbonsched.dispatch.grid import grid_pass

    start = _this_hour() - timedelta(hours=3)           # ended an hour ago
    _planned_event(store, start, [("due#0", "hold", 7.0)], planned_kw=7.0)
    s = grid_pass(store, load_catalog("global"), {SLURM_SITE: _Backend({})},
                  clock=lambda: datetime.now(UTC), owner="actor-1")
    assert [(a.key, a.outcome, a.load_not_shed) for a in s.skipped] == [
        ("due#0", "skipped", True)]
    assert s.skipped[0].why == "the event ended before this action was taken: not taken late"
    assert s.ended == ["ge-00000000000a"]


def test_the_same_event_announced_twice_is_one_event(store):
    # a client retrying after a lost 201, or two announcers: before, each POST stored a new
    # event (a random id) and the second re-planned the rest of the site: 10 units of 10 kW
    # at 50 % shed 50 kW, then 30 kW more. Now the same site, window and target is one event
    from carbonsched.store.grid_events import event_rows

    catalog = load_catalog("global")
    ev = GridEvent(site=SLURM_SITE, start=T0, end=T0 + timedelta(hours=1),
                   target_fraction=0.5)
    first = announce_event(store, catalog, ev, T0, "api:admin")
    again = announce_event(store, catalog, ev, T0 + timedelta(minutes=1), "cli")
    assert again["event_id"] == first["event_id"]
    assert again["detail"].startswith("already announced (the same site, window and target)")
    assert [r.source for r in event_rows(store)] == ["api:admin"]
    # at the limit: another target (or window) is another event
    other = announce_event(store, catalog, GridEvent(site=SLURM_SITE, start=T0,
                                                     end=T0 + timedelta(hours=1),
                                                     target_fraction=0.4), T0)
    assert other["event_id"] != first["event_id"] and len(event_rows(store)) == 2


def test_a_backend_that_cannot_pause_is_named_not_silent(store, settings):
    """Kueue workloads cannot be paused by carbonsched: the re-plan says so in the event."""
    catalog = load_catalog("global")
    site = "us-pjm-ashburn"
    adapters = {site: build_adapters(catalog, settings=settings)[site]}
    start, end = _window()
    ev = announce_event(store, catalog, GridEvent(site=site, start=start, end=end,
                                                  target_kw=1.0), datetime.now(UTC))
    apply_events(store, catalog, adapters, Settings(), lambda: datetime.now(UTC))
    shown = show_event(store, ev["event_id"], datetime.now(UTC))
    assert "cannot pause running work (only holds)" in shown["detail"]
    assert shown["shortfall_kw"] == 1.0 and "SHORTFALL 1.0 kW" in shown["detail"]


def test_an_unreachable_backend_is_a_waiting_state_then_the_event_is_acted_on(
        store, settings, emulator_kubeconfig, tmp_path):
    """The re-plan cannot read the cluster: the event says so and waits (no traceback, nothing
    lost); the next pass with the cluster back plans and holds the due Job."""
    import yaml

    from carbonsched.adapters.dispatch.registry import default_registry
    from carbonsched.dispatch.outbox import backend_config

    catalog = load_catalog("global")
    site = catalog.site(K8S_SITE)
    now = datetime.now(UTC).replace(microsecond=0)
    ph = f"gu-{uuid.uuid4().hex[:6]}"
    doc = one_plan([{"job_id": f"{ph}-due", "site": K8S_SITE,
                     "start": now + timedelta(minutes=10), "end": now + timedelta(hours=1),
                     "gpu_type": "A100", "gpus": 1, "command": "sleep 3000",
                     "deadline": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 1}
    kc = yaml.safe_load(emulator_kubeconfig.read_text())
    for c in kc["clusters"]:
        c["cluster"]["server"] = re.sub(r":\d+/", ":1/", c["cluster"]["server"])
    dead = tmp_path / "dead.yaml"
    dead.write_text(yaml.safe_dump(kc))
    down = {K8S_SITE: default_registry().build_for_sites(
        [site], backend_config(Settings(kubeconfig=dead)))[K8S_SITE]}
    start, end = _window()
    ev = announce_event(store, catalog, GridEvent(site=K8S_SITE, start=start, end=end,
                                                  target_kw=0.5), datetime.now(UTC))
    s = apply_events(store, catalog, down, settings, lambda: datetime.now(UTC))
    assert s.planned == [] and [(e, a) for e, _, a, _ in s.retry] == [(ev["event_id"], "plan")]
    shown = show_event(store, ev["event_id"], datetime.now(UTC))
    assert shown["planned_at"] is None and shown["actions"] == []
    assert shown["detail"].startswith("re-plan waiting since") and "unreachable" in \
        shown["detail"] and "retried every pass" in shown["detail"]
    up = {K8S_SITE: build_adapters(catalog, settings=settings)[K8S_SITE]}
    s = apply_events(store, catalog, up, settings, lambda: datetime.now(UTC))
    assert s.planned == [ev["event_id"]]
    assert [(k, a, o) for _, k, a, o in s.taken] == [(f"{ph}-due#0", "hold", "done")]
    s = apply_events(store, catalog, up, settings, lambda: end + timedelta(seconds=1))
    assert [(k, a, o) for _, k, a, o in s.taken] == [(f"{ph}-due#0", "release", "done")]
    shown = show_event(store, ev["event_id"], datetime.now(UTC))
    assert shown["state"] == "ended" and shown["detail"].startswith("baseline")
    up[K8S_SITE].cancel(f"{ph}-due#0")


def test_an_event_pauses_and_resumes_a_jobset_once(store, settings, emulator_kubeconfig):
    """A JobSet site: ``spec.suspend`` on the JobSet; its child Jobs follow (the emulator's
    JobSet controller, as the real one)."""
    site_id = "jp-tk-tokyo"
    catalog = load_catalog("global")
    site = catalog.site(site_id)
    adapters = {site_id: build_adapters(catalog, settings=settings)[site_id]}
    api = _k8s_api(emulator_kubeconfig, site.backend.context)
    grp = ("jobset.x-k8s.io", "v1alpha2", "carbonsched", "jobsets")
    now = datetime.now(UTC).replace(microsecond=0)
    ph = f"gjs-{uuid.uuid4().hex[:6]}"
    doc = one_plan([{"job_id": f"{ph}-run", "site": site_id, "start": now,
                     "end": now + timedelta(hours=1), "gpu_type": "A100", "gpus": 1,
                     "command": "sleep 3000", "piece": 0, "pieces": 2,
                     "deadline": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 1}
    (obj,) = api.list_namespaced_custom_object(
        *grp, label_selector=f"carbonsched.io/plan={doc['plan_id'][:63]}")["items"]
    name = obj["metadata"]["name"]
    api.patch_namespaced_custom_object(*grp, name, {"metadata": {"annotations": {
        "emulator.carbonsched.io/run-seconds": "3000"}}})
    assert release_due(store, catalog, adapters=adapters) == [f"{ph}-run#0"]

    def children():
        return api.list_namespaced_custom_object(
            "batch", "v1", "carbonsched", "jobs",
            label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")["items"]

    assert [c["spec"]["suspend"] for c in children()] == [False]
    gen0 = api.get_namespaced_custom_object(*grp, name)["metadata"]["generation"]
    start, end = _window()
    ev = announce_event(store, catalog, GridEvent(site=site_id, start=start, end=end,
                                                  target_fraction=1.0), datetime.now(UTC))
    s = apply_events(store, catalog, adapters, settings, lambda: datetime.now(UTC))
    assert [(k, a, o) for _, k, a, o in s.taken] == [(f"{ph}-run#0", "pause", "done")]
    js = api.get_namespaced_custom_object(*grp, name)
    assert js["spec"]["suspend"] is True
    assert {c["type"]: c["status"] for c in js["status"]["conditions"]} == {"Suspended": "True"}
    assert [c["spec"]["suspend"] for c in children()] == [True]
    s = apply_events(store, catalog, adapters, settings, lambda: end + timedelta(seconds=1))
    assert [(k, a, o) for _, k, a, o in s.taken] == [(f"{ph}-run#0", "resume", "done")]
    js = api.get_namespaced_custom_object(*grp, name)
    assert js["spec"]["suspend"] is False and js["metadata"]["generation"] == gen0 + 2
    assert {c["type"]: c["status"] for c in js["status"]["conditions"]} == {"Suspended": "False"}
    assert [c["spec"]["suspend"] for c in children()] == [False]
    # its child Jobs' deadline (the JobSet's replicatedJobs cannot change): the time left to
    # its planned stop, moved later by the pause (after the event's end)
    planned = now + timedelta(hours=1, seconds=-CHECKPOINT_SIGNAL_LEAD_S)
    stop = datetime.fromisoformat(js["metadata"]["annotations"][
        "carbonsched.io/stop-at"].replace("Z", "+00:00"))
    assert stop > planned
    (left,) = [c["spec"]["activeDeadlineSeconds"] for c in children()]
    assert 0 < left <= (stop - now).total_seconds() - 1
    assert show_event(store, ev["event_id"], datetime.now(UTC))["state"] == "ended"
    api.delete_namespaced_custom_object(*grp, name)


def test_an_action_whose_actor_died_before_acting_is_never_taken_after_the_end(store, settings,
                                                                             tmp_path):
    """The actor claimed the pause and was killed before ``scontrol suspend``; the next pass
    comes after the event's end: the pause is not taken late, the resume finds the job running
    (``already``): no suspend and no resume on the cluster."""
    catalog = load_catalog("global")
    ph, jobs = _slurm_setup(store, settings, "gb")
    try:
        pre = str(jobs["pre"]["job_id"])
        kw = it_power_per_gpu_kw("A100", catalog)
        start, end = _window()
        ev = announce_event(store, catalog, GridEvent(site=SLURM_SITE, start=start, end=end,
                                                      target_kw=3 * kw), datetime.now(UTC))
        spec = {"url": store.url, "settings": {"slurm_conf_dir": str(settings.slurm_conf_dir)},
                "site": SLURM_SITE, "kill_before": "pause", "out": str(tmp_path / "out")}
        proc = subprocess.run([sys.executable, str(HERE / "run_grid_actor.py"),
                               json.dumps(spec)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
        adapters = {SLURM_SITE: build_adapters(catalog, settings=settings)[SLURM_SITE]}
        s = apply_events(store, catalog, adapters, settings, lambda: end + timedelta(seconds=1))
        assert sorted((k.split("-")[-1], a, o) for _, k, a, o in s.taken) == [
            ("due#0", "release", "done"), ("pre#0", "pause", "settled"),
            ("pre#0", "resume", "already")]
        assert s.ended == [ev["event_id"]]
        assert _rpc_counts(settings, pre) == {"suspend": 0, "resume": 0, "hold": 0,
                                              "release": 0}
        assert _ours(settings, ph)[f"carbonsched-{ph}-pre-0"]["states"][0] == "RUNNING"
    finally:
        _cleanup(settings, ph)


@pytest.mark.parametrize(("mark", "state", "raw", "shown"), [
    # the backend confirms: shown as the event left it
    ("paused", "Running", "SUSPENDED", ("Paused", "GridEventPaused")),
    ("paused", "Dispatched", "suspended", ("Paused", "GridEventPaused")),
    ("held", "Dispatched", "PENDING", ("Dispatched", "GridEventHeld")),
    ("resumed", "Running", "RUNNING", ("Running", "GridEventResumed")),
    # the backend says otherwise (resumed by hand, started, ended): shown as it says
    ("paused", "Running", "RUNNING", ("Running", "Started")),
    ("held", "Running", "RUNNING", ("Running", "Started")),
    ("resumed", "Succeeded", "COMPLETED", ("Succeeded", "Completed")),
])
def test_status_shows_a_grid_pause_only_where_the_backend_confirms_it(mark, state, raw, shown):
    from carbonsched.adapters.dispatch.base import BackendJob
    from carbonsched.domain import JobState, ReasonCode
    from carbonsched.store.grid_events import GridMark
    from carbonsched.store.models import DispatchRow

    reason = {"Running": "Started", "Dispatched": "Submitted", "Succeeded": "Completed"}[state]
    row = DispatchRow(key="j#0", state=state, reason=reason, detail="")
    job = BackendJob(key="j#0", plan_id="p", backend_id="c:1", state=JobState(state),
                     reason=ReasonCode(reason), raw_state=raw)
    changed = mark_grid_event(row, job, GridMark(mark, "ge-0123456789ab", T0))
    assert (row.state, row.reason) == shown
    assert changed is (shown != (state, reason))
    if changed:
        assert "ge-0123456789ab" in row.detail and "2026-07-01T17:00:00Z" in row.detail


def test_an_event_at_a_site_without_a_backend_here_says_it_waits(store):
    # the service could not build the site's adapter (named in /readyz): before, the pass
    # skipped the event without a word and it read "active" for its whole window
    from carbonsched.dispatch.grid import grid_pass

    catalog = load_catalog("global")
    ev = announce_event(store, catalog, GridEvent(site=SLURM_SITE, start=T0,
                                                  end=T0 + timedelta(hours=1),
                                                  target_fraction=0.5), T0, "cli")
    # a pass of another catalog sharing the store leaves it to an actor that has the site
    other = grid_pass(store, load_catalog("china-eastdata-westcompute"), {},
                      clock=lambda: T0 + timedelta(minutes=4))
    assert other.retry == [] and not show_event(store, ev["event_id"], T0)["detail"]
    out = grid_pass(store, catalog, {}, clock=lambda: T0 + timedelta(minutes=5))
    assert [(e, a) for e, _k, a, _w in out.retry] == [(ev["event_id"], "plan")]
    shown = show_event(store, ev["event_id"], T0 + timedelta(minutes=6))
    assert shown["detail"].startswith(f"waiting since {(T0 + timedelta(minutes=5)).isoformat()}")
    assert (f"no backend for site {SLURM_SITE} in this service (its adapter could not be "
            "built; /readyz names why); retried every pass") in shown["detail"]
    # the next pass leaves the first time it was found so (not "since" the latest pass)
    grid_pass(store, catalog, {}, clock=lambda: T0 + timedelta(minutes=9))
    assert show_event(store, ev["event_id"], T0 + timedelta(minutes=10))["detail"] == \
        shown["detail"]
    # past its end, never planned: closed, backend or not (before: left open for ever)
    out = grid_pass(store, catalog, {}, clock=lambda: T0 + timedelta(hours=1))
    assert out.ended == [ev["event_id"]] and out.retry == []
    assert show_event(store, ev["event_id"], T0 + timedelta(hours=1))["detail"].endswith(
        "ended before any actor could act on it (no backend for its site was available in its "
        "window)")


class _Raising(_Backend):
    """``_Backend``, whose pause of ``run#0`` raises what no backend answers (a fault)."""

    def _answer(self, key):
        if key == "run#0":
            raise KeyError("JobState")
        return super()._answer(key)

    pause = hold = _answer


def test_an_adapter_fault_in_one_action_holds_back_only_that_action(store):
    """Before, the KeyError ended the grid pass: the action stayed claimed until its lease
    ran out and the event's other actions were never taken. Now it counts as a failed attempt
    of that action (named, the traceback to the log) and the hold of ``due#0`` is taken."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from carbonsched.dispatch.grid import grid_pass
    from carbonsched.store.grid_models import GridActionRow

    start = _this_hour()
    _planned_event(store, start, [("run#0", "pause", 12.0), ("due#0", "hold", 7.0)],
                   planned_kw=19.0)
    backend = _Raising({"due#0": ("done", "scontrol hold 42")})
    s = grid_pass(store, load_catalog("global"), {SLURM_SITE: backend},
                  clock=lambda: start + timedelta(minutes=1), owner="actor-1")
    assert [t[1] for t in s.taken] == ["due#0"]
    ((_ev, key, action, why),) = s.retry
    assert (key, action) == ("run#0", "pause")
    assert why == ("slurm:fake: pause of run#0 raised KeyError: 'JobState' (a fault in the "
                   "adapter, not the backend's answer; the traceback is in the log); tried "
                   "again in the next pass")
    with Session(store.engine) as ss:
        states = {a.key: (a.state, a.owner) for a in ss.scalars(select(GridActionRow))}
    assert states["run#0"][0] == "planned" and states["due#0"][0] == "done"


def test_an_adapter_fault_reading_the_site_makes_the_event_wait(store):
    """The re-plan reads the site's units live (``status``); a fault there ended the pass with
    a traceback. Now the event waits with the fault named, as for an outage."""
    from sqlalchemy.orm import Session

    from carbonsched.dispatch.grid import grid_pass
    from carbonsched.store.models import DispatchRow

    catalog = load_catalog("global")
    ev = announce_event(store, catalog, GridEvent(site=SLURM_SITE, start=T0,
                                                  end=T0 + timedelta(hours=1),
                                                  target_fraction=0.5), T0, "cli")
    with Session(store.engine) as s:
        s.add(DispatchRow(key="j#0", job_id="j", piece=0, plan_id="p", site=SLURM_SITE,
                          backend="slurm:fake", state="Dispatched", reason="Submitted",
                          detail="", request_json="{}", planned_start=T0,
                          planned_end=T0 + timedelta(hours=2), attempts=1, created_at=T0,
                          updated_at=T0, backend_id="c:1", duplicates=""))
        s.commit()

    class _StatusFault(_Backend):
        def status(self, keys=None):
            raise KeyError("JobState")

    out = grid_pass(store, catalog, {SLURM_SITE: _StatusFault({})},
                    clock=lambda: T0 + timedelta(minutes=5))
    ((eid, _key, what, why),) = out.retry
    assert (eid, what) == (ev["event_id"], "plan")
    assert why.startswith("slurm:fake: status raised KeyError: 'JobState' (a fault in the "
                          "adapter")
    assert "could not be read (slurm:fake: status raised KeyError" in show_event(
        store, ev["event_id"], T0 + timedelta(minutes=6))["detail"]


# --- the moved stop (Kubernetes) ----------------------------------------------------------------

def test_the_moved_end_is_the_remaining_run_from_the_undo_capped_by_the_next_piece_and_deadline():
    """:func:`moved_end`: a release runs the whole planned run from the undo, a resume what was
    left at the pause; both capped by the next piece's start and the deadline (just at the
    limit, and past it), never before the planned end."""
    from carbonsched.dispatch.grid import moved_end

    s, e, dl = T0, T0 + timedelta(hours=2), T0 + timedelta(days=1)
    undo = T0 + timedelta(hours=3)
    assert moved_end("release", s, e, None, undo, dl, None) == undo + timedelta(hours=2)
    paused = T0 + timedelta(minutes=30)                       # 90 min left at the pause
    assert moved_end("resume", s, e, paused, undo, dl, None) == undo + timedelta(minutes=90)
    cap = undo + timedelta(hours=2)                           # the next piece: just at the limit
    assert moved_end("release", s, e, None, undo, dl, cap) == cap
    assert moved_end("release", s, e, None, undo, dl, cap - timedelta(seconds=1)) == \
        cap - timedelta(seconds=1)
    assert moved_end("release", s, e, None, undo, undo + timedelta(hours=1), None) == \
        undo + timedelta(hours=1)                            # the deadline
    assert moved_end("release", s, e, None, undo, dl, e) == e  # never before the planned end


def _at(fixed):
    return lambda: fixed


@pytest.mark.parametrize(("case", "site"), [
    ("hold", K8S_SITE), ("hold", "jp-tk-tokyo"), ("hold", "us-pjm-ashburn"),
    ("hold", "sg-singapore"), ("pause", K8S_SITE), ("pause", "jp-tk-tokyo"),
    ("cap", K8S_SITE), ("late", K8S_SITE), ("late", "sg-singapore")])
def test_a_hold_or_pause_moves_the_pieces_planned_stop_by_its_delay(case, site, store,
                                                                    emulator_kubeconfig):
    """A grid event's hold (pause) of a pausing piece moves its planned stop by the event's delay,
    capped by its job's next piece and deadline. Before, the release (resume) at the event's end
    bounded the run by the stop written at creation: a piece held past its planned stop ran no
    pod (and was recorded Succeeded/Paused, none of its work done), a paused one lost the
    pause's length.

    - ``hold``: piece [W+10m, W+70m) held by the event [W, W+2h); released at its end, past its
      planned stop, it runs its whole length (less the checkpoint grace) to the moved stop;
    - ``pause``: running piece [W, W+1h) paused at W+10m, resumed at the end: its stop moves by
      exactly the pause's length;
    - ``cap``: as ``hold``, the next piece planned exactly at the held piece's delayed end
      (accepted, just at the limit): the moved end is that start, one second short of a full run;
    - ``late``: as ``cap``, the undo comes when even the cap has passed: no pod runs, recorded
      Failed/DeadlinePassed, its work still owed, not Succeeded/Paused.

    Clocks are injected (the grid pass's and the adapter's); the emulator runs the pods.
    """
    from carbonsched.adapters.dispatch.k8s_workloads import RELEASED_PAST_STOP
    from carbonsched.adapters.dispatch.kubernetes import A_END, A_STOP, job_name

    catalog = load_catalog("global")
    settings = Settings(kubeconfig=emulator_kubeconfig)
    adapter = build_adapters(catalog, settings=settings)[site]
    adapters = {site: adapter}
    w, e = _window()                                          # the event [W, W+2h)
    ph = f"gms-{uuid.uuid4().hex[:6]}"
    job = f"{ph}-p"
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    deadline = e + timedelta(days=1)
    held = case != "pause"
    s0 = w + timedelta(minutes=10) if held else w
    e0 = s0 + timedelta(hours=1)
    nxt = e + timedelta(hours=1) if case in ("cap", "late") else e + timedelta(hours=3)

    def piece(n, at, end):
        return {"job_id": job, "site": site, "start": at, "end": end, "gpu_type": "A100",
                "gpus": 1, "command": "sleep 3000", "piece": n, "pieces": 2,
                "deadline": deadline.strftime(fmt)}

    doc = one_plan([piece(0, s0, e0), piece(1, nxt, nxt + timedelta(hours=1))])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings,
                         clock=_at(w)).counts == {"submitted": 2}
    key = f"{job}#0"
    name = job_name(job, 0)
    api = _k8s_api(emulator_kubeconfig, catalog.site(site).backend.context)
    res = {"jp-tk-tokyo": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
           "sg-singapore": ("batch.volcano.sh", "v1alpha1", "jobs")}.get(site,
                                                                          ("batch", "v1", "jobs"))

    def obj():
        return api.get_namespaced_custom_object(res[0], res[1], "carbonsched", res[2], name)

    api.patch_namespaced_custom_object(res[0], res[1], "carbonsched", res[2], name, {
        "metadata": {"annotations": {"emulator.carbonsched.io/run-seconds": "3000"}}})
    stop0 = e0 - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)
    assert obj()["metadata"]["annotations"][A_STOP] == stop0.strftime(fmt)
    try:
        shed_at = w + timedelta(minutes=5 if held else 10)
        if not held:
            adapter.clock = _at(w)
            assert release_due(store, catalog, adapters=adapters, clock=_at(w)) == [key]
            _poll(lambda: adapter.status([key])[key].state.value, lambda v: v == "Running",
                  "running")
        ev = announce_event(store, catalog, GridEvent(site=site, start=w, end=e,
                                                      target_fraction=1.0), shed_at)
        adapter.clock = _at(shed_at)
        got = apply_events(store, catalog, adapters, settings, _at(shed_at))
        assert [(k, a, o) for _, k, a, o in got.taken] == [
            (key, "hold" if held else "pause", "done")]
        undo = e + (timedelta(hours=1) if case == "late" else timedelta(seconds=1))
        adapter.clock = _at(undo)
        got = apply_events(store, catalog, adapters, settings, _at(undo))
        assert [(k, a, o) for _, k, a, o in got.taken] == [
            (key, "release" if held else "resume", "done")]
        end_by = {"hold": undo + timedelta(hours=1), "cap": nxt, "late": nxt,
                  "pause": e0 + (undo - shed_at)}[case]
        stop = end_by - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)
        ann = obj()["metadata"]["annotations"]
        assert (ann[A_STOP], ann[A_END]) == (stop.strftime(fmt), end_by.strftime(fmt))
        shown = show_event(store, ev["event_id"], undo)
        (undone,) = [a for a in shown["actions"] if a["action"] in ("release", "resume")]
        assert (f"its planned stop moved from {stop0.strftime(fmt)} to {stop.strftime(fmt)}"
                in undone["detail"]), undone["detail"]
        left = int((stop - undo).total_seconds())
        if case == "late":
            assert left < 0 and RELEASED_PAST_STOP in ann
            row = poll(lambda: refresh_status(store, catalog, adapters=adapters).set_index(
                "key").loc[key], lambda r: r.state in ("Succeeded", "Failed"), "the piece over",
                POLL_S)
            assert (row.state, row.reason) == ("Failed", "DeadlinePassed"), row.detail
            assert row.detail.startswith("piece 1 of 2 never ran after its release or resume")
            assert "its work is still owed" in row.detail
            return
        assert left == {"hold": 3600, "cap": 3599, "pause": 3000}[case] - \
            CHECKPOINT_SIGNAL_LEAD_S
        if site == "sg-singapore":
            from kubernetes import client, config

            core = client.CoreV1Api(config.new_client_from_config(
                str(emulator_kubeconfig), context=catalog.site(site).backend.context))
            pods = core.list_namespaced_pod("carbonsched",
                                            label_selector=f"volcano.sh/job-name={name}").items
            assert [p.spec.active_deadline_seconds for p in pods] == [left]
        elif site == "jp-tk-tokyo":
            kids = api.list_namespaced_custom_object(
                "batch", "v1", "carbonsched", "jobs",
                label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")["items"]
            assert [(k["spec"]["activeDeadlineSeconds"], k["spec"].get("parallelism", 1))
                    for k in kids] == [(left, 1)]
        else:
            sp = obj()["spec"]
            assert (sp["activeDeadlineSeconds"], sp.get("parallelism", 1)) == (left, 1)
        row = refresh_status(store, catalog, adapters=adapters).set_index("key").loc[key]
        assert row.state in ("Dispatched", "Running"), (row.state, row.detail)
    finally:
        for n in (0, 1):
            adapter.cancel(f"{job}#{n}")
