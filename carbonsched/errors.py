"""The one exception tree of carbonsched.

Every error raised on purpose by carbonsched derives from :class:`CarbonschedError`
and from the built-in that fits it, so callers can catch either::

    CarbonschedError
    ├── InputError (ValueError)            bad input: the message says what, where, how to fix
    │   ├── DataFormatError                a file that cannot be read (file, row, reason)
    │   ├── TimeAxisError                  naive timestamps, bad frequency, duplicates, gaps
    │   ├── CatalogError                   a site catalog that breaks its schema
    │   ├── UnknownSiteError               a site id that no catalog defines
    │   └── WorkloadError                  a jobs file that breaks its format
    ├── ForecastError (RuntimeError)
    │   └── NotFittedError                 predict() before fit()
    ├── PlanningError (RuntimeError)
    │   ├── InfeasiblePlanError            no plan satisfies a constraint family
    │   └── SolverUnavailableError         the requested MILP solver cannot run on this host
    ├── BackendError (RuntimeError)
    │   ├── BackendUnavailableError        a backend (Slurm, Kubernetes, Dask) cannot be reached
    │   │   ├── StoreUnavailableError      the store's database cannot be reached (URL, no password)
    │   │   └── RunBlockedError            an earlier rolling run stopped after it stored its plan
    │   │                                  is held elsewhere or cannot be finished yet (retried)
    │   ├── BackendRejectedError           a backend refused a submission (site, key, reason)
    │   └── ProviderError                  a signal provider answered with an error or bad payload
    │       └── ProviderUnavailableError   a signal provider down, timing out or rate-limiting
    ├── AdapterContractError (TypeError)   a dispatch adapter missing a required method, a
    │                                      duplicate or an unknown backend name in the registry
    └── MissingExtraError (ImportError)    an optional part used without its install extra
                                           (``pip install 'carbonsched[service]'``)

    InputError
    └── ProviderConfigError                a provider configured wrongly (credentials, region)

Each class carries its context as attributes so that the CLI and the API can show it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType


class CarbonschedError(Exception):
    """Base class of every error carbonsched raises on purpose."""


class Interrupted(BaseException):  # noqa: N818 - named as the CLI says it: "interrupted: ..."
    """The process was asked to stop (SIGINT or SIGTERM), raised where it was.

    A ``BaseException``, as ``KeyboardInterrupt`` is: no handler of failures
    (``except Exception``) records it as one, while every ``finally`` runs (leases given up, run
    records marked). Not a ``KeyboardInterrupt``: Typer turns that into a silent exit 130. The
    clean-ups add a note each (``add_note``) saying what they gave up; the CLI prints them on one
    line, ``interrupted: <signal>; <note>; ...`` (:mod:`carbonsched.cli.interrupts`).

    Parameters
    ----------
    signum
        The signal's number (``signal.SIGINT``, ``signal.SIGTERM``).
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        """The shell's convention: 130 for SIGINT, 143 for SIGTERM."""
        super().__init__(signal.Signals(signum).name)


class RunTakenOverError(CarbonschedError, RuntimeError):
    """A run's record was taken over by another replica while the run could not renew it.

    Its lease ran out: the run stops before its next side effect; the other run's stands.
    """


class InputError(CarbonschedError, ValueError):
    """Input that carbonsched cannot use; the message says how to fix it."""


class DataFormatError(InputError):
    """A data file that cannot be read.

    Parameters
    ----------
    path
        The file that failed.
    reason
        What is wrong, in words a person can act on.
    row
        1-based line number in the file (header is line 1), when known.
    """

    def __init__(self, path: str | Path, reason: str, row: int | None = None) -> None:
        self.path = str(path)
        self.row = row
        self.reason = reason
        where = f"{self.path}" + (f", line {row}" if row is not None else "")
        super().__init__(f"{where}: {reason}")


class TimeAxisError(InputError):
    """A time axis that is naive, irregular, duplicated or misaligned."""


class CatalogError(InputError):
    """A site catalog that breaks the schema in ``regions/schema.md``."""


class UnknownSiteError(InputError):
    """A site id that the catalog does not define."""

    def __init__(self, site: str, known: list[str] | tuple[str, ...] = ()) -> None:
        self.site = site
        self.known = tuple(known)
        hint = f"; known sites: {', '.join(sorted(self.known))}" if self.known else ""
        super().__init__(f"unknown site {site!r}{hint}")


