"""Shared fixtures: the real public data is read by path, never copied."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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

