"""Shared fixtures: the real public data is read by path, never copied."""

from __future__ import annotations

import os
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
