"""Soak test of `carbonsched serve` as it would run unattended: replicas, faults, and a recount.

Two replicas of ``carbonsched serve --no-cron`` (the plan is the soak's own; the replicas run
the leader's lease and the dispatch loops) share one real PostgreSQL; reservation workers send
``POST /v1/placements`` with ``reserve: true`` as fast as the machine answers (closed loop, each
worker falls over to the other replica when one is gone); two ``carbonsched dispatch``
processes dispatch the same plan to the real Slurm clusters at the same time, with secrets
planted in their environment. Part-way through, PostgreSQL is restarted once and the replica
holding leadership is killed (``kill -9``). Afterwards everything is recounted from the
systems of record, not from what the processes said:

- **over-booked site-hours**: the plan's placements and inference plus every reservation the
  database holds, booked hour by hour against each site's GPUs by type and IT power cap
  (:class:`carbonsched.service.placement.PlacementBook`'s ledger, rebuilt from the rows);
- **lost reservations**: acknowledged (``200``, ``reserved: true``) but not in the database,
  or in it at another site or start;
- **duplicate submissions**: Slurm jobs per idempotency key (``squeue --json`` of every
  cluster) above one;
- **secrets in jobs**: the planted values found in any job's environment or script as the Slurm
  controller saved it, or in any Kubernetes Job of the emulator;
- **500 responses** (503 with ``Retry-After`` is the documented answer while the store is down
  and is counted apart);
- **leadership moved**: seconds from the kill until the other replica reports itself leader;
- **signal providers**: meanwhile one site's signals are loaded a day at a time through the
  Electricity Maps client from a loopback server answering 429 and 503 with ``Retry-After``, a
  dripped answer and a normal one in turn: every load returns within its run budget (a fault:
  planned on the cache, marked stale), none raises.

Connections refused are counted apart: after the kill, each worker tries the dead replica
before it falls over to the live one, as a client behind no load balancer would.

Run (on Debian; the soak starts a PostgreSQL of its own, which it restarts
(``scripts/private_postgres.py``), and ``bench/soak.sh`` the Slurm clusters and the Kubernetes
API emulator of ``scripts/services.sh``)::

    bash bench/soak.sh --minutes 10 --out bench/results/soak.json

``bench/soak.sh`` starts the clusters and calls this script; the test suite runs
it for a short period (``tests/service/test_soak.py``). The machine, its load and the command
are recorded with the results.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PLAN_DAY = "2023-07-15"
SECRETS = {"CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": "soak-admin-" + uuid.uuid4().hex,
           "ELECTRICITYMAPS_API_KEY": "soak-emaps-" + uuid.uuid4().hex,
           "SOAK_DATABASE_PASSWORD": "soak-dbpass-" + uuid.uuid4().hex}
"""Values planted in the dispatchers' environment; none may reach a job."""


# --- set-up --------------------------------------------------------------------------------------
def shifted(doc: dict, forecasts: pd.DataFrame, days_ahead: int, prefix: str
            ) -> tuple[dict, pd.DataFrame]:
    """The plan and its forecasts moved by whole days to start ``days_ahead`` days from today.

    Job ids get ``prefix`` (the clusters are shared by every run on the machine).
    """
    doc = json.loads(json.dumps(doc))
    target = pd.Timestamp.now(tz="UTC").normalize() + pd.Timedelta(days=days_ahead)
    shift = target - pd.Timestamp(doc["date"], tz="UTC")

    def move(v: str | None) -> str | None:
        return None if not v else (pd.Timestamp(v) + shift).strftime("%Y-%m-%dT%H:%M:%SZ")

    for p in doc["placements"]:
        p["job_id"] = f"{prefix}-{p['job_id']}"
        for k in ("start", "end", "deadline", "earliest_start"):
            if p.get(k):
                p[k] = move(p[k])
    for i in doc.get("inference", []):
        i["hour"] = move(i["hour"])
    doc["issued_at"] = move(doc.get("issued_at") or f"{doc['date']}T00:00:00Z")
    doc["plan_id"] = uuid.uuid4().hex
    doc["date"] = target.strftime("%Y-%m-%d")
    fc = forecasts.copy()
    for k in ("ts", "issued_at"):
        fc[k] = pd.to_datetime(fc[k], utc=True) + shift
    return doc, fc