class WorkloadError(InputError):
    """A jobs or inference-demand file that breaks its documented format."""


class ForecastError(CarbonschedError, RuntimeError):
    """A forecaster that could not fit or predict."""


class NotFittedError(ForecastError):
    """``predict()`` called before ``fit()``."""


class PlanningError(CarbonschedError, RuntimeError):
    """The planner could not produce a plan."""


class InfeasiblePlanError(PlanningError):
    """No plan satisfies the constraints.

    Parameters
    ----------
    family
        The constraint family that makes the model infeasible (for example
        ``"inference_slo"`` or ``"gpu_capacity"``).
    detail
        What was found, for a person.
    """

    def __init__(self, family: str, detail: str) -> None:
        self.family = family
        self.detail = detail
        super().__init__(f"infeasible ({family}): {detail}")


class SolverUnavailableError(PlanningError):
    """The requested MILP solver is not installed or cannot run on this host."""

    def __init__(self, solver: str, detail: str) -> None:
        self.solver = solver
        super().__init__(f"solver {solver!r} is unavailable: {detail}")


class BackendError(CarbonschedError, RuntimeError):
    """A scheduler backend (Slurm, Kubernetes) rejected or failed a call."""


class BackendUnavailableError(BackendError):
    """A scheduler backend cannot be reached."""


class UnitHeldError(BackendUnavailableError):
    """Another dispatcher holds a unit's outbox row now (a submission may be in flight).

    Retryable, as an unreachable backend is: the holder's lease ends at a known time.
    """


def store_check(url: str) -> str:
    """What to check when the store named ``url`` cannot be reached, as a clause.

    Parameters
    ----------
    url
        The database as :func:`carbonsched.config.database_label` names it: a database server's
        URL holds ``://``; a SQLite file is named by its path (or ``SQLite in memory``).

    Returns
    -------
    str
        ``that the server is running`` for a server; for a SQLite file, that this user can
        read and write it and its folder (SQLite's "unable to open database file"); for SQLite
        in memory, that the process can allocate memory.
    """
    if "://" in url:
        return "that the server is running"
    if url == "SQLite in memory":
        return "that the process can allocate memory"
    return f"that this user can read and write {url} and its folder"


class RunBlockedError(BackendUnavailableError):
    """A run waits on an earlier run that stopped after it stored its plan and is not finished.

    That earlier run may have dispatched part of its plan; a later run planned before it is
    finished would plan its jobs again on a state that lacks them. Either another replica
    holds its record under a live lease (it is finishing it), or it cannot be finished from its
    stored plan until a person acts (the message says what). Retryable, as an unreachable
    backend is: the run is recorded ``interrupted`` and claimed again once its lease ran out.
    """


class StoreUnavailableError(BackendUnavailableError):
    """The store's database cannot be reached, or lost its connection during a call.

    Parameters
    ----------
    url
        The database as :func:`carbonsched.config.database_label` names it: a SQLite file's
        path, else the URL without its password.
    doing
        What the store was doing (``claiming the run of 2023-07-16``).
    detail
        The driver's message, on one line.
    hint
        How to retry (default: :func:`store_check`, then retry).
    """

    def __init__(self, url: str, doing: str, detail: str, hint: str = "") -> None:
        self.url = url
        self.doing = doing
        self.detail = detail
        hint = hint or f"check CARBONSCHED_DATABASE_URL and {store_check(url)}, then retry"
        super().__init__(f"database {url} is unreachable ({doing}: {detail}); {hint}")


# ----------------------------------------------------------------------- signal providers
class ProviderConfigError(InputError):
    """A signal provider configured wrongly.

    Missing credentials, a zone or region outside the subscription, an unknown provider name,
    average and marginal signals mixed in one plan.

    Parameters
    ----------
    provider
        The provider's configured name (``electricitymaps``, ``watttime``, ...).
    detail
        What is wrong and how to fix it.
    """

    def __init__(self, provider: str, detail: str) -> None:
        self.provider = provider
        self.detail = detail
        super().__init__(f"signal provider {provider!r}: {detail}")


class ProviderError(BackendError):
    """A signal provider answered, but not with usable data (HTTP 4xx/5xx, a malformed payload).

    Parameters
    ----------
    provider
        The provider's configured name.
    detail
        What happened (status, URL without credentials, attempts).
    status
        The HTTP status, when there was one.
    """

    def __init__(self, provider: str, detail: str, status: int | None = None) -> None:
        self.provider = provider
        self.detail = detail
        self.status = status
        super().__init__(f"signal provider {provider!r}: {detail}")


