"""A fault in one adapter holds back only its own units, as an unreachable backend does.

Only Kubernetes manifest errors were per-unit: any other exception an adapter raised (a custom
adapter's bug, a tool printing what it never printed before) left ``dispatch_plan`` with a
traceback, so no other unit of the pass was recorded and every later pass stopped at the same
place. Now such an exception is reported as the backend being unable to answer
(``unavailable``, the detail naming the adapter, the call and the exception; the traceback to
the log): the unit stays pending (a submission that may have been made is looked up by key
before another), the other units and backends go on, and the next pass tries again. A stored
request that no longer reads back is refused alone (``Failed/InvalidSpec``), nothing sent.

The backends are the project's Kubernetes emulator (scripts/test starts it) with one method of
the real adapter broken by a subclass.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import CANCELLED, cancel_job, dispatch_plan, refresh_status
from carbonsched.errors import BackendError, BackendUnavailableError
from carbonsched.store.models import DispatchRow

from .helpers import one_plan

START = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0, second=0)


class _FailsOn(KubernetesAdapter):
    """The real adapter, whose ``submit`` raises for job ids in ``boom``."""

    boom: set[str] = set()

    def submit(self, req):
        if req.job_id in self.boom:
            raise RuntimeError("unexpected line from the API: 'x'")
        return super().submit(req)


class _SubmitFails(KubernetesAdapter):
    """The real adapter, whose ``submit`` fails with a backend's own error (not a fault)."""

    def submit(self, req):
        raise BackendError("kubectl said: etcdserver: request timed out")


class _StatusBroken(KubernetesAdapter):
    """The real adapter, whose ``status`` raises (a fault before any submission)."""

    def status(self, keys=None):
        raise KeyError("metadata")


class _CancelBroken(KubernetesAdapter):
    """The real adapter, whose ``cancel`` raises (a fault after the unit was looked up)."""

    def cancel(self, key):
        raise RuntimeError("unexpected answer to DELETE: 'x'")


def _plan(prefix: str, sites: dict[str, list[str]]) -> dict:
    return one_plan([{"job_id": f"{prefix}-{name}", "site": site, "start": START,
                      "end": START + timedelta(hours=1), "gpu_type": "A100", "gpus": 2,
                      "payload": {"command": "sleep 1"}}
                     for site, names in sites.items() for name in names])


def _settings(kubeconfig) -> Settings:
    return Settings(kubeconfig=kubeconfig, dispatch_backoff_s=0.01, dispatch_max_attempts=1)


def test_an_adapter_raising_in_submit_holds_back_that_unit_only(store, emulator_kubeconfig):
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(prefix, {"us-ny-newyork": ["ok", "boom", "ok2"]})
    store.save_plan(doc)
    a = _FailsOn("us-east-ny", "carbonsched", kubeconfig=str(emulator_kubeconfig))
    a.boom = {f"{prefix}-boom"}
    try:
        s = dispatch_plan(store, doc["plan_id"], settings=_settings(emulator_kubeconfig),
                          adapters={"us-ny-newyork": a}, placeholder=False)
        assert s.counts == {"submitted": 2, "unavailable": 1}
        (o,) = [o for o in s.outcomes if o.action == "unavailable"]
        assert (o.job_id, o.state, o.reason) == (f"{prefix}-boom", "Pending",
                                                 "BackendUnavailable")
        assert o.detail == (
            f"kubernetes:us-east-ny/carbonsched: submit of {prefix}-boom#0 raised RuntimeError: "
            "unexpected line from the API: 'x' (a fault in the adapter, not the backend's "
            "answer; the traceback is in the log); tried again in the next pass")
        # the fault mended: the next pass looks the unit up by key, then submits it
        a.boom = set()
        again = dispatch_plan(store, doc["plan_id"], settings=_settings(emulator_kubeconfig),
                              adapters={"us-ny-newyork": a}, placeholder=False)
        assert again.counts == {"recorded": 2, "submitted": 1}
        assert {f"{prefix}-{n}#0" for n in ("ok", "boom", "ok2")} <= set(a.status())
    finally:
        for n in ("ok", "boom", "ok2"):
            a.cancel(f"{prefix}-{n}#0")


