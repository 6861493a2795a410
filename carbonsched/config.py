"""carbonsched's configuration (pydantic-settings), behind cached getters.

Two classes read the same ``CARBONSCHED_<NAME>`` environment variables:
:class:`Settings` (what every command needs: the data folder and the store) behind
:func:`get_settings`, and :class:`ServiceSettings` (what ``carbonsched serve`` and the daily cron
read, also from the TOML file named by ``CARBONSCHED_CONFIG``).

Environment variables
---------------------
CARBONSCHED_DATA_DIR
    Folder of the real public data (``../shared/data`` layout). Default: ``../shared/data``
    relative to the current directory. ``CARBONSCHED_SHARED_DATA`` (the name the tests, the
    benchmarks and several error messages use) is accepted too; ``CARBONSCHED_DATA_DIR`` wins.
CARBONSCHED_DATABASE_URL
    Any SQLAlchemy URL for the store. Default: a SQLite file in the user's data directory
    (``platformdirs.user_data_dir("carbonsched")``).

Service settings: sources, strongest first: command-line options (passed as keyword arguments),
environment variables ``CARBONSCHED_<NAME>``, the TOML config file named by ``CARBONSCHED_CONFIG``
(or ``carbonsched serve --config``), then the defaults. Secrets (the bootstrap admin token, a
password inside the database URL) are ``SecretStr`` or rendered without the password by
:meth:`ServiceSettings.public_dict`, which is all the service ever logs.
"""

from __future__ import annotations

import os
from datetime import datetime, time
from functools import lru_cache
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


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


CONFIG_ENV = "CARBONSCHED_CONFIG"
"""Environment variable naming the TOML config file."""


class ServiceSettings(BaseSettings):
    """Everything ``carbonsched serve`` reads; each field is also ``CARBONSCHED_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="CARBONSCHED_", populate_by_name=True,
                                      extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    catalog: str = "china-eastdata-westcompute"
    data_dir: Path = Field(
        default=Path("../shared/data"),
        validation_alias=AliasChoices("CARBONSCHED_DATA_DIR", "CARBONSCHED_SHARED_DATA"))
    database_url: SecretStr = SecretStr("")
    workload_file: Path | None = None
    """Jobs file the daily run plans (docs/workload.md); default the catalog's demo day."""
    solver: str = "highs"
    time_limit_s: float = Field(60.0, gt=0)
    horizon_hours: int = Field(24, ge=1, le=168)
    rolling: bool = False
    """Rolling horizon (issue 14): each run plans ``horizon_hours`` (e.g. 72) from its issue
    time, commits only placements starting before the next run and carries the rest in the
    store (:mod:`carbonsched.service.rolling`)."""
    rolling_run_every_hours: int = Field(24, ge=1, le=24)
    """Hours from one rolling run to the next (the cron runs daily: 24). [h]"""
    as_of: datetime | None = None
    """Pin the service's clock at this instant (tz-aware)."""
    cron_enabled: bool = True
    cron_time: time = time(6, 0)
    """Local wall-clock time of the daily run, in :attr:`cron_timezone`."""
    cron_timezone: str = ""
    """IANA zone of the cron; default the catalog's time zone (its sites' most common)."""
    cron_plan_offset_days: int = Field(1, ge=0, le=7)
    """The run on local day D plans date D + this (1: day-ahead)."""
    cron_check_interval_s: float = Field(300.0, gt=0)
    """Safety-net check between the daily triggers (catches a trigger lost to DST). [s]"""
    cron_stale_after_s: float = Field(3 * 3600.0, gt=0)
    """A run still marked running after this long is taken over. [s]"""
    bootstrap_admin_token: SecretStr | None = None
    """An admin token accepted without the store (for first start-up); never logged."""
    max_request_bytes: int = Field(1_000_000, ge=1024)
    max_jobs_per_request: int = Field(1000, ge=1)
    book_refresh_s: float = Field(2.0, gt=0)
    """How often each replica reloads the plan and reservations it answers from. [s]"""
    replica_name: str = ""

    @field_validator("as_of")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("as_of needs a time zone, e.g. 2023-07-15T06:00:00Z")
        return v

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Options, then environment, then the TOML file named by ``CARBONSCHED_CONFIG``."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = os.environ.get(CONFIG_ENV)
        if path:
            if not Path(path).is_file():
                raise FileNotFoundError(2, "config file not found", path)
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    def resolved_database_url(self) -> str:
        """The configured database URL, or the default SQLite file."""
        return self.database_url.get_secret_value() or default_database_url()

    def public_dict(self) -> dict[str, Any]:
        """The settings as they may be logged: secrets masked, the URL without its password."""
        from sqlalchemy.engine import make_url

        out = self.model_dump(mode="json")
        out["database_url"] = make_url(self.resolved_database_url()).render_as_string(
            hide_password=True)
        out["bootstrap_admin_token"] = "**********" if self.bootstrap_admin_token else None
        return out
