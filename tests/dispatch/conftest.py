"""Fixtures of the dispatch tests: the real Slurm clusters and the Kubernetes emulator started by
``scripts/services.sh``, stores, and a real plan of the ``global`` catalog moved into the future."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from carbonsched.config import Settings
from carbonsched.store import Store

PLAN_DAY = "2023-07-15"


@pytest.fixture(autouse=True)
def placeholder_for_jobs_without_payload(monkeypatch):
    """The plans of these tests are real plans and hand-made placements whose jobs mostly name
    nothing to run: they run the placeholder (``CARBONSCHED_DISPATCH_PLACEHOLDER``, read by
    every Settings and every ``carbonsched`` subprocess). Tests of payloads pass
    ``placeholder=False``."""
    from carbonsched.config import get_settings

    monkeypatch.setenv("CARBONSCHED_DISPATCH_PLACEHOLDER", "true")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def slurm_dir() -> Path:
    d = os.environ.get("CARBONSCHED_SLURM_CONF_DIR")
    if not d:
        pytest.skip("CARBONSCHED_SLURM_CONF_DIR not set (scripts/test starts the Slurm clusters)")
    return Path(d)


@pytest.fixture(scope="session")
def emulator_kubeconfig() -> Path:
    k = os.environ.get("CARBONSCHED_KUBECONFIG")
    if not k:
        pytest.skip("CARBONSCHED_KUBECONFIG not set (scripts/test starts the Kubernetes emulator)")
    return Path(k)


@pytest.fixture
def settings(slurm_dir, emulator_kubeconfig) -> Settings:
    return Settings(slurm_conf_dir=slurm_dir, kubeconfig=emulator_kubeconfig,
                    dispatch_backoff_s=0.01)


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request, tmp_path):
    """A store on SQLite, then on a PostgreSQL database of its own (tests/conftest.py pg_db)."""
    if request.param == "sqlite":
        yield Store(f"sqlite:///{tmp_path / 'store.db'}")
        return
    store = Store(request.getfixturevalue("pg_db"))
    yield store
    store.engine.dispose()


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


@pytest.fixture(scope="session")
def global_plan_doc(tmp_path_factory) -> dict:
    """A real plan of the global catalog for PLAN_DAY (planned once per test run)."""
    # shared by the xdist workers of this run (their basetemps share a parent), never across
    # runs: without xdist the parent is pytest-of-<user>, where a plan from older code would stay
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / (
        "dispatch_global_plan.json")
    with open(str(cache) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cache.exists():
            from carbonsched.pipeline.daily import run_daily_plan

            data = Path(os.environ.get("CARBONSCHED_SHARED_DATA",
                                       Path(__file__).resolve().parents[3] / "shared" / "data"))
            if not (data / "README.md").exists():
                pytest.skip(f"shared data not found at {data}")
            doc = run_daily_plan(PLAN_DAY, "global", data_dir=data, time_limit_s=60).document
            cache.write_text(json.dumps(doc))
        return json.loads(cache.read_text())