def prepare(db_url: str, data_dir: Path, prefix: str) -> dict[str, Any]:
    """Plan the ``global`` catalog's demo day, move it two days ahead, store it; mint tokens."""
    from carbonsched.pipeline.daily import run_daily_plan
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    day = run_daily_plan(PLAN_DAY, "global", data_dir=data_dir, time_limit_s=60)
    doc, fc = shifted(day.document, day.forecasts, 2, prefix)
    store = Store(db_url)
    store.save_plan(doc, fc)
    _, token = ServiceStore(store).create_token("submit", pd.Timestamp.now(tz="UTC"), "soak")
    store.engine.dispose()
    return {"plan": doc, "token": token}


def bodies(plan: dict, catalog: Any, prefix: str, seed: int = 1) -> Iterator[dict]:
    """Reservation requests without end: GPU types and counts the fleet has, windows inside the
    horizon, each with a new job id."""
    rng = random.Random(seed)
    t0 = pd.Timestamp(plan["issued_at"])
    hours = int(plan.get("horizon_hours", 24))
    types = sorted({g for s in catalog.sites for g in s.gpus})
    for i in itertools.count():
        dur = rng.choice([1, 1, 2, 3, 4, 6])
        es = rng.randrange(0, hours - dur)
        dl = min(hours, es + dur + rng.randrange(0, 8))
        yield {"id": f"{prefix}-r{i}", "tenant": "soak", "gpu_type": rng.choice(types),
               "gpus": rng.choice([1, 1, 2, 4, 8]), "duration_hours": dur,
               "power_per_gpu_kw": 0.7,
               "earliest_start": (t0 + pd.Timedelta(hours=es)).isoformat(),
               "deadline": (t0 + pd.Timedelta(hours=dl)).isoformat(),
               "reserve": True}


# --- replicas ------------------------------------------------------------------------------------
@dataclass
class Replica:
    """One ``carbonsched serve`` process."""

    name: str
    port: int
    proc: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None


def start_replica(name: str, work: Path, env: dict[str, str], as_of: str) -> Replica:
    port = free_port()
    log = work / f"serve-{name}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "carbonsched.cli", "serve", "--no-cron", "--port", str(port),
         "--catalog", "global", "--as-of", as_of],
        env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
    return Replica(name, port, proc, log)


