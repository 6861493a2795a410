"""Service settings: options over environment over the TOML file; secrets masked."""

from __future__ import annotations

from datetime import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from carbonsched.config import Settings


def test_sources_and_their_order(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('catalog = "global"\nport = 9000\ncron_time = "05:30"\n'
                   'max_jobs_per_request = 7\n')
    monkeypatch.setenv("CARBONSCHED_CONFIG", str(cfg))
    monkeypatch.setenv("CARBONSCHED_PORT", "9100")
    s = Settings()
    assert (s.catalog, s.port, s.cron_time, s.max_jobs_per_request) == (
        "global", 9100, time(5, 30), 7)
    assert Settings(port=9200).port == 9200
    assert Settings(data_dir=Path("x")).data_dir == Path("x")


def test_secrets_are_masked(monkeypatch):
    monkeypatch.setenv("CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN", "tok-123-secret")
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL",
                       "postgresql+psycopg2://svc:pa55word@db:5432/carbonsched")
    s = Settings()
    shown = repr(s) + str(s.public_dict())
    assert "tok-123-secret" not in shown and "pa55word" not in shown
    assert s.public_dict()["database_url"] == "postgresql+psycopg2://svc:***@db:5432/carbonsched"
    assert s.resolved_database_url().endswith("pa55word@db:5432/carbonsched")
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL",
                       "postgresql+psycopg2://svc@db:5432/carbonsched?password=pa55word")
    assert Settings().public_dict()["database_url"] == (
        "postgresql+psycopg2://svc@db:5432/carbonsched?password=***")
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", "host=db user=svc password=pa55word")
    assert Settings().public_dict()["database_url"] == "(not shown: not a URL)"


def test_bad_values_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ValidationError, match="as_of needs a time zone"):
        Settings(as_of="2023-07-15T06:00:00")
    cfg = tmp_path / "c.toml"
    cfg.write_text('catalgo = "typo"\n')
    monkeypatch.setenv("CARBONSCHED_CONFIG", str(cfg))
    with pytest.raises(ValidationError, match="catalgo"):
        Settings()
