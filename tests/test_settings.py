"""Settings from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonsched.config import get_settings


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    for name in ("CARBONSCHED_DATA_DIR", "CARBONSCHED_SHARED_DATA", "CARBONSCHED_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_data_dir_default_and_both_env_names(monkeypatch):
    assert get_settings().data_dir == Path("../shared/data")
    # error messages tell users to set CARBONSCHED_SHARED_DATA: the CLI must honour it
    monkeypatch.setenv("CARBONSCHED_SHARED_DATA", "/data/shared")
    get_settings.cache_clear()
    assert get_settings().data_dir == Path("/data/shared")
    monkeypatch.setenv("CARBONSCHED_DATA_DIR", "/data/direct")
    get_settings.cache_clear()
    assert get_settings().data_dir == Path("/data/direct")


def test_database_url_env_overrides_the_sqlite_default(monkeypatch):
    assert get_settings().resolved_database_url().startswith("sqlite:///")
    assert get_settings().resolved_database_url().endswith("carbonsched.db")
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", "postgresql+psycopg://u@h/db")
    get_settings.cache_clear()
    assert get_settings().resolved_database_url() == "postgresql+psycopg://u@h/db"


def test_settings_by_field_name_still_work():
    from carbonsched.config import Settings

    assert Settings(data_dir="/x").data_dir == Path("/x")