def wait_ready(rep: Replica, timeout_s: float = 300.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not rep.alive():
            raise RuntimeError(f"replica {rep.name} exited with {rep.proc.returncode}; see "
                               f"{rep.log}:\n{rep.log.read_text()[-2000:]}")
        try:
            if httpx.get(rep.url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"replica {rep.name} not ready in {timeout_s:.0f} s; see {rep.log}")


LEADER_GAUGE = re.compile(r"^carbonsched_cron_leader(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", re.M)


def is_leader(rep: Replica) -> bool | None:
    """Whether the replica reports itself leader in ``/metrics`` (None: no answer or gauge)."""
    import httpx

    try:
        text = httpx.get(rep.url + "/metrics", timeout=5).text
    except httpx.HTTPError:
        return None
    m = LEADER_GAUGE.search(text)
    return None if m is None else float(m.group(1)) >= 1.0


# --- load ----------------------------------------------------------------------------------------
@dataclass
class Tally:
    """What the reservation workers saw."""

    statuses: Counter = field(default_factory=Counter)
    acknowledged: dict[str, tuple[str, str]] = field(default_factory=dict)
    connection_errors: int = 0
    retry_after_missing: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def reserve_worker(replicas: list[Replica], token: str, queue: Iterator[dict],
                   stop: threading.Event, tally: Tally, k: int) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    clients = [httpx.Client(base_url=r.url, headers=headers, timeout=30) for r in replicas]
    i = k
    while not stop.is_set():
        with tally.lock:
            body = next(queue)
        for attempt in range(len(clients) * 2):
            c = clients[(i + attempt) % len(clients)]
            try:
                r = c.post("/v1/placements", json=body)
            except httpx.HTTPError:
                with tally.lock:
                    tally.connection_errors += 1
                time.sleep(0.05)
                continue
            with tally.lock:
                tally.statuses[r.status_code] += 1
                if r.status_code == 503 and "retry-after" not in r.headers:
                    tally.retry_after_missing += 1
            if r.status_code == 200:
                ans = r.json()
                if ans.get("reserved"):
                    rec = ans["recommended"]
                    with tally.lock:
                        tally.acknowledged[body["id"]] = (rec["site"], rec["start"])
                break
            if r.status_code == 503:
                time.sleep(min(float(r.headers.get("retry-after", "1") or 1), 2.0))
                continue
            break
        i += 1
    for c in clients:
        c.close()


# --- the signal providers ------------------------------------------------------------------------
PROVIDER_FAULTS = ("429", "503", "drip", None)
"""The provider server's answers, in turn: 429 and 503 with ``Retry-After: 1``, an answer
dripped a byte every 0.2 s for 60 s, and a normal answer."""
PROVIDER_DEADLINE_S = 3.0
"""The soak's per-call deadline (``deadline_s``) of the provider client. [s]"""
PROVIDER_RUN_DEADLINE_S = 10.0
"""The soak's budget per provider and planning run (``run_deadline_s``). [s]"""


@dataclass
class ProviderTally:
    """What the provider arm saw: per fault, loads, degraded loads, errors and the longest."""

    loads: Counter = field(default_factory=Counter)
    degraded: Counter = field(default_factory=Counter)
    degraded_past_deadline: Counter = field(default_factory=Counter)
    """Degraded loads that took at least the provider's deadline: on a loaded machine even a
    healthy answer can miss it, and the client then plans on the cache, as designed."""
    errors: list[str] = field(default_factory=list)
    longest_s: float = 0.0


def provider_worker(data_dir: Path, work: Path, stop: threading.Event,
                    tally: ProviderTally) -> None:
    """Load one site's signals through the Electricity Maps client, a day at a time, from a
    loopback server (``tests/adapters/replay_server.py``) whose answer cycles through
    :data:`PROVIDER_FAULTS`. Every load must return (a fault: the site planned on the cache,
    marked stale) within the run budget; an exception is a failure."""
    for p in (ROOT / "tests" / "adapters", ROOT):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    from replay_server import TOKEN, ReplayServer, ReplayState

    from carbonsched.adapters.signals.live import LiveSignals
    from carbonsched.adapters.signals.providers import parse_providers
    from carbonsched.catalog import load_catalog
    from carbonsched.store import Store
    from carbonsched.store.signal_cache import SignalCache

    catalog = load_catalog("global")
    site = catalog.site("gb-london")
    state = ReplayState(data_dir)
    store = Store(f"sqlite:///{work}/provider-cache.db")
    with ReplayServer(state) as server:
        doc = {"providers": {"electricitymaps": {
            "kind": "electricitymaps", "deadline_s": PROVIDER_DEADLINE_S,
            "run_deadline_s": PROVIDER_RUN_DEADLINE_S}},
            "sites": {site.id: {"carbon_intensity": "electricitymaps"}}}
        cfg = parse_providers(doc).with_base_url(server.url)
        day0 = pd.Timestamp("2023-02-01", tz="UTC")
        k = 0
        while not stop.is_set():
            fault = PROVIDER_FAULTS[k % len(PROVIDER_FAULTS)]
            if fault is None:
                state.faults.clear()
            else:
                state.faults["electricitymaps"] = fault
            day = day0 + pd.Timedelta(days=k)
            now = day + pd.Timedelta(minutes=10)
            src = LiveSignals(cfg, SignalCache(store), clock=lambda t=now: t,
                              env={"ELECTRICITYMAPS_TOKEN": TOKEN})
            t = time.monotonic()
            try:
                _, meta = src.load_site_signals(site, None, day - pd.Timedelta(days=1), day)
            except Exception as exc:  # noqa: BLE001  counted: every load must return
                tally.errors.append(f"{fault}: {type(exc).__name__}: {exc}"[:300])
            else:
                tally.loads[str(fault)] += 1
                tally.degraded[str(fault)] += bool(meta["degraded"])
                tally.degraded_past_deadline[str(fault)] += bool(
                    meta["degraded"] and time.monotonic() - t >= PROVIDER_DEADLINE_S)
            tally.longest_s = max(tally.longest_s, time.monotonic() - t)
            k += 1
        state.stop.set()
    store.engine.dispose()


# --- recount -------------------------------------------------------------------------------------
def overbooked_site_hours(db_url: str, plan_id: str) -> tuple[int, list[dict], int]:
    """(site-hours over a cap, their first rows, reservations held) from the database's rows."""
    import numpy as np

    from carbonsched.catalog import load_catalog
    from carbonsched.service.placement import PlacementBook
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    store = Store(db_url)
    rows = [r for r in ServiceStore(store).jobs(plan_id=plan_id) if r["reserved"]]
    book = PlacementBook(load_catalog("global"), store.get_plan(plan_id),
                         store.forecasts(plan_id))
    book.set_reservations(rows)
    over = (book.free_gpus < 0).any(axis=2) | (book.free_kw < -1e-6)
    where = [{"site": book.sites[s].id, "hour": book.slot_iso[t],
              "free_gpus": book.free_gpus[s, t].tolist(), "free_kw": float(book.free_kw[s, t])}
             for s, t in np.argwhere(over)[:10]]
    store.engine.dispose()
    return int(over.sum()), where, len(rows)


def lost_reservations(db_url: str, acknowledged: dict[str, tuple[str, str]]) -> list[str]:
    """Acknowledged reservations the database lacks, or holds at another site or start."""
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    store = Store(db_url)
    db = ServiceStore(store)
    lost = []
    for job_id, (site, start) in acknowledged.items():
        row = db.get_job(job_id)
        if (row is None or not row["reserved"] or row["site"] != site
                or pd.Timestamp(row["start"]) != pd.Timestamp(start)):
            lost.append(job_id)
    store.engine.dispose()
    return lost


def slurm_duplicates(conf_dir: Path, prefix: str) -> tuple[int, int]:
    """(keys submitted more than once, jobs of this run) over every cluster's ``squeue``."""
    from carbonsched.adapters.dispatch.slurm import parse_squeue_json

    keys: Counter = Counter()
    for conf in sorted(conf_dir.glob("*/slurm.conf")):
        out = subprocess.run(["squeue", "--json", "--states=all"],
                             env={**os.environ, "SLURM_CONF": str(conf)},
                             capture_output=True, text=True, check=True)
        for j in parse_squeue_json(json.loads(out.stdout)):
            name = j.get("name") or ""
            if prefix in name or prefix in (j.get("comment") or ""):
                keys[j.get("comment") or name] += 1
    return sum(1 for n in keys.values() if n > 1), sum(keys.values())


def secrets_in_jobs(conf_dir: Path) -> tuple[int, int]:
    """(saved job files holding a planted secret, saved job files read) over every cluster.

    The controller keeps each job's environment and script under its state directory
    (``<cluster>/state/hash.N/job.ID/{environment,script}``) until the job is purged; that is
    what a job would run with.
    """
    planted = [v.encode() for v in SECRETS.values()]
    found = read = 0
    for f in sorted(conf_dir.glob("*/state/hash.*/job.*/*")):
        if f.name not in ("environment", "script"):
            continue
        try:
            data = f.read_bytes()
        except OSError:          # purged while read
            continue
        read += 1
        found += any(s in data for s in planted)
    return found, read


def secrets_in_kubernetes_jobs(kubeconfig: str | None) -> tuple[int, int]:
    """(Kubernetes Jobs holding a planted secret, Jobs read) in the namespace of every context of
    ``kubeconfig`` (default ``carbonsched``, the catalogs' namespace; ``(0, 0)`` without one)."""
    if not kubeconfig:
        return 0, 0
    from kubernetes import client, config

    found = read = 0
    contexts, _ = config.list_kube_config_contexts(kubeconfig)
    for ctx in contexts:
        api = client.BatchV1Api(config.new_client_from_config(kubeconfig,
                                                              context=ctx["name"]))
        namespace = ctx.get("context", {}).get("namespace") or "carbonsched"
        for job in api.list_namespaced_job(namespace).items:
            text = json.dumps(api.api_client.sanitize_for_serialization(job))
            read += 1
            found += any(v in text for v in SECRETS.values())
    return found, read


# --- the run -------------------------------------------------------------------------------------
def run_soak(minutes: float, workers: int, slurm_conf_dir: Path, data_dir: Path, work: Path,
             say=print) -> dict[str, Any]:
    """Run the soak for ``minutes`` and recount; see the module docstring. Returns the results."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from scripts.private_postgres import PrivatePostgres

    pg = PrivatePostgres()
    try:
        return _soak(minutes, workers, pg, slurm_conf_dir, data_dir, work, say)
    finally:
        pg.remove()


def _soak(minutes: float, workers: int, pg: Any, slurm_conf_dir: Path,
          data_dir: Path, work: Path, say) -> dict[str, Any]:
    from carbonsched.catalog import load_catalog

    db_url = pg.url

    prefix = "soak" + uuid.uuid4().hex[:6]
    t_setup = time.perf_counter()
    setup = prepare(db_url, data_dir, prefix)
    plan = setup["plan"]
    say(f"set-up: plan {plan['plan_id'][:12]} with {len(plan['placements'])} placements "
        f"stored in {time.perf_counter() - t_setup:.0f} s")
    as_of = (pd.Timestamp(plan["issued_at"]) - pd.Timedelta(hours=1)).isoformat()
    env = {**os.environ, "CARBONSCHED_DATABASE_URL": db_url,
           "CARBONSCHED_SLURM_CONF_DIR": str(slurm_conf_dir),
           "CARBONSCHED_LEASE_S": os.environ.get("CARBONSCHED_LEASE_S", "45"),
           "CARBONSCHED_DISPATCH_LOOPS": "true",
           **SECRETS}
    replicas = [start_replica(n, work, env, as_of) for n in ("a", "b")]
    results: dict[str, Any] = {"minutes": minutes, "workers": workers, "plan_id": plan["plan_id"],
                               "placements": len(plan["placements"])}
    dispatchers: list[subprocess.Popen] = []
    try:
        for r in replicas:
            wait_ready(r)
        queue = bodies(plan, load_catalog("global"), prefix)
        tally = Tally()
        stop = threading.Event()
        threads = [threading.Thread(target=reserve_worker,
                                    args=(replicas, setup["token"], queue, stop, tally, k),
                                    daemon=True) for k in range(workers)]
        t0 = time.monotonic()
        ptally = ProviderTally()
        threads.append(threading.Thread(target=provider_worker,
                                         args=(data_dir, work, stop, ptally), daemon=True))
        for t in threads:
            t.start()
        duration = minutes * 60.0
        events: list[dict] = []

        def at(frac: float) -> None:
            wait = t0 + frac * duration - time.monotonic()
            if wait > 0:
                time.sleep(wait)

        at(0.1)
        for k in range(2):
            dispatchers.append(subprocess.Popen(
                [sys.executable, "-m", "carbonsched.cli", "dispatch", "--plan", plan["plan_id"],
                 "--json"], env=env, stdout=open(work / f"dispatch-{k}.json", "w"),  # noqa: SIM115
                stderr=open(work / f"dispatch-{k}.err", "w")))  # noqa: SIM115
        events.append({"t_s": round(time.monotonic() - t0, 1), "event": "two dispatchers"})
        at(0.33)
        pg.restart()
        events.append({"t_s": round(time.monotonic() - t0, 1), "event": "PostgreSQL restarted"})
        say("PostgreSQL restarted")
        at(0.6)
        leader = next((r for r in replicas if is_leader(r)), replicas[0])
        other = next(r for r in replicas if r is not leader)
        leader.proc.send_signal(signal.SIGKILL)
        t_kill = time.monotonic()
        events.append({"t_s": round(t_kill - t0, 1), "event": f"replica {leader.name} killed"})
        say(f"replica {leader.name} killed")
        moved = None
        while time.monotonic() < max(t0 + duration, t_kill + 90):
            if moved is None and is_leader(other):
                moved = round(time.monotonic() - t_kill, 1)
            if moved is not None and time.monotonic() >= t0 + duration:
                break
            time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(60)
        for d in dispatchers:
            d.wait(600)
        load_s = time.monotonic() - t0
        over, where, held = overbooked_site_hours(db_url, plan["plan_id"])
        lost = lost_reservations(db_url, tally.acknowledged)
        dup_keys, slurm_jobs = slurm_duplicates(slurm_conf_dir, prefix)
        leaked, job_files = secrets_in_jobs(slurm_conf_dir)
        k8s_leaked, k8s_jobs = secrets_in_kubernetes_jobs(os.environ.get(
            "CARBONSCHED_KUBECONFIG"))
        requests = sum(tally.statuses.values())
        results |= {
            "requests": requests, "requests_per_s": round(requests / load_s, 1),
            "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
            "responses_500": sum(v for k, v in tally.statuses.items() if k >= 500 and k != 503),
            "responses_503_without_retry_after": tally.retry_after_missing,
            "connection_refused": tally.connection_errors,
            "acknowledged_reservations": len(tally.acknowledged),
            "reservations_held": held, "lost_reservations": len(lost),
            "lost_examples": lost[:10], "overbooked_site_hours": over,
            "overbooked_examples": where, "slurm_jobs": slurm_jobs,
            "duplicate_submissions": dup_keys, "secrets_in_jobs": leaked + k8s_leaked,
            "saved_job_files_read": job_files, "kubernetes_jobs_read": k8s_jobs,
            "dispatch_exit_codes": [d.returncode for d in dispatchers],
            "leadership_moved_s": moved, "events": events,
            "provider_loads": dict(ptally.loads), "provider_degraded": dict(ptally.degraded),
            "provider_degraded_past_deadline": dict(ptally.degraded_past_deadline),
            "provider_errors": len(ptally.errors), "provider_error_examples": ptally.errors[:5],
            "provider_longest_load_s": round(ptally.longest_s, 1),
            "provider_run_deadline_s": PROVIDER_RUN_DEADLINE_S}
    finally:
        for r in replicas:
            if r.alive():
                r.proc.terminate()
                try:
                    r.proc.wait(30)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
        for d in dispatchers:
            if d.poll() is None:
                d.kill()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=8, help="Reservation workers (threads).")
    ap.add_argument("--slurm-conf-dir", default=os.environ.get("CARBONSCHED_SLURM_CONF_DIR"))
    ap.add_argument("--data-dir", default=os.environ.get(
        "CARBONSCHED_SHARED_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if not args.slurm_conf_dir:
        sys.exit("soak: --slurm-conf-dir not given and CARBONSCHED_SLURM_CONF_DIR not set; run "
                 "it through bench/soak.sh, which starts the Slurm clusters")
    work = Path(tempfile.mkdtemp(prefix="carbonsched-soak-"))
    res = run_soak(args.minutes, args.workers, Path(args.slurm_conf_dir), Path(args.data_dir),
                   work,
                   say=lambda m: print(m, file=sys.stderr))
    res["command"] = " ".join(["python", "bench/soak.py", *sys.argv[1:]])
    res["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                      "platform": platform.platform(), "loadavg_at_end": os.getloadavg(),
                      "date_utc": pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%dT%H:%MZ")}
    res["work_dir"] = str(work)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
