"""What every command shares: the consoles, the error-to-exit-code mapping, progress lines.

Every command prints errors as one line ``error: <what, where, how to fix>`` and exits 2 on bad
input, 3 when a backend (database, solver, scheduler) is unavailable, 1 on anything else.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from carbonsched.errors import (
    BackendUnavailableError,
    CarbonschedError,
    SolverUnavailableError,
)

# wide tables when piped to a file or a log (Rich falls back to 80 columns there)
out = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)

def tomorrow() -> str:
    """Tomorrow's date in UTC, ``YYYY-MM-DD``."""
    return (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")


@contextmanager
def errors() -> Iterator[None]:
    """Turn carbonsched's errors into one ``error:`` line and an exit code.

    2 for bad input (a missing file too), 3 for a backend (database, solver, scheduler) that is
    unavailable.
    """
    try:
        yield
    except (SolverUnavailableError, BackendUnavailableError) as exc:
        print_error(str(exc))
        raise typer.Exit(3) from exc
    except CarbonschedError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    except FileNotFoundError as exc:
        print_error(f"file not found: {exc.filename}")
        raise typer.Exit(2) from exc


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


