"""Dispatch claims before it acts: leases on outbox rows (PostgreSQL and SQLite), concurrent
dispatcher processes of one plan against the real Slurm clusters and the Kubernetes emulator, and
a dispatcher killed (SIGKILL) while holding claims."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.slurm import parse_comment
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.lease import (
    Claimant,
    check_lease_covers,
    holder_is_dead,
    owner_identity,
)
from carbonsched.dispatch.outbox import dispatch_plan
from carbonsched.errors import InputError
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

from .helpers import future_plan, squeue_jobs

CLUSTERS = ("ontario", "saopaulo", "britain")
SITES = {s.id: s for s in load_catalog("global").sites}
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _intents(store: Store, keys: list[str], site: str = "ca-on-toronto") -> dict[str, int]:
    """Pending intents with these keys (``<job>#<piece>``); returns key -> row id."""
    now = datetime.now(UTC)
    with Session(store.engine) as s:
        for k in keys:
            job, piece = k.rsplit("#", 1)
            s.add(DispatchRow(key=k, job_id=job, piece=int(piece), plan_id="p", site=site,
                              backend="slurm:x", state="Pending", reason="AwaitingSubmit",
                              detail="", request_json="{}", planned_start=now,
                              planned_end=now + timedelta(hours=1), attempts=0, created_at=now,
                              updated_at=now, duplicates=""))
        s.commit()
        return {r.key: r.id for r in s.scalars(select(DispatchRow))}


def _until(pred, what: str, deadline_s: float = 60.0):  # noqa: ANN001, ANN202
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {deadline_s:g} s")


# -- the lease itself ---------------------------------------------------------------------------

def test_a_claimed_row_is_taken_by_no_one_else_until_its_lease_lapses(any_store):
    ids = _intents(any_store, ["a#0", "b#0", "c#0"])
    a = Claimant(any_store, 3.0, is_dead=lambda _: False)
    b = Claimant(any_store, 3.0, is_dead=lambda _: False)
    got_a = a.claim(["ca-on-toronto"])
    assert sorted(got_a.ids) == sorted(ids.values()) and not got_a.taken_over
    assert b.claim(["ca-on-toronto"]).ids == []
    held = b.held_elsewhere(list(ids))
    assert {h.key for h in held} == set(ids) and {h.owner for h in held} == {a.owner}
    assert a.begin_side_effect(ids["a#0"])  # still ours: may submit
    # a stalls (no heartbeat): once its leases lapse, b takes every row over. a#0's lease was
    # renewed by its side effect, so it lapses after the others: b claims until it holds all.
    taken: set[int] = set()

    def _b_holds_all() -> bool:
        taken.update(b.claim(["ca-on-toronto"]).ids)
        return taken == set(ids.values())

    _until(_b_holds_all, "the takeover of every row")
    with Session(any_store.engine) as s:
        owners = {r.key: r.lease_owner for r in s.scalars(select(DispatchRow))}
    assert set(owners.values()) == {b.owner}
    # the stalled claimant finds out before its next side effect, and never makes it
    assert a.begin_side_effect(ids["b#0"]) is False
    assert a.renew_all() == 0
    assert b.begin_side_effect(ids["b#0"]) is True
    with Session(any_store.engine) as s:
        stamped = s.get(DispatchRow, ids["b#0"]).submit_attempted_at
    assert stamped is not None
    # released rows are free again, and not a takeover
    assert b.release() == 3
    again = a.claim(["ca-on-toronto"])
    assert sorted(again.ids) == sorted(ids.values()) and not again.taken_over


def test_the_takeover_reports_which_rows_had_another_holder(any_store):
    ids = _intents(any_store, ["a#0", "b#0"])
    a = Claimant(any_store, 2.0, is_dead=lambda _: False)
    a.claim(["ca-on-toronto"], keys=["a#0"])
    b = Claimant(any_store, 60.0, is_dead=lambda _: False)
    first = b.claim(["ca-on-toronto"])
    assert first.ids == [ids["b#0"]] and not first.taken_over
    later = _until(lambda: b.claim(["ca-on-toronto"]).taken_over, "a's lease to lapse")
    assert later == {ids["a#0"]}


def test_of_many_concurrent_claimants_each_row_goes_to_exactly_one(any_store):
    keys = [f"j{i:03d}#0" for i in range(120)]
    ids = _intents(any_store, keys)
    claimants = [Claimant(any_store, 120.0) for _ in range(8)]
    barrier = threading.Barrier(len(claimants))
    got: dict[str, list[int]] = {}

    def run(c: Claimant) -> None:
        barrier.wait()
        got[c.owner] = c.claim(["ca-on-toronto"]).ids

    threads = [threading.Thread(target=run, args=(c,)) for c in claimants]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    taken = [i for v in got.values() for i in v]
    assert len(got) == 8 and sorted(taken) == sorted(ids.values())  # all taken, none twice
    with Session(any_store.engine) as s:
        owner = {r.id: r.lease_owner for r in s.scalars(select(DispatchRow))}
    for o, mine in got.items():
        assert all(owner[i] == o for i in mine)


def test_a_later_piece_is_claimed_only_with_its_earlier_pieces(any_store):
    ids = _intents(any_store, ["j#0", "j#1", "j#2", "k#0"])
    a = Claimant(any_store, 120.0)
    assert a.claim(["ca-on-toronto"], keys=["j#0"]).ids == [ids["j#0"]]
    b = Claimant(any_store, 120.0)
    # j#1 and j#2 would be submitted before the piece they resume: not taken
    assert b.claim(["ca-on-toronto"]).ids == [ids["k#0"]]
    a.release()
    assert sorted(b.claim(["ca-on-toronto"]).ids) == sorted(ids.values())


def test_a_dead_holder_on_this_host_is_taken_over_at_once_and_others_wait(any_store):
    ids = _intents(any_store, ["a#0", "b#0", "c#0"])
    dead = subprocess.run([sys.executable, "-c", "from carbonsched.dispatch.lease import "
                           "owner_identity; print(owner_identity())"], capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout.strip()
    alive = owner_identity()
    elsewhere = "otherhost/0123abcd/4026531836/4242/777/deadbeef"
    far = datetime.now(UTC) + timedelta(hours=1)
    with Session(any_store.engine) as s:
        for key, owner in (("a#0", dead), ("b#0", alive), ("c#0", elsewhere)):
            s.execute(update(DispatchRow).where(DispatchRow.key == key).values(
                lease_owner=owner, lease_expires_at=far))
        s.commit()
    assert holder_is_dead(dead) and not holder_is_dead(alive)
    assert not holder_is_dead(elsewhere)  # another host: only its lease's expiry counts
    assert not holder_is_dead("not an owner id")
    got = Claimant(any_store, 120.0).claim(["ca-on-toronto"])
    assert got.ids == [ids["a#0"]] and got.taken_over == {ids["a#0"]}


def test_the_lease_must_cover_twice_a_backend_call():
    Settings(dispatch_lease_s=60, dispatch_backend_timeout_s=30)  # just at the limit
    with pytest.raises(ValidationError, match=r"dispatch_lease_s \(59.9 s\) must be at least "
                       r"twice dispatch_backend_timeout_s \(30 s\)"):
        Settings(dispatch_lease_s=59.9, dispatch_backend_timeout_s=30)
    check_lease_covers(20.0, 10.0, "a call to slurm:ontario")
    with pytest.raises(InputError, match="shorter than twice the timeout of a call to "
                       "slurm:ontario"):
        check_lease_covers(19.0, 10.0, "a call to slurm:ontario")
    with pytest.raises(InputError, match="must be > 0 s"):
        Claimant(Store("sqlite:///:memory:"), 0.0)


def test_dispatch_refuses_adapters_whose_calls_outlive_the_lease(store, global_plan_doc):
    from carbonsched.adapters.dispatch.slurm import SlurmAdapter

    doc = future_plan(global_plan_doc)
    doc["placements"] = [p for p in doc["placements"] if p["site"] == "ca-on-toronto"]
    store.save_plan(doc)
    slow = {"ca-on-toronto": SlurmAdapter("ontario", timeout_s=61)}
    with pytest.raises(InputError, match=r"lease \(120 s, CARBONSCHED_DISPATCH_LEASE_S\) is "
                       r"shorter than twice the timeout of a call to slurm:ontario \(61 s\)"):
        dispatch_plan(store, doc["plan_id"], adapters=slow, settings=Settings())
    with Session(store.engine) as s:
        assert s.scalars(select(DispatchRow)).all() == []  # refused before anything is written


# -- concurrent dispatcher processes on the real backends ---------------------------------------

def _backend_keys(slurm_dir: Path, kubeconfig: Path, prefix: str) -> Counter:
    """How many backend jobs carry each key starting with ``prefix`` (Slurm and Kubernetes)."""
    from kubernetes import client, config

    keys: Counter = Counter()
    for c in CLUSTERS:
        for j in squeue_jobs(slurm_dir / c / "slurm.conf"):
            ours = parse_comment(j["comment"])
            if ours and ours[0].startswith(prefix):
                keys[ours[0]] += 1
    seen: set[tuple[str, str]] = set()
    for site in SITES.values():
        be = site.backend
        if be.kind != "kubernetes" or (be.context, be.namespace) in seen:
            continue
        seen.add((be.context, be.namespace))
        api = client.BatchV1Api(config.new_client_from_config(str(kubeconfig),
                                                              context=be.context))
        for job in api.list_namespaced_job(be.namespace).items:
            key = (job.metadata.annotations or {}).get("carbonsched.io/key", "")
            if key.startswith(prefix):
                keys[key] += 1
    return keys


def _spawn(specs: list[dict], tmp_path: Path) -> list[subprocess.Popen]:
    """Start one dispatcher process per spec, all released together once every one is ready."""
    go = tmp_path / "go"
    procs = []
    for i, spec in enumerate(specs):
        spec = {**spec, "go": str(go), "ready": str(tmp_path / f"ready-{i}"),
                "out": str(tmp_path / f"out-{i}.json")}
        specs[i] = spec
        procs.append(subprocess.Popen([sys.executable, str(HERE / "run_dispatcher.py"),
                                       json.dumps(spec)], cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    _until(lambda: all(Path(s["ready"]).exists() or p.poll() is not None
                       for s, p in zip(specs, procs, strict=True)), "every dispatcher ready",
           600)
    go.write_text("go")
    return procs


@pytest.mark.slurm
@pytest.mark.parametrize(("n", "db"), [(2, "postgres"), (3, "postgres"), (10, "postgres"),
                                       (3, "sqlite")])
def test_concurrent_dispatchers_of_one_plan_submit_each_unit_exactly_once(
        n, db, global_plan_doc, slurm_dir, emulator_kubeconfig, tmp_path, request):
    url = (request.getfixturevalue("pg_db") if db == "postgres"
           else f"sqlite:///{tmp_path / 'store.db'}")
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    store = Store(url)
    store.save_plan(doc)
    keys = {f"{p['job_id']}#0" for p in doc["placements"]}
    settings = {"slurm_conf_dir": str(slurm_dir), "kubeconfig": str(emulator_kubeconfig),
                "dispatch_wait_s": 600}
    specs = [{"url": url, "plan_id": doc["plan_id"], "settings": settings} for _ in range(n)]
    procs = _spawn(specs, tmp_path)
    errs = [p.communicate(timeout=900)[1] for p in procs]
    on_backend = _backend_keys(slurm_dir, emulator_kubeconfig, prefix)
    assert on_backend == Counter({k: 1 for k in keys})  # every unit exactly once
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 0, err[-3000:]
    summaries = [json.loads(Path(s["out"]).read_text()) for s in specs]
    submitted = Counter(o["key"] for s in summaries for o in s["outcomes"]
                        if o["action"] == "submitted")
    assert submitted == Counter({k: 1 for k in keys})  # and by exactly one dispatcher
    for s in summaries:
        assert s["complete"], s["counts"]
        assert {o["key"] for o in s["outcomes"]} == keys  # each run accounts for every unit
        assert set(s["counts"]) <= {"submitted", "recorded"}, s["counts"]
    with Session(store.engine) as s:
        rows = list(s.scalars(select(DispatchRow)))
    assert len(rows) == len(keys)
    assert {(r.state, r.lease_owner) for r in rows} == {("Dispatched", None)}
    store.engine.dispose()


@pytest.mark.slurm
def test_a_dispatcher_killed_holding_claims_is_finished_by_another_after_they_lapse(
        global_plan_doc, pg_db, slurm_dir, emulator_kubeconfig, tmp_path):
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    store = Store(pg_db)
    store.save_plan(doc)
    keys = {f"{p['job_id']}#0" for p in doc["placements"]}
    lease = {"slurm_conf_dir": str(slurm_dir), "kubeconfig": str(emulator_kubeconfig),
             "dispatch_lease_s": 20, "dispatch_backend_timeout_s": 10, "dispatch_workers": 1}
    spec = {"url": pg_db, "plan_id": doc["plan_id"], "settings": lease, "kill_after": 3}
    (proc,) = _spawn([spec], tmp_path)
    proc.communicate(timeout=600)
    assert proc.returncode == -9  # SIGKILL, holding its claims
    with Session(store.engine) as s:
        rows = {r.key: r for r in s.scalars(select(DispatchRow))}
    owners = {r.lease_owner for r in rows.values()}
    assert len(owners) == 1 and None not in owners  # every unit claimed by the dead run
    lapse = max(r.lease_expires_at for r in rows.values())
    orphans = {k for k in _backend_keys(slurm_dir, emulator_kubeconfig, prefix)
               if rows[k].backend_id is None}
    assert orphans  # submitted, never recorded

    # another dispatcher (as on another host: it cannot see that the holder died) waits for
    # the claims to lapse, then takes the rows over and looks each up before submitting
    t0 = datetime.now(UTC)
    after = dispatch_plan(store, doc["plan_id"], settings=Settings(**lease, dispatch_wait_s=300),
                          claimant=Claimant(store, 20.0, is_dead=lambda _: False))
    assert after.complete, after.counts
    assert t0 < lapse  # it really had to wait
    reconciled = {o.key for o in after.outcomes if o.action == "reconciled"}
    assert reconciled == orphans
    assert all("taken over from a dispatcher whose claim lapsed" in o.detail
               for o in after.outcomes if o.action == "reconciled")
    assert after.counts["submitted"] == len(keys) - len(orphans)
    assert _backend_keys(slurm_dir, emulator_kubeconfig, prefix) == Counter(
        {k: 1 for k in keys})
    # nothing was submitted before the dead run's claims lapsed (the cluster's submit times)
    by_key = {}
    for c in CLUSTERS:
        for j in squeue_jobs(slurm_dir / c / "slurm.conf"):
            ours = parse_comment(j["comment"])
            if ours and ours[0].startswith(prefix):
                by_key[ours[0]] = j
    new = {o.key for o in after.outcomes if o.action == "submitted"} & set(by_key)
    assert new and all(by_key[k]["submit"] >= lapse.replace(microsecond=0) for k in new)
    with Session(store.engine) as s:
        final = list(s.scalars(select(DispatchRow)))
    assert {(r.state, r.lease_owner) for r in final} == {("Dispatched", None)}
    store.engine.dispose()
