"""Load benchmark of `carbonsched serve`: placement queries at fixed request rates.

A 16-site catalog and a 10,000-job plan (both built from the real traces and 2023 grid data by
``carbonsched.plan.instances.make_instance``; the plan is the planner's carbon-aware greedy
heuristic, a feasible fleet-scale plan in seconds) are written to a private SQLite store; the
service runs as its own process (``carbonsched serve --no-cron``, uvicorn on loopback); a
separate load process sends ``POST /v1/placements`` open-loop at each rate for the duration and
records each request's latency from its *scheduled* send time (so a stalled server cannot hide
queueing: no coordinated omission). Results: p50/p90/p99/max latency [ms], achieved throughput
[req/s], errors.

    python bench/service_load.py --rates 50,200,500 --duration 30 \\
        --out bench/results/service_load.json

``--duration 5`` is a smoke run. The machine and its load are recorded with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


# --- set-up --------------------------------------------------------------------------------------
def _toml_str(s: str) -> str:
    return json.dumps(s)


def write_catalog(problem, path: Path, surplus_max: dict[str, float]) -> str:
    """A catalog TOML with the instance's sites; areas are the sites' zones."""
    from carbonsched.plan.instances import ZONES

    zones = [s.zone for s in problem.sites]
    lines = ['name = "bench-16"',
             'description = "Load benchmark: 16 Electricity Maps zones, 2023 (bench/)"',
             'signal_quality = "measured"', ""]
    for z in zones:
        lat, lon, _ = ZONES[z]
        lines += [f"[areas.{_toml_str(z)}]", f"name = {_toml_str(z)}", f"latitude = {lat}",
                  f"longitude = {lon}", 'timezone = "UTC"', ""]
    for s in problem.sites:
        lines += ["[[sites]]", f"id = {_toml_str(s.id)}", f"name = {_toml_str(s.name)}",
                  f'role = "{s.role}"', f"zone = {_toml_str(s.zone)}",
                  'signal_source = "electricitymaps"', f"latitude = {s.latitude}",
                  f"longitude = {s.longitude}", 'timezone = "UTC"',
                  f"it_power_cap_kw = {s.it_power_cap_kw}",
                  f"green_surplus_max_kw = {surplus_max[s.id]}", ""]
        for t, pool in s.gpus.items():
            lines += [f"[sites.gpus.{_toml_str(t)}]", f"count = {pool.count}",
                      f"board_power_w = {pool.board_power_w}", ""]
        lines += ["[sites.pue]"] + [f"{k} = {v}" for k, v in vars(s.pue).items()] + [""]
        lines += ["[sites.latency_ms]"] + [f"{_toml_str(a)} = {v}"
                                           for a, v in s.latency_ms.items()] + [""]
        lines += ["[sites.backend]", 'kind = "slurm"', f'cluster = "{s.backend.cluster}"', ""]
    path.write_text("\n".join(lines))
    return str(path)


def prepare(work: Path, jobs: int, sites: int, hours: int, data_dir: str | None) -> dict:
    """Build the instance, its greedy plan, the catalog and the store; mint a token."""
    from carbonsched.catalog import load_catalog
    from carbonsched.domain import jsonable
    from carbonsched.pipeline.daily import result_rows
    from carbonsched.plan import greedy_plan, score_plan
    from carbonsched.plan.instances import make_instance
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    t0 = time.perf_counter()
    problem = make_instance(jobs, sites, hours, load=0.3, seed=0, data_dir=data_dir)
    result = greedy_plan(problem)
    plan_s = time.perf_counter() - t0
    sig = problem.signals.reset_index()
    surplus_max = {s: max(float(g["green_surplus_kw"].max()), 1e-6)
                   for s, g in sig.groupby("site")}
    cat_path = write_catalog(problem, work / "bench-16.toml", surplus_max)
    load_catalog(cat_path)
    issued = problem.slots[0]
    score = score_plan(problem, result)
    doc = {"plan_id": uuid.uuid4().hex, "date": issued.strftime("%Y-%m-%d"),
           "catalog": "bench-16", "signal_quality": "measured",
           "site_signal_quality": {s.id: "measured" for s in problem.sites},
           "issued_at": jsonable(issued), "horizon_hours": hours,
           "sites": [s.id for s in problem.sites],
           "solver": {"name": "greedy", "status": str(result.status), "mip_gap": None,
                      "seconds": plan_s, "objective": None, "bound": None},
           **result_rows(result),
           "totals": {"energy_kwh": float(score.energy_kwh),
                      "emissions_kg": float(score.emissions_kg),
                      "baseline_emissions_kg": float(score.emissions_kg),
                      "surplus_absorbed_kwh": float(score.surplus_absorbed_kwh)},
           "notes": ["load benchmark plan: greedy heuristic on the 2023 history as forecast"]}
    doc = jsonable(doc)
    rows = []
    for name, col in (("carbon_intensity_g_per_kwh", "carbon_intensity_g_per_kwh"),
                      ("pue", "pue"), ("green_surplus_index", "green_surplus_kw")):
        v = sig[col].to_numpy(float)
        if name == "green_surplus_index":
            v = v / sig["site"].map(surplus_max).to_numpy(float)
        rows.append(pd.DataFrame({"site": sig["site"], "signal": name,
                                  "model": "bench: 2023 history", "issued_at": issued,
                                  "ts": sig["slot"], "mean": v, "lo_80": v, "hi_80": v,
                                  "lo_95": v, "hi_95": v}))
    db_url = f"sqlite:///{work / 'bench.sqlite'}"
    store = Store(db_url)
    store.save_plan(doc, pd.concat(rows, ignore_index=True))
    _, token = ServiceStore(store).create_token("read", pd.Timestamp.now(tz="UTC"), "bench")
    store.engine.dispose()
    gpu_mix = [(j.gpu_type, j.gpus, j.duration_hours) for j in problem.jobs]
    return {"db_url": db_url, "catalog": cat_path, "token": token, "issued": issued,
            "hours": hours, "placed": len(doc["placements"]), "jobs": jobs,
            "sites": sites, "mix": gpu_mix, "plan_seconds": plan_s}


def bodies(setup: dict, n: int = 2000, seed: int = 1) -> list[dict]:
    """Placement queries drawn from the instance's job mix, windows inside the horizon."""
    rng = random.Random(seed)
    t0 = pd.Timestamp(setup["issued"])
    out = []
    for i in range(n):
        gtype, gpus, dur = rng.choice(setup["mix"])
        es = rng.randrange(0, setup["hours"] - dur)
        dl = min(setup["hours"], es + dur + rng.randrange(2, 25))
        out.append({"id": f"q{i}", "tenant": "bench", "gpu_type": gtype, "gpus": gpus,
                    "duration_hours": dur, "power_per_gpu_kw": 0.4,
                    "earliest_start": (t0 + pd.Timedelta(hours=es)).isoformat(),
                    "deadline": (t0 + pd.Timedelta(hours=dl)).isoformat()})
    return out