class ProviderUnavailableError(ProviderError):
    """A signal provider that cannot be reached, times out, or keeps answering 5xx/429."""


class BackendRejectedError(BackendError):
    """A scheduler backend refused a submission (invalid request, name taken by a foreign object).

    Parameters
    ----------
    backend
        The backend's name (``slurm:ontario``, ``kubernetes:us-east-ny/carbonsched``).
    key
        The dispatch key (job id and piece) of the refused submission.
    detail
        What the backend said.
    conflict
        True when the refusal is a name held by a foreign object (never overwritten).
    """

    def __init__(self, backend: str, key: str, detail: str, conflict: bool = False) -> None:
        self.backend = backend
        self.key = key
        self.detail = detail
        self.conflict = conflict
        super().__init__(f"{backend} refused {key}: {detail}")


class AdapterContractError(CarbonschedError, TypeError):
    """A dispatch adapter that breaks the contract, or a backend name the registry lacks."""


#: Install extras of pyproject.toml ``[project.optional-dependencies]`` and what each adds.
EXTRAS: dict[str, str] = {
    "service": "the REST API, /ui and the cron (carbonsched serve)",
    "slurm": "dispatch to Slurm (sbatch/squeue/sacct on PATH; no Python package)",
    "kubernetes": "dispatch to Kubernetes (the kubernetes client)",
    "dask": "replays on a Dask cluster (--executor dask)",
    "lightgbm": "the LightGBM day-ahead forecaster (opt-in candidate 'lgbm')",
    "report": "the replay plot and the report's XLSX format (matplotlib, openpyxl)",
    "entsoe": "the ENTSO-E Transparency Platform provider (entsoe-py)",
}

#: Top-level module -> the install extra that provides it (pyproject.toml
#: ``[project.optional-dependencies]``; ``[all]`` holds every one).
EXTRA_OF_MODULE: dict[str, str] = {
    "fastapi": "service", "starlette": "service", "uvicorn": "service",
    "apscheduler": "service", "prometheus_client": "service", "psycopg2": "service",
    "kubernetes": "kubernetes", "distributed": "dask", "dask": "dask",
    "lightgbm": "lightgbm", "matplotlib": "report", "openpyxl": "report",
    "entsoe": "entsoe",
}


class MissingExtraError(CarbonschedError, ImportError):
    """An optional part of carbonsched used without the install extra that provides it.

    Parameters
    ----------
    module
        The top-level module that could not be imported (e.g. ``fastapi``).
    extra
        The extra of pyproject.toml that installs it (e.g. ``service``).
    purpose
        What needed it, in words (e.g. ``carbonsched serve``).
    """

    def __init__(self, module: str, extra: str, purpose: str) -> None:
        self.module, self.extra, self.purpose = module, extra, purpose
        super().__init__(
            f"{purpose} needs the Python package {module!r}, which is not installed: install "
            f"the '{extra}' extra, e.g. `python3 -m pip install -c requirements/lock.txt -e "
            f"'.[{extra}]'` in a clone (or `pip install 'carbonsched[{extra}]'`); "
            "'.[all]' installs every extra", name=module)


def require_extra(module: str, purpose: str, extra: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra to install.

    Parameters
    ----------
    module
        Dotted module name (e.g. ``"kubernetes.client"``).
    purpose
        What needs it, as the user would name it (e.g. ``"--executor dask"``).
    extra
        The extra that installs it; ``None`` looks the top-level package up in
        :data:`EXTRA_OF_MODULE`.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingExtraError
        ``module`` (or a package it needs) is not installed; ``sys.modules[name] = None``
        counts as missing, as for the import statement.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or module).split(".")[0]
        raise missing_extra(missing if missing in EXTRA_OF_MODULE else module.split(".")[0],
                            purpose, extra) from exc


def missing_extra(module: str, purpose: str, extra: str | None = None) -> MissingExtraError:
    """The :class:`MissingExtraError` for a missing top-level ``module`` (not raised).

    ``extra`` defaults to :data:`EXTRA_OF_MODULE` of ``module``, else ``"all"``.
    """
    top = module.split(".")[0]
    return MissingExtraError(top, extra or EXTRA_OF_MODULE.get(top, "all"), purpose)
