"""The service runs its own loops: a real `carbonsched serve` process on the real PostgreSQL with
the Kubernetes API emulator reconciles the outbox at start-up, releases a held Job at its planned
start, records what the backend reports, and shows it all in /metrics. No test code calls
reconcile, release_due or refresh_status.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pandas as pd
import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.kubernetes import job_name
from carbonsched.adapters.dispatch.registry import default_registry
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import backend_config, dispatch_plan
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from tests.dispatch.conftest import emulator_kubeconfig, global_plan_doc  # noqa: F401 (fixtures)
from tests.dispatch.helpers import future_plan
from tests.service.test_service_cron import metric

pytestmark = pytest.mark.shared_data

HELD_S = 60
"""The due Job's planned start, this long after the test dispatched it (the service starts
meanwhile). [s]"""


def _kubeconfig(src, dest, *, server_port: int | None = None, drop: str | None = None):
    """A copy of the emulator's kubeconfig: every server on another port, or one context gone."""
    kc = yaml.safe_load(src.read_text())
    if server_port is not None:
        for c in kc["clusters"]:
            c["cluster"]["server"] = c["cluster"]["server"].replace(
                f":{c['cluster']['server'].split(':')[2].split('/')[0]}/", f":{server_port}/")
    if drop is not None:
        kc["contexts"] = [c for c in kc["contexts"] if c["name"] != drop]
    dest.write_text(yaml.safe_dump(kc))
    return dest


def _read_job(kubeconfig, site, key_job: str) -> dict | None:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = client.BatchV1Api(config.new_client_from_config(config_file=str(kubeconfig),
                                                          context=site.backend.context))
    try:
        return api.read_namespaced_job(job_name(key_job, 0), site.backend.namespace).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _rows(url: str) -> dict[str, DispatchRow]:
    store = Store(url)
    try:
        with Session(store.engine, expire_on_commit=False) as s:
            return {r.job_id: r for r in s.scalars(select(DispatchRow))}
    finally:
        store.engine.dispose()