# --- the load process ----------
def _load(url: str, token: str, rate: float, duration: float, body_file: str,
          connections: int = 64, dump: str | None = None) -> dict:
    """Open-loop load: request i is due at ``start + i / rate``.

    One asyncio event loop (uvloop when installed) with an aiohttp session of up to
    ``connections`` keep-alive connections, opened before the clock starts. Each request is
    issued at its due time whatever the earlier ones are doing (a request that finds every
    connection busy waits for one, and that wait counts), and its latency runs from the due
    time, not from when it was sent: no coordinated omission. The generator's own cyclic
    garbage collector is off during the run (its pauses would be charged to the server), and
    its CPU time and how late it issued requests (``send_lag``) are reported, so its share of
    a small machine is visible.
    """
    import asyncio
    import gc

    import aiohttp

    payloads = [json.dumps(b).encode() for b in json.loads(Path(body_file).read_text())]
    n = int(rate * duration)
    lat = np.full(n, np.nan)
    lag = np.full(n, np.nan)
    status = np.zeros(n, dtype=int)
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}

    async def run() -> tuple[float, float]:
        conn = aiohttp.TCPConnector(limit=connections)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(url, headers=headers, connector=conn,
                                         timeout=timeout) as session:

            async def warm() -> None:
                async with session.get("/healthz") as r:
                    await r.read()

            await asyncio.gather(*(warm() for _ in range(connections)))

            async def one(i: int, due: float) -> None:
                try:
                    async with session.post("/v1/placements",
                                            data=payloads[i % len(payloads)]) as r:
                        await r.read()
                        status[i] = r.status
                except (TimeoutError, aiohttp.ClientError):
                    status[i] = -1
                lat[i] = time.perf_counter() - due

            gc.collect()
            gc.disable()
            cpu0 = time.process_time()
            # perf_counter, not loop.time(): uvloop's clock has a 1 ms resolution
            start = time.perf_counter() + 0.2
            tasks = []
            for i in range(n):
                due = start + i / rate
                wait = due - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                lag[i] = time.perf_counter() - due
                tasks.append(asyncio.ensure_future(one(i, due)))
            await asyncio.gather(*tasks)
            wall = time.perf_counter() - start
            cpu = time.process_time() - cpu0
            gc.enable()
            return wall, cpu

    try:
        import uvloop

        wall, cpu = uvloop.run(run())
    except ImportError:
        wall, cpu = asyncio.run(run())
    if dump:  # per-request due offset, send lag and latency, for a timeline [s]
        np.savez(dump, due=np.arange(n) / rate, lag=lag, lat=lat, status=status)
    ok = status == 200
    ms = lat[ok] * 1000

    def pct(a: np.ndarray, q: float) -> float | None:
        return round(float(np.percentile(a, q)), 2) if len(a) else None

    return {"rate_target": rate, "duration_s": duration, "requests": n,
            "ok": int(ok.sum()), "errors": int((~ok).sum()),
            "statuses": dict(zip(*(a.tolist() for a in np.unique(status, return_counts=True)),
                                 strict=True)),
            "throughput_rps": round(float(ok.sum() / wall), 1),
            "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90), "p99_ms": pct(ms, 99),
            "max_ms": round(float(ms.max()), 2) if len(ms) else None,
            "send_lag_p99_ms": pct(lag * 1000, 99),
            "client_cpu_ms_per_request": round(cpu / n * 1000, 3)}