def test_one_adapter_raising_before_any_submission_holds_back_only_its_backend(
        store, emulator_kubeconfig):
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(prefix, {"us-ny-newyork": ["ny"], "us-pjm-ashburn": ["va"]})
    store.save_plan(doc)
    kc = str(emulator_kubeconfig)
    ny = KubernetesAdapter("us-east-ny", "carbonsched", kubeconfig=kc)
    va = _StatusBroken("us-east-va", "carbonsched", kubeconfig=kc)
    try:
        s = dispatch_plan(store, doc["plan_id"], settings=_settings(emulator_kubeconfig),
                          adapters={"us-ny-newyork": ny, "us-pjm-ashburn": va},
                          placeholder=False)
        by_job = {o.job_id: o for o in s.outcomes}
        assert by_job[f"{prefix}-ny"].action == "submitted"
        broken = by_job[f"{prefix}-va"]
        said = ("kubernetes:us-east-va/carbonsched: status raised KeyError: 'metadata' (a "
                "fault in the adapter, not the backend's answer; the traceback is in the log); "
                "tried again in the next pass")
        assert (broken.action, broken.state, broken.reason, broken.detail) == (
            "unavailable", "Pending", "BackendUnavailable", said)
        with Session(store.engine) as s:   # the row says so too, and counts the attempt
            row = s.scalars(select(DispatchRow).where(
                DispatchRow.key == f"{prefix}-va#0")).one()
            assert (row.state, row.reason, row.detail, row.attempts) == (
                "Pending", "BackendUnavailable", said, 1)
        # the status refresh of a dispatched unit whose backend's adapter raises: the unit is
        # kept as it was, its detail says why, and the refresh returns
        ny_broken = _StatusBroken("us-east-ny", "carbonsched", kubeconfig=kc)
        refreshed = refresh_status(store, "global", adapters={"us-ny-newyork": ny_broken})
        ny_row = refreshed[refreshed["key"] == f"{prefix}-ny#0"].iloc[0]
        assert ny_row["state"] == "Dispatched"
        assert ny_row["detail"] == ("BackendUnavailable: kubernetes:us-east-ny/carbonsched: "
                                    "status raised KeyError: 'metadata' (a fault in the "
                                    "adapter, not the backend's answer; the traceback is in "
                                    "the log); tried again in the next pass")
    finally:
        ny.cancel(f"{prefix}-ny#0")


def test_a_stored_request_that_no_longer_reads_back_is_refused_alone(store,
                                                                      emulator_kubeconfig):
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(prefix, {"us-ny-newyork": ["ok", "old"]})
    store.save_plan(doc)
    a = _FailsOn("us-east-ny", "carbonsched", kubeconfig=str(emulator_kubeconfig))
    a.boom = {f"{prefix}-old"}            # keeps the first pass from submitting it
    settings = _settings(emulator_kubeconfig)
    try:
        dispatch_plan(store, doc["plan_id"], settings=settings, adapters={"us-ny-newyork": a},
                      placeholder=False)
        with Session(store.engine) as s:   # a field this version's schema does not know
            row = s.scalars(select(DispatchRow).where(
                DispatchRow.key == f"{prefix}-old#0")).one()
            d = json.loads(row.request_json)
            d["payload"]["gpu_share"] = 0.5
            row.request_json = json.dumps(d)
            s.commit()
        a.boom = set()
        again = dispatch_plan(store, doc["plan_id"], settings=settings,
                              adapters={"us-ny-newyork": a}, placeholder=False)
        assert again.counts == {"recorded": 1, "rejected": 1}
        (o,) = [o for o in again.outcomes if o.action == "rejected"]
        assert (o.job_id, o.state, o.reason) == (f"{prefix}-old", "Failed", "InvalidSpec")
        assert o.detail.startswith("its stored request no longer reads back (WorkloadError: "
                                   "unknown payload field(s) gpu_share; known: template")
        assert o.detail.endswith("it is not on kubernetes:us-east-ny/carbonsched and cannot "
                                 "be submitted; submit the job again as the schema asks, under "
                                 "a new id (this unit is final)")
        assert f"{prefix}-old#0" not in a.status()
    finally:
        a.cancel(f"{prefix}-ok#0")


