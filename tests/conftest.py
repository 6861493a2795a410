"""Shared fixtures: the real public data is read by path, never copied."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _real_cluster_case(item: pytest.Item) -> bool:
    """A case of the Kubernetes contract suites meant for a real cluster (its id names ``real``)."""
    cs = getattr(item, "callspec", None)
    return cs is not None and item.path.parent.name == "dispatch" and "real" in cs.id.split("-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a real cluster configured, the real-cluster cases of the Kubernetes contract
    suites are deselected and named once in the header (:func:`pytest_report_header`), not
    skipped one line each; their emulator cases run."""
    from dispatch.helpers import real_cluster

    if real_cluster() is not None:
        return
    real = [it for it in items if _real_cluster_case(it)]
    if real:
        config.hook.pytest_deselected(items=real)
        items[:] = [it for it in items if not _real_cluster_case(it)]


def pytest_report_header(config: pytest.Config) -> str | None:
    """One line on the Kubernetes contract suites' real-cluster cases when they do not run."""
    from dispatch.helpers import REAL_CLUSTER_HOW, real_cluster

    if real_cluster() is not None:
        return None
    return ("Kubernetes contract suites: their real-cluster cases are deselected (their "
            f"emulator cases run); to run them, {REAL_CLUSTER_HOW} (docs/dispatch.md, "
            "'Contract suite')")


@pytest.fixture(scope="session", autouse=True)
def _matplotlib_config_outside_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """matplotlib's config and font cache in the session's temporary folder, not in HOME.

    Without ``MPLCONFIGDIR`` matplotlib writes ``~/.cache/matplotlib`` (its font list) the
    first time a test draws the replay's plot, and the suite would leave the user's HOME
    changed; the variable reaches the processes the tests start too.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("matplotlib")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _solvers_probed() -> None:
    """Probe HiGHS once per test process, before any test patches ``run_milp``.

    :func:`carbonsched.plan.solve.probe_solver` caches its verdict per process: a first probe
    made through a test's patched ``run_milp`` (no incumbent, a recorder) would mark HiGHS
    unusable for every later test of that worker, which would then run CBC.
    """
    from carbonsched.plan.solve import probe_solver

    probe_solver("highs")


def shared_data_dir() -> Path:
    """``$CARBONSCHED_SHARED_DATA`` or ``../shared/data`` next to the project root."""
    return Path(os.environ.get("CARBONSCHED_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "README.md").exists():
        pytest.fail(f"shared data not found at {path}; set CARBONSCHED_SHARED_DATA")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A fresh PostgreSQL database on the server scripts/test started; dropped afterwards.

    Tests that need PostgreSQL get a database of their own: other tests use the shared one at
    the same time (pytest-xdist).
    """
    base = os.environ.get("CARBONSCHED_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("CARBONSCHED_TEST_POSTGRES_URL not set (scripts/test starts PostgreSQL)")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"cs_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(base).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture()
def private_store(tmp_path, monkeypatch):
    """A store of the test's own (SQLite in ``tmp_path``), the settings re-read around it."""
    from carbonsched.config import get_settings

    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", f"sqlite:///{tmp_path}/store.db")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()

