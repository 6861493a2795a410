"""Reads that must not grow with history: their time and peak memory over stores of N old rows.

Four reads, each over a SQLite store holding ``N`` old, ended rows next to a little live work:

- ``refresh``: one pass of the service's status-refresh loop (what
  :meth:`carbonsched.service.loops.ServiceLoops._refresh` calls: ``refresh_backends``, or on
  older code ``refresh_status``, which read the whole outbox back) over an outbox of ``N``
  ended intents and 50 running ones, every site's backend a stub that reports them running;
- ``rolling_load``: what a rolling run loads of its state
  (:meth:`carbonsched.store.rolling_state.RollingStore.load` as
  :func:`carbonsched.service.rolling.rolling_step` calls it, with 100 new job ids) over ``N``
  jobs committed or ended long before the run, 20 pending and 20 still running;
- ``report_read``: the outbox a one-day report reads (the day's 1,000 intents among ``N``);
- ``cancel_lookup``: ``carbonsched cancel JOB``'s lookup of the job's plan without
  ``--catalog``.

Each measurement runs in a process of its own, its modules imported and the store opened
before the clock starts (its peak RSS is the read's over the process's baseline then, also
given). The stores are built once per ``N`` in ``--dir`` by the code measured (its migrations
and indexes). Run::

    python bench/store_growth.py --rows 10000 100000 --dir /tmp/store_growth \\
        --out bench/results/store_growth.json

To compare with another checkout, put its package first on the path and give it a ``--dir`` of
its own (its stores get its schema), e.g. from this checkout::

    git worktree add /tmp/wt-old <base commit>
    PYTHONPATH=/tmp/wt-old python bench/store_growth.py --rows 10000 100000 \\
        --dir /tmp/store_growth_old --out /tmp/store_growth_old.json

``--check`` prints which code was loaded (its file), so a mix-up shows.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

KINDS = ("refresh", "rolling_load", "report_read", "cancel_lookup")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PER_DAY = 1000
"""Outbox intents per day: a report of one day reads this many of them."""
LIVE = 50
RUN_AT = datetime(2026, 6, 1, tzinfo=UTC)
"""The rolling run's issue time: every old job ended before it."""


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- the stores -------------------------------------------------------------------------------
def _insert(store: Any, model: Any, rows: Iterator[dict[str, Any]]) -> None:
    """Insert ``rows`` into ``model``'s table in batches of 20,000, then let the store go."""
    from itertools import islice

    with store.engine.begin() as c:
        while batch := list(islice(rows, 20000)):
            c.execute(insert(model), batch)
    store.engine.dispose()


