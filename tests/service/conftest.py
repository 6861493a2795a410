"""Fixtures of the service tests: a real plan in a store, real `carbonsched serve` processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from carbonsched.ports import free_port
from tests.conftest import shared_data_dir
from tests.service.private_pg import private_pg  # noqa: F401  (a fixture of the service tests)

AS_OF = "2023-07-14T23:00:00Z"
"""The pinned service clock of the API tests (the session plan is for 2023-07-15)."""
PLAN_DATE = "2023-07-15"
CATALOG = "china-eastdata-westcompute"


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300
        ) -> subprocess.CompletedProcess:
    """Run ``carbonsched ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "carbonsched.cli.app", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=timeout)


def mint(db_url: str, role: str) -> str:
    """A token of ``role`` from `carbonsched token create` (its last line)."""
    r = cli("token", "create", "--role", role, env={"CARBONSCHED_DATABASE_URL": db_url})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


class Server:
    """A `carbonsched serve` process on loopback (uvicorn binds after the app's start-up, so
    a port another process takes meanwhile makes :meth:`wait_ready` start again elsewhere)."""

    def __init__(self, db_url: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.db_url = db_url
        self._spec = (db_url, args, env, log)
        self._launch()

    def _launch(self) -> None:
        db_url, args, env, log = self._spec
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115
        full_env = {**os.environ, "CARBONSCHED_DATABASE_URL": db_url,
                    "CARBONSCHED_DATA_DIR": str(shared_data_dir()), **env}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "carbonsched.cli.app", "serve", "--port", str(self.port), *args],
            stdout=self._log, stderr=subprocess.STDOUT, env=full_env)

    def wait_ready(self, timeout: float = 180.0, path: str = "/healthz", tries: int = 3) -> None:
        try:
            self._wait_ready(timeout, path)
        except RuntimeError:
            if tries > 1 and "address already in use" in self.logs():
                self._log.close()
                self._launch()
                return self.wait_ready(timeout, path, tries - 1)
            raise

    def _wait_ready(self, timeout: float, path: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}:\n{self.logs()}")
            try:
                if httpx.get(self.url + path, timeout=2).status_code == 200:
                    time.sleep(0.3)
                    if self.proc.poll() is not None:  # another process holds the port
                        raise RuntimeError(f"serve exited {self.proc.returncode}:\n"
                                           f"{self.logs()}")
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"serve not ready after {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()

    def kill(self) -> None:
        """Die without clean-up (SIGKILL)."""
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="session")
def plan_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store holding one real plan (China catalog, 2023-07-15, demo workload)."""
    from carbonsched.pipeline.daily import run_daily_plan
    from carbonsched.store import Store

    path = tmp_path_factory.mktemp("plan") / "plan.sqlite"
    daily = run_daily_plan(PLAN_DATE, CATALOG, None, shared_data_dir(), "highs", 30.0, 24)
    store = Store(f"sqlite:///{path}")
    store.save_plan(daily.document, daily.forecasts)
    store.engine.dispose()  # checkpoints the WAL into the file
    return path


def copy_db(plan_db: Path, dest: Path) -> str:
    """A private copy of the plan store; returns its URL."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "store.sqlite"
    shutil.copy(plan_db, target)
    return f"sqlite:///{target}"


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator:
    """Start `carbonsched serve` processes; all are stopped after the test."""
    servers: list[Server] = []

    def start(db_url: str, *args: str, env: dict[str, str] | None = None,
              ready_path: str = "/healthz", timeout: float = 180.0) -> Server:
        srv = Server(db_url, list(args), env or {}, tmp_path / f"serve-{len(servers)}.log")
        servers.append(srv)
        srv.wait_ready(timeout, ready_path)
        return srv

    yield start
    for s in servers:
        if s.proc.poll() is None:
            s.stop()


def postgres_url() -> str | None:
    """``CARBONSCHED_TEST_POSTGRES_URL`` (set by scripts/test) or ``None``."""
    return os.environ.get("CARBONSCHED_TEST_POSTGRES_URL")