def test_serve_reconciles_releases_and_refreshes_by_itself(
        pg_db, tmp_path, start_server, global_plan_doc, emulator_kubeconfig):  # noqa: F811
    catalog = load_catalog("global")
    kube = [s for s in catalog.sites if s.backend.kind == "kubernetes"]
    due_site, later_site, stuck_site = kube[0], kube[1], kube[2]
    doc = future_plan(global_plan_doc, days_ahead=1)
    now = datetime.now(UTC).replace(microsecond=0)
    starts = {"due": (due_site, now + timedelta(seconds=HELD_S)),
              "later": (later_site, now + timedelta(days=1)),
              "stuck": (stuck_site, now + timedelta(days=1))}
    template = doc["placements"][0]
    placements = []
    for name, (site, start) in starts.items():
        p = dict(template, job_id=f"{doc['placements'][0]['job_id']}-{name}", site=site.id,
                 piece=0, pieces=1)
        p["start"] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
        p["end"] = (start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        p["deadline"] = (start + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        placements.append(p)
    doc["placements"], doc["unplaced"] = placements, []
    ids = {name: p["job_id"] for name, p in zip(starts, placements, strict=True)}
    store = Store(pg_db)
    store.save_plan(doc)
    # the dispatcher wrote its intents, then found every API server down: all three pending
    dead = _kubeconfig(emulator_kubeconfig, tmp_path / "dead.yaml", server_port=1)
    cfg = backend_config(Settings(kubeconfig=dead))
    adapters = {s.id: default_registry().build_for_sites([s], cfg)[s.id] for s in kube[:3]}
    summary = dispatch_plan(store, doc["plan_id"], catalog, adapters=adapters,
                            settings=Settings(kubeconfig=dead, dispatch_backoff_s=0),
                            max_attempts=1, sleep=lambda s: None)
    assert summary.counts == {"unavailable": 3}
    store.engine.dispose()
    # the service: the stuck site's context is missing from its kubeconfig; no Slurm config
    svc_kc = _kubeconfig(emulator_kubeconfig, tmp_path / "svc.yaml",
                         drop=stuck_site.backend.context)
    t_start = time.time()
    srv = start_server(pg_db, "--catalog", "global", "--no-cron", env={
        "CARBONSCHED_KUBECONFIG": str(svc_kc), "CARBONSCHED_DISPATCH_LOOPS": "true",
        "CARBONSCHED_SLURM_CONF_DIR": str(tmp_path / "no-slurm"),
        "CARBONSCHED_RELEASE_INTERVAL_S": "1", "CARBONSCHED_STATUS_REFRESH_S": "1",
        "CARBONSCHED_RECONCILE_INTERVAL_S": "600", "CARBONSCHED_LEASE_S": "3"})

    # 1. start-up reconcile: the reachable intents are submitted (held), the stuck one waits
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = _rows(pg_db)
        if all(rows[ids[n]].backend_id for n in ("due", "later")):
            break
        time.sleep(0.3)
    rows = _rows(pg_db)
    assert rows[ids["later"]].state == "Dispatched", srv.logs()[-3000:]
    assert rows[ids["stuck"]].state == "Pending" and rows[ids["stuck"]].backend_id is None
    assert rows[ids["stuck"]].reason == "BackendUnavailable"
    created = pd.Timestamp(_read_job(emulator_kubeconfig, due_site, ids["due"])["metadata"][
        "creation_timestamp"])
    due_start = starts["due"][1]
    assert created < due_start            # submitted held, before its planned start

    # 2. release at the planned start, by the service's release loop
    deadline = time.monotonic() + HELD_S + 180
    job = None
    while time.monotonic() < deadline:
        job = _read_job(emulator_kubeconfig, due_site, ids["due"])
        if not job["spec"]["suspend"]:
            break
        time.sleep(0.3)
    assert job is not None and job["spec"]["suspend"] is False, srv.logs()[-3000:]
    seen_released = datetime.now(UTC)
    assert seen_released >= due_start
    later = _read_job(emulator_kubeconfig, later_site, ids["later"])
    assert later["spec"]["suspend"] is True          # its start has not come
    # 3. the refresh loop records what the emulator reports: the released Job ran and ended
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        row = _rows(pg_db)[ids["due"]]
        if row.state == "Succeeded":
            break
        time.sleep(0.3)
    assert (row.state, row.times_source) == ("Succeeded", "job-status"), (row.state,
                                                                        srv.logs()[-3000:])
    assert due_start <= row.actual_start <= row.actual_end

    # 4. /metrics with real values
    time.sleep(2)   # a lease pass after the last loop pass reads the backlog again
    text = httpx.get(srv.url + "/metrics", timeout=10).text
    assert metric(srv.url, "carbonsched_outbox_backlog") == 1.0        # the stuck intent
    age = metric(srv.url, "carbonsched_outbox_oldest_pending_age_seconds")
    observed = metric(srv.url, "carbonsched_outbox_observed_timestamp_seconds")
    stuck_created = _rows(pg_db)[ids["stuck"]].created_at.timestamp()
    assert age > 0 and abs(stuck_created + age - observed) < 2.0, (age, observed, stuck_created)
    last_ok = metric(srv.url, "carbonsched_reconcile_last_success_timestamp_seconds")
    assert t_start < last_ok <= time.time()
    assert metric(srv.url, "carbonsched_released_total") == 1.0
    assert metric(srv.url, "carbonsched_dispatch_loop_sites_unavailable") == 3.0   # Slurm
    assert metric(srv.url, "carbonsched_cron_leader") == 1.0
    for loop in ("reconcile", "release", "refresh"):
        assert metric(srv.url, "carbonsched_dispatch_loop_runs_total", loop=loop,
                      outcome="ok") >= 1, text
    assert "Traceback" not in srv.logs()
    print(f"released {(seen_released - due_start).total_seconds():.1f} s after the planned "
          f"start (release loop every 1 s)")