def build_outbox(path: Path, n: int) -> None:
    """``n`` ended intents (``PER_DAY`` a day from ``T0``) and ``LIVE`` running ones."""
    from carbonsched.catalog import load_catalog
    from carbonsched.store import Store
    from carbonsched.store.models import DispatchRow

    sites = [s.id for s in load_catalog("global").sites]
    st = Store(f"sqlite:///{path}")
    request = json.dumps({
        "plan_id": "p" * 64, "job_id": "job-000000", "piece": 0, "site": sites[0],
        "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T04:00:00Z",
        "deadline": "2026-01-02T00:00:00Z", "gpu_type": "H100", "gpus": 8, "pieces": 1,
        "checkpoint_overhead_s": 0, "nodes": 1, "max_domains": None,
        "payload": {"command": "python train.py --config configs/big.yaml --epochs 3",
                    "image": "registry.example/train:1.2.3", "env": {"A": "1", "B": "2"}},
        "placeholder": False, "mig_profile": None, "gpu_milli": None, "shares_per_gpu": 1})

    def row(i: int, state: str, start: datetime, end: datetime | None) -> dict[str, Any]:
        return dict(key=f"job-{i}#0", job_id=f"job-{i}", piece=0, plan_id=f"plan{i // 2500:06d}",
                    site=sites[i % len(sites)], backend="slurm:c1", state=state,
                    reason="Completed" if end else "Started", detail="",
                    backend_id=str(100000 + i), request_json=request, planned_start=start,
                    planned_end=start + timedelta(hours=4), attempts=1, created_at=start,
                    updated_at=start, submitted_at=start, actual_start=start, actual_end=end,
                    times_source="sacct", duplicates="")

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(n + LIVE):
            start = T0 + timedelta(days=i // PER_DAY, minutes=(i % PER_DAY))
            yield (row(i, "Running", start, None) if i >= n
                   else row(i, "Succeeded", start, start + timedelta(hours=4)))

    _insert(st, DispatchRow, rows())


def build_rolling(path: Path, n: int) -> None:
    """``n`` jobs committed (9 in 10) or ended long before ``RUN_AT``; 20 pending, 20 running."""
    from carbonsched.catalog import load_catalog
    from carbonsched.store import Store
    from carbonsched.store.rolling_models import RollingJobRow
    from carbonsched.store.rolling_state import job_spec
    from carbonsched.workload.files import demo_workload

    st = Store(f"sqlite:///{path}")
    cat = load_catalog("global")
    jobs = demo_workload(cat, "2026-03-01").jobs
    specs = [job_spec(j) for j in jobs]
    t = datetime(2026, 3, 1, tzinfo=UTC)

    def row(jid: str, i: int, state: str, start: datetime) -> dict[str, Any]:
        j, spec = jobs[i % len(jobs)], dict(specs[i % len(specs)], id=jid)
        end = start + timedelta(hours=2)
        piece = {"job_id": jid, "site": j.allowed_sites[0] if j.allowed_sites else "x",
                 "start": start.isoformat(), "end": end.isoformat(), "gpu_type": j.gpu_type,
                 "gpus": j.gpus, "energy_kwh": 1.0, "emissions_kg": 1.0}
        placed = state == "Dispatched"
        return dict(job_id=jid, spec_json=json.dumps(spec), state=state,
                    reason="Placed" if placed else ("NotCommitted" if state == "Pending"
                                                    else "DeadlinePassed"),
                    detail="", site=piece["site"] if placed else None, gpu_type=j.gpu_type,
                    gpus=j.gpus, start=start if placed else None, end=end if placed else None,
                    energy_kwh=1.0 if placed else None, emissions_kg=1.0 if placed else None,
                    pieces_json=json.dumps([piece]) if placed else None, plan_id="p",
                    issued_at=min(start, RUN_AT - timedelta(days=1)), updated_at=start)

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(n + 40):
            if i < n:
                yield row(f"j{i}", i, "Failed" if i % 10 == 9 else "Dispatched",
                          t + timedelta(minutes=i % 10000))
            elif i < n + 20:
                yield row(f"pend-{i}", i, "Pending", RUN_AT)
            else:
                yield row(f"run-{i}", i, "Dispatched", RUN_AT - timedelta(hours=1))

    _insert(st, RollingJobRow, rows())


# --- one measurement ----------------------------------------------------------------------------
class _Stub:
    """Every site's backend: reports each key it is asked about as running."""

    name = "slurm:c1"

    def status(self, keys=None):
        from carbonsched.adapters.dispatch.base import BackendJob
        from carbonsched.domain import JobState, ReasonCode

        return {k: BackendJob(key=k, backend_id="c1:1", state=JobState.RUNNING,
                              reason=ReasonCode.STARTED, raw_state="RUNNING",
                              actual_start=T0) for k in keys or []}


def measure(kind: str, db: Path, n: int) -> dict[str, Any]:
    """Run ``kind`` once over ``db``; its seconds, rows returned and peak RSS."""
    import pandas as pd

    import carbonsched.dispatch.outbox as outbox
    from carbonsched.catalog import load_catalog
    from carbonsched.store import Store
    from carbonsched.store.rolling_state import RollingStore

    try:       # imported before the clock starts, as a service has them
        from carbonsched.report.build import _outbox_of
    except ImportError:
        _outbox_of = None

    st = Store(f"sqlite:///{db}")
    cat = load_catalog("global")
    base = _rss_mb()
    t = time.perf_counter()
    if kind == "refresh":
        stub = _Stub()
        adapters = {s.id: stub for s in cat.sites}
        refresh = getattr(outbox, "refresh_backends", None) or outbox.refresh_status
        got = refresh(st, cat, adapters=adapters)
        rows = got if isinstance(got, int) else len(got)
    elif kind == "rolling_load":
        rs = RollingStore(st)
        new = [f"new-{i}" for i in range(100)]
        state = (rs.load(pd.Timestamp(RUN_AT), job_ids=new)
                 if "as_of" in inspect.signature(rs.load).parameters else rs.load())
        rows = len(state.jobs)
    elif kind == "report_read":
        day = n // PER_DAY - 1                     # the last day of ended intents
        t0 = pd.Timestamp(T0 + timedelta(days=day))
        jobs = [f"job-{i}" for i in range(day * PER_DAY, (day + 1) * PER_DAY)]
        if _outbox_of is None:
            df = outbox.dispatch_records(st)       # before: the whole outbox
        else:
            df = _outbox_of(st, pd.DataFrame({"kind": "batch", "job_id": jobs}), t0,
                            t0 + pd.Timedelta(days=1))
        rows = len(df)
    elif kind == "cancel_lookup":
        job = f"job-{n // 2}"
        if "job_ids" in inspect.signature(outbox.dispatch_records).parameters:
            mine = outbox.dispatch_records(st, job_ids=[job])
        else:
            df = outbox.dispatch_records(st)
            mine = df[df["job_id"] == job]
        rows = len(mine)
    else:
        raise SystemExit(f"unknown read {kind!r}; one of {', '.join(KINDS)}")
    return {"read": kind, "rows": n, "seconds": round(time.perf_counter() - t, 3),
            "rows_returned": int(rows), "baseline_rss_mb": round(base, 1),
            "peak_rss_mb": round(_rss_mb(), 1)}


def _commit(code: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10000, 100000])
    ap.add_argument("--reads", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/store_growth"),
                    help="where the stores are built (once per N; one per checkout)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--check", action="store_true", help="print the code loaded and stop")
    ap.add_argument("--measure", nargs=3, metavar=("READ", "DB", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        kind, db, n = a.measure
        print(json.dumps(measure(kind, Path(db), int(n))))
        return
    import carbonsched

    code = Path(carbonsched.__file__).resolve().parent.parent
    if a.check:
        print(carbonsched.__file__)
        return
    a.dir.mkdir(parents=True, exist_ok=True)
    results = []
    for n in a.rows:
        stores = {"outbox": a.dir / f"outbox_{n}.db", "rolling": a.dir / f"rolling_{n}.db"}
        for name, build in (("outbox", build_outbox), ("rolling", build_rolling)):
            if not stores[name].exists():
                t = time.perf_counter()
                build(stores[name], n)
                print(f"built {stores[name]} in {time.perf_counter() - t:.1f} s",
                      file=sys.stderr)
        for kind in a.reads:
            db = stores["rolling" if kind == "rolling_load" else "outbox"]
            out = subprocess.run([sys.executable, __file__, "--measure", kind, str(db), str(n)],
                                 capture_output=True, text=True, env=os.environ.copy())
            if out.returncode:
                raise SystemExit(out.stderr)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(r)
            print(f"{n:>7} rows  {kind:<14} {r['seconds']:8.3f} s  returned "
                  f"{r['rows_returned']:>7}  peak RSS {r['peak_rss_mb']:7.1f} MB "
                  f"(baseline {r['baseline_rss_mb']:.1f})")
    doc = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, "
                      f"Python {platform.python_version()}",
           "date": datetime.now(UTC).strftime("%Y-%m-%d"), "code": str(code),
           "commit": _commit(code), "results": results}
    if a.out:
        a.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
