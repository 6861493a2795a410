"""Papercuts of the command line (issue 34, item 5): ``--version``, flags shown without a
``<bool>`` type in every ``--help``, ``serve --help`` naming its default host and port."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import typer.main
from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.config import Settings

runner = CliRunner()


def _paths(cmd, path: list[str]) -> list[list[str]]:
    rows = [path]
    if hasattr(cmd, "list_commands"):
        ctx = cmd.context_class(cmd, info_name=path[-1] if path else "carbonsched")
        for name in cmd.list_commands(ctx):
            rows.extend(_paths(cmd.get_command(ctx, name), [*path, name]))
    return rows


def test_version_prints_the_installed_version():
    r = subprocess.run([sys.executable, "-m", "carbonsched.cli", "--version"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"carbonsched {version('carbonsched')}"


def test_no_flag_in_any_help_shows_a_bool_type():
    paths = _paths(typer.main.get_command(app), [])
    assert len(paths) > 20 and ["plans", "show"] in paths
    for path in paths:
        r = runner.invoke(app, [*path, "--help"], terminal_width=120)
        assert r.exit_code == 0, (path, r.output)
        assert "--help" in r.output
        assert "<bool>" not in r.output, (path, r.output)
    # a flag that takes a value keeps its type
    r = runner.invoke(app, ["plan", "--help"], terminal_width=120)
    assert "<int>" in r.output and "<float>" in r.output


def test_serve_help_names_its_default_host_and_port():
    r = runner.invoke(app, ["serve", "--help"], terminal_width=200)
    text = " ".join(r.output.split())
    host, port = Settings.model_fields["host"].default, Settings.model_fields["port"].default
    assert f"[default: {host}]" in text and f"[default: {port}]" in text
    assert (host, port) == ("127.0.0.1", 8080)