def test_a_backends_own_error_in_submit_stops_the_run_loudly_and_loses_nothing(
        store, emulator_kubeconfig):
    """A backend's own error that is not an outage is the operator's to fix: it stops the run
    (``dispatch`` exits 2, tests/dispatch/test_dispatch_cli.py), as before adapter faults were
    held per unit; the unit stays in the outbox, pending, for the run after the fix."""
    import pytest

    prefix = uuid.uuid4().hex[:8]
    doc = _plan(prefix, {"us-ny-newyork": ["x"]})
    store.save_plan(doc)
    a = _SubmitFails("us-east-ny", "carbonsched", kubeconfig=str(emulator_kubeconfig))
    with pytest.raises(BackendError, match="kubectl said: etcdserver: request timed out"):
        dispatch_plan(store, doc["plan_id"], settings=_settings(emulator_kubeconfig),
                      adapters={"us-ny-newyork": a}, placeholder=False)
    with Session(store.engine) as s:
        (row,) = s.scalars(select(DispatchRow).where(DispatchRow.job_id == f"{prefix}-x"))
        assert row.state == "Pending"


def test_a_later_plan_of_a_refused_unit_says_it_is_final_and_how_to_run_the_job(store):
    """A platform team fixes a refused job and plans it again under the same id: the unit is
    not submitted again (its key stays the refused unit's), and the outcome says why and what
    to do; before, it read 'dispatched from plan ...; not submitted again' like a running one."""
    first, again = _plan("fix", {"us-ny-newyork": ["me"]}), _plan("fix", {"us-ny-newyork": ["me"]})
    for doc in (first, again):
        store.save_plan(doc)
    with Session(store.engine) as s:
        s.add(DispatchRow(key="fix-me#0", job_id="fix-me", piece=0, plan_id=first["plan_id"],
                          site="us-ny-newyork", backend="kubernetes:us-east-ny/carbonsched",
                          state="Failed", reason="Rejected", detail="partition 'gpu' unknown",
                          request_json="{}", planned_start=START,
                          planned_end=START + timedelta(hours=1), attempts=1,
                          created_at=START, updated_at=START, duplicates=""))
        s.commit()
    never_called = KubernetesAdapter("no-such-context", "carbonsched")
    s = dispatch_plan(store, again["plan_id"], adapters={"us-ny-newyork": never_called},
                      settings=Settings(dispatch_backoff_s=0.01), placeholder=False)
    (o,) = s.outcomes
    assert (o.action, o.reason) == ("already_dispatched", "AlreadyDispatched")
    assert o.detail == (f"dispatched from plan {first['plan_id']} and refused there (Rejected: "
                        "partition 'gpu' unknown); a refused unit is final under its id: give "
                        "the job a new id to run it")


