"""carbonsched's configuration: one pydantic-settings class, :class:`Settings`.

Every command, the service, the cron and dispatch read the same settings, each field from
``CARBONSCHED_<NAME>`` or from the TOML file named by ``CARBONSCHED_CONFIG`` (``carbonsched serve
--config``); ``docs/configuration.md`` lists them all with their defaults. Secrets (the bootstrap
admin token, a password inside the database URL) are ``SecretStr`` or rendered without the
password by :meth:`Settings.public_dict`, which is all the service ever logs.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, time
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
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


def database_label(url: Any) -> str:
    """The database as a person reads it: a SQLite file's path, else the URL without password.

    Parameters
    ----------
    url : str or sqlalchemy.engine.URL
        A SQLAlchemy database URL (``sqlite:////abs/path.db``, ``postgresql+psycopg://u:p@h/db``).

    Returns
    -------
    str
        ``/abs/path.db`` for a SQLite file, ``SQLite in memory`` for ``sqlite://``, else the URL
        as :func:`url_without_secrets` shows it (the password and secret query values as
        ``***``; never raises).
    """
    u = _parse_url(url)                            # None: url_without_secrets says so
    if u is not None and u.get_backend_name() == "sqlite":
        return u.database if u.database not in (None, "", ":memory:") else "SQLite in memory"
    return url_without_secrets(url)


def url_without_secrets(url: Any) -> str:
    """A database URL as it may be logged: its password and secret query values as ``***``.

    Never raises: what cannot be shown safely is not shown.

    Parameters
    ----------
    url : str or sqlalchemy.engine.URL
        A SQLAlchemy database URL.

    Returns
    -------
    str
        The URL rendered by SQLAlchemy with ``hide_password=True``, every query parameter whose
        name holds ``pass``, ``pwd``, ``secret`` or ``token`` (libpq's ``password`` and
        ``sslpassword``, https://www.postgresql.org/docs/15/libpq-connect.html; MySQL's
        ``passwd``) shown as ``***``. Only ``<scheme>://…`` for a URL that does not parse or
        whose password holds an unescaped ``@`` (where the password ends cannot be told), and
        ``(not shown: not a URL)`` for a string without a scheme (a libpq keyword DSN such as
        ``host=db password=…``).
    """
    u = _parse_url(url)
    if u is None:
        m = _SCHEME.match(url) if isinstance(url, str) else None
        return (f"{m.group(1)}://… (the rest not shown: it does not parse)" if m
                else "(not shown: not a URL)")
    if unescaped_at(url):
        return f"{u.drivername}://… (the rest not shown: {UNESCAPED_AT})"
    hidden = {k: (_HIDDEN if _SECRET_QUERY_KEY.search(k) else v) for k, v in u.query.items()}
    return (u.set(query=hidden).render_as_string(hide_password=True)
            .replace(quote(_HIDDEN, safe=""), _HIDDEN))


def _parse_url(url: Any) -> Any:
    """``url`` as a ``sqlalchemy.engine.URL``, or None where SQLAlchemy cannot parse it."""
    from sqlalchemy.engine import make_url  # deferred: SQLAlchemy is not needed to read settings
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url)
    except (ArgumentError, ValueError, TypeError):
        return None


def unescaped_at(url: Any) -> bool:
    """Whether a database URL holds an ``@`` besides the one that ends its user and password.

    Where such a password ends cannot be told: SQLAlchemy ends it at the first ``@`` and reads
    the rest as host, database or query (``postgresql://ops:Xy@3k/9Q@db/cs`` has host ``3k``).

    Parameters
    ----------
    url : str or sqlalchemy.engine.URL
        A database URL; a string is read as written, a parsed URL by its host and database
        (its query values are decoded, where ``%40`` is a legitimate ``@``).

    Returns
    -------
    bool
        True for more than one ``@`` after the scheme's ``://`` (any ``@`` in a password, user
        or query value must be written ``%40``), or one in a parsed URL's host or database.
    """
    if isinstance(url, str):
        return url.partition("://")[2].count("@") > 1
    return "@" in (url.host or "") or "@" in (url.database or "")


UNESCAPED_AT = "its password or user holds an unescaped '@'; percent-encode it as %40"
"""Why a database URL with an unescaped ``@`` (:func:`unescaped_at`) is not shown, and the fix."""

_HIDDEN = "***"
_SECRET_QUERY_KEY = re.compile("pass|pwd|secret|token", re.IGNORECASE)
_SCHEME = re.compile(r"([A-Za-z][\w+.-]*)://")


CONFIG_ENV = "CARBONSCHED_CONFIG"
"""Environment variable naming the TOML config file."""

MOVED_TO_CATALOG = ("slurm_shards_per_gpu", "k8s_gpu_share_replicas")
"""Settings that became the catalog's per-pool ``shares_per_gpu``; giving one is refused with
a message that says where it went."""

MAX_PLAN_OFFSET_DAYS = 7
"""The largest ``cron_plan_offset_days``. [d]"""


class Settings(BaseSettings):
    """Every setting of carbonsched; each field reads ``CARBONSCHED_<NAME>``.

    Sources, strongest first: keyword arguments (command-line options), environment variables
    ``CARBONSCHED_<NAME>``, the TOML file named by ``CARBONSCHED_CONFIG`` (keys as the field
    names), then the defaults. An unknown key in the file is refused. ``docs/configuration.md``
    is generated from this class (``python3 scripts/configuration_md.py``).
    """

    model_config = SettingsConfigDict(env_prefix="CARBONSCHED_", populate_by_name=True,
                                      extra="forbid", use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """Interface ``carbonsched serve`` listens on."""
    port: int = Field(8080, ge=0, le=65535)
    """TCP port of ``carbonsched serve``."""
    shutdown_timeout_s: float = Field(30.0, gt=0, le=3600)
    """How long ``carbonsched serve``, asked to stop (SIGTERM, Ctrl-C), waits for each part of
    its shutdown: the requests in progress (uvicorn's ``timeout_graceful_shutdown``; then
    cancelled), then the background work (a dispatch pass finishing its submissions in flight;
    none begins after the signal). Work still running after that is abandoned and the process
    exits: a run it held is taken over once its lease runs out. Give the pod a
    ``terminationGracePeriodSeconds`` of at least twice this. [s] A project choice: Kubernetes'
    default grace period is 30 s."""
    catalog: str = "china-eastdata-westcompute"
    """Catalog the service plans: a shipped name (``carbonsched catalog list``) or a TOML path."""
    data_dir: Path = Field(
        default=Path("../shared/data"),
        validation_alias=AliasChoices("CARBONSCHED_DATA_DIR", "CARBONSCHED_SHARED_DATA"))
    """Folder of the real public data (``../shared/data`` layout), relative to the working
    directory; ``CARBONSCHED_SHARED_DATA`` is read too, ``CARBONSCHED_DATA_DIR`` wins."""
    database_url: SecretStr = SecretStr("")
    """SQLAlchemy URL of the store (SQLite or PostgreSQL); empty: a SQLite file in the user's
    data directory. A password in it is never logged."""
    workload_file: Path | None = None
    """Jobs file the daily run plans (docs/workload.md); default the catalog's demo day."""
    solver: Literal["highs", "cbc"] = "highs"
    """MILP solver of the service's runs: ``highs`` or ``cbc``."""
    time_limit_s: float = Field(60.0, gt=0, allow_inf_nan=False)
    """Solver time limit of one planning run. [s]"""
    fairness: float = Field(0.0, ge=0.0, le=1.0)
    """Trade between carbon and tenants' fair shares when capacity binds: 0 plans for carbon
    only (tenants unused), 1 holds every tenant of the catalog's ``[tenants.NAME]`` to its
    weighted dominant-resource-fair share and quota, then minimises carbon within it; values
    between scale the shares held (docs/plan.md, "Tenants and fair shares"). [-]"""
    horizon_hours: int = Field(24, ge=1, le=168)
    """Hours one run plans, from its issue time. [h]"""
    flex_notice_hours: float = Field(4.0, ge=0, le=168)
    """Notice a grid event is assumed to give when a plan states its flexibility band
    (``flex_it_kw`` in ``site_hours``; docs/grid-flexibility.md). [h]"""
    flex_event_hours: int = Field(3, ge=1, le=24)
    """Length of the grid event the flexibility band is stated for (the 3-hour windows of
    the Emerald AI / SRP demonstration, arXiv:2507.00909). [h]"""
    power_caps: bool = False
    """Run jobs whose window has room at a GPU power cap (slower, leaner; the cap table
    ``carbonsched/data/gpu_power_caps.toml`` with its sources); off: every job uncapped."""
    rolling: bool = False
    """Rolling horizon: each run plans ``horizon_hours`` (e.g. 72) from its issue
    time, commits only placements starting before the next run and carries the rest in the
    store (:mod:`carbonsched.service.rolling`)."""
    rolling_run_every_hours: int = 24
    """Hours from one rolling run to the next: 1, 2, 3, 4, 6, 8, 12 or 24 (a divisor of a day).
    Runs are issued at 00:00 UTC and every this many hours after it, each keyed by its issue
    time (one run per issue time across replicas and restarts); below 24 needs
    ``CARBONSCHED_ROLLING=true``. 24: the daily cron (:attr:`cron_time`). [h]"""
    as_of: datetime | None = None
    """Pin the service's clock at this instant (tz-aware)."""
    providers_file: Path | None = None
    """Providers file (``regions/schema.md``, "Providers file"): the signal history and the
    forecasts the providers publish come from the providers it names — for ``carbonsched
    plan`` and for every run of the service (daily and rolling, cron and API-triggered),
    each run planning on them and keeping their published forecasts in the store
    (docs/providers.md); a provider outage is a named fallback in the plan's notes. Empty:
    the files in :attr:`data_dir`."""
    providers_base_url: str = ""
    """Base URL replacing every provider's own (a mirror, or a loopback server in the tests);
    empty: each provider's own."""
    providers_now: datetime | None = None
    """Pin "now" of the provider clients (ISO 8601; without a zone: UTC), for replaying a
    recorded fetch; empty: the service's clock (the wall clock, or :attr:`as_of`)."""
    cron_enabled: bool = True
    """Run the daily plan -> dispatch cron inside ``carbonsched serve``."""
    cron_startup_run: bool = True
    """At start-up, run the due day's plan -> dispatch at once when that day has no run record
    (the catch-up after downtime; logged, recorded with trigger ``startup`` and listed by
    ``GET /v1/runs``). Off: the day is run at :attr:`cron_time` only, or when an operator
    asks (``POST /v1/runs``); ``GET /v1/runs`` names the run left out (``cron.skipped``).
    Either way a run whose
    plan replaces one made outside the service (``carbonsched plan``) for the same date says
    so in the log, the plan's notes and the run record's ``notes``."""
    cron_time: time = time(6, 0)
    """Local wall-clock time of the daily run, in :attr:`cron_timezone`."""
    cron_timezone: str = ""
    """IANA zone of the cron; default the catalog's time zone (its sites' most common)."""
    cron_plan_offset_days: int = Field(1, ge=0, le=MAX_PLAN_OFFSET_DAYS)
    """The run on local day D plans date D + this (1: day-ahead), from its 00:00 UTC. The run
    must not come after that instant on any day: a :attr:`cron_time` and offset that would
    (0 with a cron time after 00:00 UTC, e.g. 06:00 in New York; 1 with 18:00 in Los Angeles,
    01:00-02:00 UTC the next day) are refused when the service starts, naming the latest cron time
    and the least offset that do. [d]"""
    cron_check_interval_s: float = Field(300.0, gt=0)
    """Safety-net check between the daily triggers (catches a trigger lost to DST). [s]"""
    lease_s: float = Field(45.0, gt=0, le=3600)
    """Lease of the cron's leadership and of a running run record, renewed every third of it:
    this long after a replica's last renewal (it died, hangs or lost the database) another
    replica takes the lead, and a run record it left ``running`` is taken over. [s]"""
    bootstrap_admin_token: SecretStr | None = None
    """An admin token accepted without the store (for first start-up); never logged."""
    token_cache_s: float = Field(5.0, ge=0, le=300)
    """How long a replica reuses a token's verdict from the store: a revoked or expired token
    is refused on every replica at most this long after. [s]"""
    token_cache_max_entries: int = Field(10_000, ge=1)
    """Most valid tokens, and separately most refused tokens, a replica's token cache holds
    (least recently used dropped first). [-]"""
    max_request_bytes: int = Field(1_000_000, ge=1024)
    """Largest request body the API reads; a larger one is answered 413. [bytes]"""
    max_jobs_per_request: int = Field(1000, ge=1)
    """Most jobs one ``POST /v1/jobs`` may submit. [-]"""
    sdk_public: bool = False
    """Serve the Carbon Aware SDK routes (``/emissions/...``, ``/locations``) without a bearer
    token, as the SDK's own WebAPI does. Off: they need a ``read`` token, which SDK clients
    send through a reverse proxy that adds the header (docs/service.md)."""
    sdk_forecast_hours: int = Field(24, ge=1, le=168)
    """Horizon of the forecast ``/emissions/forecasts/current`` issues at the current hour
    (when no stored plan was issued at that hour) and of ``/emissions/forecasts/batch``. [h]"""
    book_refresh_s: float = Field(2.0, gt=0)
    """How often each replica reloads the plan and reservations it answers from. [s]"""
    replica_name: str = ""
    """Name of this replica in run records and logs; default the host name and process id."""
    dispatcher: str = ""
    """Dispatch step run after each plan of the service, ``module:function``
    (``carbonsched.dispatch.outbox:dispatch_plan`` dispatches to the catalog's backends); empty:
    plans are recorded, not dispatched."""
    dispatch_loops: bool | None = None
    """Run the dispatch loops in ``carbonsched serve`` on the leader (start-up reconcile, release
    of held work at its planned start, status refresh); empty: on when :attr:`dispatcher` is
    set."""
    release_interval_s: float = Field(60.0, gt=0)
    """How often the leader releases held work whose planned start has come. [s]"""
    status_refresh_s: float = Field(300.0, gt=0)
    """How often the leader records what each backend reports for dispatched work. [s]"""
    reconcile_interval_s: float = Field(600.0, gt=0)
    """How often the leader reconciles outbox intents still pending (also at start-up and on
    taking the lead). [s]"""
    grid_event_interval_s: float = Field(10.0, gt=0, le=300)
    """How often the leader re-plans and acts on grid events (``POST /v1/grid-events`` also
    wakes it at once): pauses and holds at an event's start, resumes and releases at its end
    are taken within this of the moment. At most 300 s, a metering interval of demand-response
    programmes (e.g. 5-minute settlement), so a reduction is reached within an event's first
    interval. [s]"""
    retention_days: int = Field(0, ge=0, le=36500)
    """Days of finished work the store keeps: above 0, the service's leader prunes once a day
    what is older and finished, as ``carbonsched store prune --keep-days`` does (terminal
    dispatch units, ended rolling and API jobs, plans nothing live references, run records,
    ended grid events, fetch logs and published forecasts; never pending or running work nor
    the newest plan of a catalog; docs/reliability.md, "Retention"). 0: keep everything. [d]"""
    slurm_conf_dir: Path | None = None
    """Folder of ``<cluster>/slurm.conf`` (one SLURM_CONF per cluster, no slurmdbd)."""
    slurm_use_clusters: bool = False
    """Address clusters with ``--clusters`` (needs slurmdbd)."""
    slurm_accounting: str = "jobcomp"
    """Where finished Slurm jobs are looked up: ``jobcomp``, ``slurmdbd`` or ``none``."""
    slurm_timezone: str | None = None
    """IANA zone sbatch's ``--begin`` wall times are written in; empty: the host's zone."""
    slurm_account: str | None = None
    """``--account`` of every Slurm submission; empty: the user's default account."""
    kubeconfig: Path | None = None
    """Kubeconfig with one context per Kubernetes site (default: ``$KUBECONFIG``)."""
    k8s_image: str = "busybox:1.36"
    """Image of a Kubernetes Job whose job names a command but no image (and of the
    placeholder)."""
    k8s_gpu_share_resource: str = "nvidia.com/gpu.shared"
    """Kubernetes resource of a ``gpu_milli`` job (the NVIDIA device plugin's time-slicing with
    ``renameByDefault``); the shares per GPU are each catalog pool's ``shares_per_gpu``."""
    k8s_topology_label: str = "cloud.provider.com/topology-block"
    """Node label of the topology level that is one network domain on the Kueue sites (a level
    of the cluster's Kueue ``Topology``): a gang with ``topology = "same-domain"`` gets the pod
    annotation ``kueue.x-k8s.io/podset-required-topology`` with it, one with ``max_domains``
    above 1 ``kueue.x-k8s.io/podset-preferred-topology`` (Kueue topology-aware scheduling,
    https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/; the default is the
    label of Kueue's own examples)."""
    dispatch_placeholder: bool = False
    """Submit jobs that name nothing to run as the placeholder ``sleep <planned seconds>``
    (``carbonsched dispatch --placeholder``); off: they are not submitted (``no_payload``)."""
    dispatch_deadline_slack_s: float = Field(default=3600.0, ge=0)
    """Slack after the planned end before the backend drops a job that has not ended. [s]"""
    dispatch_workers: int = Field(default=4, ge=1)
    """Submissions in flight per backend. [-]"""
    dispatch_max_attempts: int = Field(default=5, ge=1)
    """Submissions of one unit before it is marked failed. [-]"""
    dispatch_backoff_s: float = Field(default=1.0, ge=0)
    """First retry delay; doubles per attempt. [s]"""
    dispatch_backend_timeout_s: float = Field(default=30.0, gt=0)
    """Timeout of one backend call (an sbatch, squeue or sacct run; one Kubernetes API
    request). [s]"""
    dispatch_lease_s: float = Field(default=120.0, gt=0)
    """How long a dispatcher's claim on an outbox row lasts unless renewed (renewed every third
    of it while the dispatcher works); a dispatcher that died is taken over after it. At least
    twice ``dispatch_backend_timeout_s``. [s]"""
    dispatch_wait_s: float = Field(default=300.0, ge=0)
    """How long ``dispatch`` waits for placements of its plan that another live dispatcher is
    submitting before it reports them ``held_elsewhere`` (exit 3). [s]"""

    @model_validator(mode="before")
    @classmethod
    def _moved_to_the_catalog(cls, data: Any) -> Any:
        keys = set(data) if isinstance(data, dict) else set()
        environ = {k.upper() for k in os.environ}   # pydantic-settings reads any case
        for name in MOVED_TO_CATALOG:
            env = f"CARBONSCHED_{name.upper()}"
            if name in keys or env in environ:
                raise ValueError(
                    f"{env} ({name}) is no longer a setting: how many shares one GPU is cut "
                    "into is per GPU pool now, so the plan books what dispatch asks for; give "
                    "shares_per_gpu in the site's [sites.gpus.<TYPE>] table of the catalog "
                    "(regions/schema.md) and remove this setting")
        return data

    @model_validator(mode="after")
    def _lease_covers_a_call(self) -> Settings:
        if self.dispatch_lease_s < 2 * self.dispatch_backend_timeout_s:
            raise ValueError(
                f"dispatch_lease_s ({self.dispatch_lease_s:g} s) must be at least twice "
                f"dispatch_backend_timeout_s ({self.dispatch_backend_timeout_s:g} s): a "
                "submission that outlives its claim could be made twice; raise "
                "CARBONSCHED_DISPATCH_LEASE_S or lower CARBONSCHED_DISPATCH_BACKEND_TIMEOUT_S")
        return self

    @field_validator("rolling_run_every_hours")
    @classmethod
    def _run_every_divides_a_day(cls, v: int) -> int:
        from carbonsched.timeaxis import check_run_every_hours

        try:
            return check_run_every_hours(v)
        except ValueError as exc:  # pydantic reports a ValueError with the field's name
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _sub_daily_runs_roll(self) -> Settings:
        if self.rolling_run_every_hours < 24 and not self.rolling:
            raise ValueError(
                f"CARBONSCHED_ROLLING_RUN_EVERY_HOURS = {self.rolling_run_every_hours} runs "
                "the planner several times a day, which only the rolling horizon does (a daily "
                "plan covers its date once): set CARBONSCHED_ROLLING=true, or "
                "CARBONSCHED_ROLLING_RUN_EVERY_HOURS=24")
        return self

    @field_validator("providers_file", "providers_now", mode="before")
    @classmethod
    def _empty_is_unset(cls, v: Any) -> Any:
        # CARBONSCHED_PROVIDERS_FILE= (empty) is no providers file, not the working directory
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("providers_now")
    @classmethod
    def _providers_now_utc(cls, v: datetime | None) -> datetime | None:
        # as the command line's --now: a time without a zone is UTC
        return v.replace(tzinfo=UTC) if v is not None and v.tzinfo is None else v

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
        """The settings as they may be logged: secrets masked (:func:`url_without_secrets`)."""
        out = self.model_dump(mode="json")
        out["database_url"] = url_without_secrets(self.resolved_database_url())
        out["bootstrap_admin_token"] = "**********" if self.bootstrap_admin_token else None
        return out


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (cached; call ``get_settings.cache_clear()`` in tests)."""
    return Settings()
