"""Settings from the environment (pydantic-settings), behind a cached :func:`get_settings`.

Environment variables
---------------------
CARBONSCHED_DATA_DIR
    Folder of the real public data (``../shared/data`` layout). Default: ``../shared/data``
    relative to the current directory. ``CARBONSCHED_SHARED_DATA`` (the name the tests, the
    benchmarks and several error messages use) is accepted too; ``CARBONSCHED_DATA_DIR`` wins.
CARBONSCHED_DATABASE_URL
    Any SQLAlchemy URL for the store. Default: a SQLite file in the user's data directory
    (``platformdirs.user_data_dir("carbonsched")``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_database_url() -> str:
    """SQLite file in the user's data directory (created on first use)."""
    d = Path(platformdirs.user_data_dir("carbonsched"))
    return f"sqlite:///{d / 'carbonsched.db'}"


class Settings(BaseSettings):
    """carbonsched's settings; each field reads ``CARBONSCHED_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="CARBONSCHED_", populate_by_name=True)

    data_dir: Path = Field(
        default=Path("../shared/data"),
        validation_alias=AliasChoices("CARBONSCHED_DATA_DIR", "CARBONSCHED_SHARED_DATA"),
    )
    database_url: str = ""

    def resolved_database_url(self) -> str:
        """The configured database URL, or the default SQLite file."""
        return self.database_url or default_database_url()


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (cached; call ``get_settings.cache_clear()`` in tests)."""
    return Settings()
