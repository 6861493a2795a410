"""Run the ``carbonsched`` console script in-process, for tests/test_snapshots.py.

Run as ``python tests/snapshot_driver.py`` in a subprocess whose environment the test fixes
(terminal width, no colour, a fresh HOME, no ``CARBONSCHED_*`` variable). It reads a JSON request
on stdin and writes a JSON answer on stdout.

It imports no carbonsched module by name: it loads the installed ``carbonsched`` console-script
entry point, learns which command that entry point runs by watching the first call of a Typer
app (``typer.Typer.__call__``, turned into its command by ``typer.main.get_command``) or of a
Click command (``click.Command.__call__``; Typer 0.29 carries its own copy of Click, so a Typer
command is not a ``click.Command``), walks that command's tree (duck-typed: ``list_commands``
and ``get_command``), and runs every command
line through the entry point itself (``sys.argv`` set, ``SystemExit`` caught, stdout and stderr
captured), so the answers stay the same wherever the package layout puts the CLI.

Request: ``{"help": true, "cases": [["plan", "--hours", "0"], ...],
"files": {"name": "content", ...}}``; the files are written to the working directory first.
Answer: ``{"commands": [{"path": [...], "hidden": bool}], "help": [result, ...],
"cases": [result, ...]}`` with ``result = {"args": [...], "exit": int, "stdout": str,
"stderr": str}``; the working directory and HOME are replaced by ``<CWD>`` and ``<HOME>``,
trailing spaces are dropped from every line and trailing blank lines from the end.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import click
import typer
import typer.main


class _Found(Exception):
    """Raised by the spy once it has seen the root command."""


def entry_point() -> Any:
    """The callable of the installed ``carbonsched`` console script."""
    return entry_points(group="console_scripts")["carbonsched"].load()


def root_command(main: Any) -> Any:
    """The command object that the console script ``main`` runs (found without running it)."""
    seen: list[Any] = []
    original_click = click.Command.__call__
    original_typer = typer.Typer.__call__

    def click_spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(self)
        raise _Found

    def typer_spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(typer.main.get_command(self))
        raise _Found

    click.Command.__call__ = click_spy  # type: ignore[method-assign]
    typer.Typer.__call__ = typer_spy  # type: ignore[method-assign]
    argv = sys.argv
    sys.argv = ["carbonsched", "--help"]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main()
    except (_Found, SystemExit):
        pass
    finally:
        click.Command.__call__ = original_click  # type: ignore[method-assign]
        typer.Typer.__call__ = original_typer  # type: ignore[method-assign]
        sys.argv = argv
    if not seen:
        raise RuntimeError("the carbonsched entry point ran no Click command")
    return seen[0]


def walk(cmd: Any, path: list[str]) -> list[dict[str, Any]]:
    """Every command under ``cmd`` (itself first), depth first, sub-commands in listed order."""
    rows = [{"path": path, "hidden": bool(getattr(cmd, "hidden", False))}]
    if hasattr(cmd, "list_commands") and hasattr(cmd, "get_command"):
        ctx = cmd.context_class(cmd, info_name=path[-1] if path else "carbonsched")
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                rows.extend(walk(sub, [*path, name]))
    return rows


def normalise(text: str) -> str:
    """Trailing spaces and blank lines dropped, the machine-specific folders replaced."""
    for folder, mark in ((os.getcwd(), "<CWD>"), (os.environ.get("HOME", ""), "<HOME>")):
        if folder and folder != "/":
            text = text.replace(folder, mark)
    text = "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")
    return text + "\n" if text.strip() else ""


def run(main: Any, args: list[str]) -> dict[str, Any]:
    """Run the console script with ``args``; its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["carbonsched", *args]
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = argv
    if code is None:
        code = 0
    elif not isinstance(code, int):
        err.write(f"{code}\n")
        code = 1
    return {"args": args, "exit": code, "stdout": normalise(out.getvalue()),
            "stderr": normalise(err.getvalue())}


def main() -> None:
    """Answer the JSON request on stdin."""
    request = json.load(sys.stdin)
    for name, content in request.get("files", {}).items():
        Path(name).write_text(content)
    ep = entry_point()
    answer: dict[str, Any] = {}
    if request.get("help"):
        commands = walk(root_command(ep), [])
        answer["commands"] = commands
        answer["help"] = [run(ep, [*c["path"], "--help"]) for c in commands]
    answer["cases"] = [run(ep, list(args)) for args in request.get("cases", [])]
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
