"""What every command shares: the consoles, the error-to-exit-code mapping, progress lines.

Every command prints errors as one line ``error: <what, where, how to fix>`` and exits 2 on bad
input, 3 when a backend (database, solver, scheduler) is unavailable, 1 on anything else.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from carbonsched.errors import (
    EXTRA_OF_MODULE,
    BackendUnavailableError,
    CarbonschedError,
    SolverUnavailableError,
    missing_extra,
    require_extra,
)

# piped to a file or a log: tables 150 columns wide (Rich falls back to 80 there) and every
# printed line of text one physical line (a log is read a line per message; tables still wrap
# inside their cells)
out = Console(width=None if sys.stdout.isatty() else 150, soft_wrap=not sys.stdout.isatty())
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150,
              soft_wrap=not sys.stderr.isatty())


def plain_flags(command: Any, info_name: str = "carbonsched") -> Any:
    """Clear the ``<bool>`` type of every flag under a Click ``command``, its ``--help`` too.

    Typer (0.29) prints ``<bool>`` after every flag in ``--help``, as if it took a value; a
    flag takes none.

    Walks the command tree Typer built (groups and their commands, depth first) and gives
    every flag parameter, including the help option Click adds per command, an empty metavar.
    Returns ``command``.
    """
    params = list(command.params)
    ctx = command.context_class(command, info_name=info_name)
    help_option = command.get_help_option(ctx)
    if help_option is not None:
        params.append(help_option)
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                plain_flags(sub, name)
    return command


class PlainFlagsGroup(TyperGroup):
    """The root command group: every flag under it is shown without ``<bool>`` in ``--help``.

    The sub-commands (and Click's ``--help`` option of each) are cleared by
    :func:`plain_flags` as the group hands them out, so the help is the same however the CLI
    is entered (console script, ``python -m carbonsched``, a test's ``CliRunner``).
    """

    def get_params(self, ctx: Any) -> list[Any]:  # noqa: D102 - Click's
        params = super().get_params(ctx)
        for param in params:     # its own --help and Typer's completion flags
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params

    def get_command(self, ctx: Any, cmd_name: str) -> Any:  # noqa: D102 - Click's
        command = super().get_command(ctx, cmd_name)
        return None if command is None else plain_flags(command, cmd_name)


def tomorrow(now: datetime | None = None) -> str:
    """The day after ``now`` (default: the machine's clock) in UTC, ``YYYY-MM-DD``."""
    return ((now or datetime.now(UTC)).astimezone(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")


@contextmanager
def errors() -> Iterator[None]:
    """Turn carbonsched's errors into one ``error:`` line and an exit code.

    2 for bad input (a missing file too; a setting out of range), 3 for a backend (database,
    solver, scheduler) that is unavailable, a database outage met outside the store's own calls
    included.
    """
    from pydantic import ValidationError

    try:
        yield
    except (SolverUnavailableError, BackendUnavailableError) as exc:
        print_error(str(exc))
        raise typer.Exit(3) from exc

    except CarbonschedError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    except ValidationError as exc:
        if exc.title != "Settings":
            raise
        # a CARBONSCHED_* variable or the config file out of range: bad input, said as such
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print_error(f"invalid settings (CARBONSCHED_* variables or CARBONSCHED_CONFIG): {msgs}")
        raise typer.Exit(2) from exc
    except FileNotFoundError as exc:
        print_error(f"file not found: {exc.filename}")
        raise typer.Exit(2) from exc
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in EXTRA_OF_MODULE:
            raise
        print_error(str(missing_extra(top, "this command")))
        raise typer.Exit(2) from exc
    except Exception as exc:
        # a database outage met outside the store's wrapped calls (the outbox's, a lease's
        # own sessions): a state with a message, like the store's StoreUnavailableError
        if not _database_outage(exc):
            raise
        orig = getattr(exc, "orig", None) or exc
        print_error(f"the database stopped answering: {' '.join(str(orig).split())[:300]}; "
                    "what was recorded before it stays recorded (dispatch's intents are "
                    "durable); run the command again once the database answers")
        raise typer.Exit(3) from exc


def _database_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLAlchemy's error for a database that cannot be reached.

    SQLAlchemy and the store are imported only when a command has failed.
    """
    if type(exc).__module__.split(".")[0] != "sqlalchemy":
        return False
    from carbonsched.store.service import is_outage

    return is_outage(exc)


#: The packages ``carbonsched serve`` imports (the ``service`` extra).
SERVICE_MODULES = ("fastapi", "uvicorn", "apscheduler", "prometheus_client")


def require_service_extra(purpose: str) -> None:
    """Refuse ``purpose`` with the extra to install when a package of ``[service]`` is missing.

    Raises
    ------
    MissingExtraError
        One of :data:`SERVICE_MODULES` cannot be imported.
    """
    for m in SERVICE_MODULES:
        require_extra(m, purpose, "service")


def print_error(text: str) -> None:
    """Print ``error: <text>`` on stderr: one physical line when stderr is not a terminal.

    A log or a script reads an error per line; on a terminal Rich wraps it to the width.
    """
    err.print(f"[bold red]error:[/] {escape(text)}", highlight=False,
              soft_wrap=not err.is_terminal)


@contextmanager
def status_line(label: str) -> Iterator[Callable[[str], None]]:
    """A Rich status line on stderr that long steps update."""
    with err.status(label) as status:
        def update(msg: str) -> None:
            status.update(f"{label}: {msg}")
            if not err.is_terminal:
                err.print(f"[dim]{label}: {msg}[/]", highlight=False)
        yield update


@contextmanager
def solver_chatter_to_stderr() -> Iterator[None]:
    """Send what native solver code writes to file descriptor 1 to stderr meanwhile.

    highspy prints its licence banner from C++ on the first call of every ``Highs`` instance,
    even with ``output_flag`` off (ERGO-Code/HiGHS issues #1932, #2749); stdout must carry only
    carbonsched's own output so that it can be piped.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON atomically (temporary file + rename, :mod:`carbonsched.fileio`)."""
    from carbonsched.fileio import atomic_write_text

    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")


_NUMBER = re.compile(r"^[+\-\u2212]?(\d[\d,]*(\.\d+)?|\.\d+)(e[+\-]?\d+)?\s?%?$", re.IGNORECASE)


def _numeric(cell: object) -> bool | None:
    """Whether ``cell`` is a number as the tables print one.

    True for ``1,234.5``, ``-0.3 %`` or ``12 / 3``; False for other text; None for an empty
    or ``-`` cell (it does not decide).
    """
    if cell is None:
        return None
    if not isinstance(cell, str):
        return False
    text = cell.strip()
    if text in ("", "-", "\u2014"):
        return None
    parts = [p.strip() for p in text.split(" / ")]
    return (any(p != "-" for p in parts)
            and all(p == "-" or _NUMBER.match(p) is not None for p in parts))


class _Table(Table):
    """:class:`rich.table.Table` whose columns of numbers only are right-aligned when shown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._numeric: dict[int, bool] = {}

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        """Add a row (:meth:`rich.table.Table.add_row`), noting which cells are numbers."""
        super().add_row(*renderables, **kwargs)
        for i, cell in enumerate(renderables):
            num = _numeric(cell)
            if num is not None:
                self._numeric[i] = self._numeric.get(i, True) and num

    def __rich_console__(self, console: Any, options: Any) -> Any:
        for i, col in enumerate(self.columns):
            if self._numeric.get(i) and col.justify == "left":
                col.justify = "right"
        yield from super().__rich_console__(console, options)


def table(*headers: str, title: str | None = None, **kwargs: Any) -> Table:
    """A Rich table as every command prints one: its title on the left, numbers on the right.

    Rich pads a left- or centre-justified title with spaces to the table's width, which leaves
    trailing spaces in logs and pasted output; ``title_justify="default"`` does not. A column
    whose every filled cell is a number (``1,234.5``, ``-0.3 %``, ``12 / 3``; ``-`` and empty
    cells do not count) and left-justified (Rich's default) is right-aligned.

    Parameters
    ----------
    *headers
        Column headers (:class:`rich.table.Table`'s ``*headers``).
    title
        The title line above the table, or ``None``.
    **kwargs
        Any other :class:`rich.table.Table` argument.
    """
    return _Table(*headers, title=title, title_justify="default", **kwargs)