def load_main(args: argparse.Namespace) -> None:
    res = _load(args.url, args.token, args.rate, args.duration, args.bodies, dump=args.dump)
    print(json.dumps(res))


# --- driver ----------
def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux ``/proc``), or ``None``. [s]"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _runqueue_wait_s(pid: int) -> float | None:
    """Time the process's threads spent runnable but waiting for a CPU (Linux schedstat). [s]

    A shared machine shows up here: latency the server did not cause.
    """
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((t / "schedstat").read_text().split()[1]) for t in tasks) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _wait(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("serve not ready")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    lp = sub.add_parser("load", help="(internal) the load-generating process")
    lp.add_argument("--url", required=True)
    lp.add_argument("--token", required=True)
    lp.add_argument("--rate", type=float, required=True)
    lp.add_argument("--duration", type=float, required=True)
    lp.add_argument("--bodies", required=True)
    lp.add_argument("--dump", default=None, help="Write per-request timings (.npz).")
    ap.add_argument("--rates", default="50,200,500")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--hours", type=int, default=48)
    ap.add_argument("--port", type=int, default=57480)
    ap.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.cmd == "load":
        return load_main(args)
    work = Path(tempfile.mkdtemp(prefix="carbonsched-bench-"))
    t0 = time.perf_counter()
    setup = prepare(work, args.jobs, args.sites, args.hours, args.data_dir)
    print(f"set-up: {setup['jobs']} jobs ({setup['placed']} placed by greedy in "
          f"{setup['plan_seconds']:.1f} s), {setup['sites']} sites, {setup['hours']} h in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    body_file = work / "bodies.json"
    body_file.write_text(json.dumps(bodies(setup)))
    url = f"http://127.0.0.1:{args.port}"
    as_of = (pd.Timestamp(setup["issued"]) - pd.Timedelta(hours=1)).isoformat()
    env = {**os.environ, "CARBONSCHED_DATABASE_URL": setup["db_url"]}
    log = open(work / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "carbonsched.cli.app", "serve", "--no-cron",
                             "--port", str(args.port), "--catalog", setup["catalog"],
                             "--as-of", as_of], env=env, stdout=log, stderr=subprocess.STDOUT)
    results = []
    try:
        _wait(url, proc)
        # warm-up (not measured)
        subprocess.run([sys.executable, __file__, "load", "--url", url, "--token",
                        setup["token"], "--rate", "50", "--duration", "2", "--bodies",
                        str(body_file)], check=True, capture_output=True)
        for rate in [float(r) for r in args.rates.split(",")]:
            load_before = os.getloadavg()
            cpu_before = _cpu_seconds(proc.pid)
            rq_before = _runqueue_wait_s(proc.pid)
            out = subprocess.run([sys.executable, __file__, "load", "--url", url, "--token",
                                  setup["token"], "--rate", str(rate), "--duration",
                                  str(args.duration), "--bodies", str(body_file)],
                                 check=True, capture_output=True, text=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            cpu_after = _cpu_seconds(proc.pid)
            rq_after = _runqueue_wait_s(proc.pid)
            res["server_runqueue_wait_s"] = (round(rq_after - rq_before, 3)
                                             if rq_before is not None and rq_after is not None
                                             else None)
            res["server_cpu_ms_per_request"] = (
                round((cpu_after - cpu_before) / res["requests"] * 1000, 3)
                if cpu_before is not None and cpu_after is not None else None)
            res["loadavg_1m_before"] = round(load_before[0], 2)
            res["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
            results.append(res)
            print(json.dumps(res), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()
    doc = {"command": " ".join(["python", "bench/service_load.py", *sys.argv[1:]]),
           "jobs": setup["jobs"], "placed": setup["placed"], "sites": setup["sites"],
           "hours": setup["hours"], "machine": {"cpus": os.cpu_count(),
                                                "python": platform.python_version(),
                                                "platform": platform.platform(),
                                                "loadavg_1m_at_end": os.getloadavg()[0]},
           "results": results}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print("| rate req/s | ok | errors | throughput req/s | p50 ms | p90 ms | p99 ms | max ms "
          "| server CPU ms/req | server run-queue wait s | client CPU ms/req | send lag p99 ms "
          "| load avg before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['rate_target']:.0f} | {r['ok']} | {r['errors']} | {r['throughput_rps']} "
              f"| {r['p50_ms']} | {r['p90_ms']} | {r['p99_ms']} | {r['max_ms']} "
              f"| {r['server_cpu_ms_per_request']} | {r['server_runqueue_wait_s']} "
              f"| {r['client_cpu_ms_per_request']} "
              f"| {r['send_lag_p99_ms']} | {r['loadavg_1m_before']} / {r['loadavg_1m_after']} |")


if __name__ == "__main__":
    main()