def test_an_adapter_raising_in_a_cancel_leaves_the_unit_as_it_was_and_says_why(
        store, emulator_kubeconfig):
    """Before, an adapter's unexpected exception in ``status`` or ``cancel`` left
    ``carbonsched cancel`` (and the API's cancel) with a traceback. Now it is the backend
    unable to answer (exit 3): the unit is recorded as it was, its claim released, and the
    message names the adapter, the call and the exception; the cancel after the fix cancels."""
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(prefix, {"us-ny-newyork": ["c"]})
    store.save_plan(doc)
    key, kube = f"{prefix}-c#0", str(emulator_kubeconfig)
    good = KubernetesAdapter("us-east-ny", "carbonsched", kubeconfig=kube)
    s = dispatch_plan(store, doc["plan_id"], settings=_settings(emulator_kubeconfig),
                      adapters={"us-ny-newyork": good}, placeholder=False)
    assert s.counts == {"submitted": 1}

    def row() -> tuple[str, str, str | None]:
        with Session(store.engine) as ses:
            r = ses.scalars(select(DispatchRow).where(DispatchRow.key == key)).one()
            return r.state, r.reason, r.lease_owner

    before = row()
    assert before[2] is None
    try:
        for broken, call, raised in (
                (_StatusBroken, f"status of {key}", "KeyError: 'metadata'"),
                (_CancelBroken, f"cancel of {key}",
                 "RuntimeError: unexpected answer to DELETE: 'x'")):
            a = broken("us-east-ny", "carbonsched", kubeconfig=kube)
            with pytest.raises(BackendUnavailableError) as e:
                cancel_job(store, "global", f"{prefix}-c", adapters={"us-ny-newyork": a},
                           settings=_settings(emulator_kubeconfig))
            assert f"kubernetes:us-east-ny/carbonsched: {call} raised {raised}" in str(e.value)
            assert str(e.value).startswith(f"{key} of job {prefix}-c: ")
            assert row() == before, broken   # recorded as it was, its claim released
        assert key in good.status([key])      # still on the backend
        (o,) = cancel_job(store, "global", f"{prefix}-c", adapters={"us-ny-newyork": good},
                          settings=_settings(emulator_kubeconfig))
        assert (o.outcome, row()[:2]) == (CANCELLED, ("Cancelled", "Cancelled"))
    finally:
        good.cancel(key)


class _Unreachable(KubernetesAdapter):
    """The real adapter, whose backend cannot be asked (an outage)."""

    def status(self, keys=None):
        raise BackendUnavailableError("kubernetes:us-east-ny/carbonsched: connection refused")


def test_a_stored_request_that_no_longer_reads_back_waits_out_an_outage_like_any_unit(
        store, emulator_kubeconfig):
    """A pass whose backend is unreachable checks each waiting unit's deadline; that check
    parsed the stored request again, so one that no longer reads back ended the whole pass
    with its parse error. Now it waits like the others (``unavailable``) and is refused alone
    (``InvalidSpec``) once the backend answers."""
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(prefix, {"us-ny-newyork": ["ok", "old"]})
    store.save_plan(doc)
    settings = _settings(emulator_kubeconfig)
    kube = str(emulator_kubeconfig)
    down = _Unreachable("us-east-ny", "carbonsched", kubeconfig=kube)
    first = dispatch_plan(store, doc["plan_id"], settings=settings,
                          adapters={"us-ny-newyork": down}, placeholder=False)
    assert first.counts == {"unavailable": 2}
    with Session(store.engine) as s:   # a field this version's schema does not know
        row = s.scalars(select(DispatchRow).where(DispatchRow.key == f"{prefix}-old#0")).one()
        d = json.loads(row.request_json)
        d["payload"]["gpu_share"] = 0.5
        row.request_json = json.dumps(d)
        s.commit()
    again = dispatch_plan(store, doc["plan_id"], settings=settings,
                          adapters={"us-ny-newyork": down}, placeholder=False)
    assert again.counts == {"unavailable": 2}
    assert {(o.job_id, o.state, o.reason) for o in again.outcomes} == {
        (f"{prefix}-ok", "Pending", "BackendUnavailable"),
        (f"{prefix}-old", "Pending", "BackendUnavailable")}
    # each waits on the outage, not on a fault of the pass
    assert [o.detail for o in again.outcomes] == [
        "kubernetes:us-east-ny/carbonsched: connection refused"] * 2
    up = KubernetesAdapter("us-east-ny", "carbonsched", kubeconfig=kube)
    try:
        last = dispatch_plan(store, doc["plan_id"], settings=settings,
                             adapters={"us-ny-newyork": up}, placeholder=False)
        assert last.counts == {"submitted": 1, "rejected": 1}
        (o,) = [o for o in last.outcomes if o.action == "rejected"]
        assert (o.job_id, o.state, o.reason) == (f"{prefix}-old", "Failed", "InvalidSpec")
    finally:
        up.cancel(f"{prefix}-ok#0")
