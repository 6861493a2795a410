"""The report tests' store fixture; their artefacts (screenshots, reports) listed at the end."""

from __future__ import annotations

import pytest

from carbonsched.config import get_settings


@pytest.fixture()
def store_url(tmp_path, monkeypatch):
    """A SQLite store in the test's directory, named by ``CARBONSCHED_DATABASE_URL``."""
    url = f"sqlite:///{tmp_path}/store.db"
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def pytest_terminal_summary(terminalreporter):
    seen = []
    for kind in ("passed", "failed"):
        for rep in terminalreporter.getreports(kind):
            for key, value in getattr(rep, "user_properties", []):
                if key == "artefact" and (rep.nodeid, value) not in seen:
                    seen.append((rep.nodeid, value))
    if seen:
        terminalreporter.write_sep("-", "test artefacts")
        for nodeid, value in seen:
            terminalreporter.write_line(f"{nodeid}: {value}")
