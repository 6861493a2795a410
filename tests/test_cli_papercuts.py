"""Papercuts of the command line (issue 34, item 5): ``--version``, flags shown without a
``<bool>`` type in every ``--help``, ``serve --help`` naming its default host and port."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
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


@pytest.mark.parametrize("cell, numeric", [
    ("1,234.5", True), ("-0.3 %", True), ("12 / 3", True), ("3 / -", True), (".5", True),
    ("1.0e-5", True), ("0", True),
    ("e5", False), ("2026-12-07", False), ("abc12", False), ("x / 3", False), ("- / -", False),
    ("1,234.5 kg", False), (7, False),
    ("-", None), ("", None), ("  ", None), (None, None),
])
def test_a_table_cell_is_a_number_as_printed(cell, numeric):
    from carbonsched.cli.common import _numeric

    assert _numeric(cell) is numeric


def test_tables_put_numbers_on_the_right_and_titles_unpadded():
    """``cli.common.table``: a column of numbers only is right-aligned (``-`` and empty cells
    do not decide), text stays left, an explicit justify is kept, the title has no padding."""
    from rich.console import Console

    from carbonsched.cli.common import table

    t = table("name", "kg CO2e", "share", "placed / left", "id", title="T")
    t.add_column("note", justify="center")
    t.add_row("alpha", "1,234.5", "-", "12 / 3", "2026-12-07", "x")
    t.add_row("b", "7.0", "0.95 %", "1 / 0", "abc12", "y")
    con = Console(width=80, record=True)
    with con.capture() as cap:
        con.print(t)
    lines = cap.get().splitlines()
    assert lines[0] == "T"
    body = [ln for ln in lines if ln.startswith("│")]
    cells = [[c for c in ln.strip("│").split("│")] for ln in body]
    # numbers: right-aligned (the shorter value ends where the longer does)
    assert cells[0][1].rstrip() == " 1,234.5" and cells[1][1] == "     7.0 "
    assert cells[1][2].endswith("0.95 % ") and cells[0][2].endswith("     - ")
    assert cells[1][3].endswith(" 1 / 0 ")
    # text and dates stay left; the explicitly centred column stays centred
    assert cells[1][0].startswith(" b ") and cells[1][4].startswith(" abc12 ")
    assert [c.strip() for c in (cells[0][5], cells[1][5])] == ["x", "y"]


def test_serve_on_a_port_in_use_says_so_and_how_to_fix(tmp_path):
    """A port another process listens on is refused before anything starts: exit 2 and one
    line naming the fix (uvicorn alone says only 'address already in use', after start-up)."""
    import os
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "carbonsched.cli", "serve", "--port", str(port),
                            "--no-cron"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HOME": str(tmp_path),
                                "CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use (`ss -ltnp "
        f"'sport = :{port}'` names a process that holds it); pick another port with --port or "
        "CARBONSCHED_PORT")
    assert "Uvicorn running" not in r.stderr


def test_piped_output_is_one_physical_line_per_message():
    """Piped to a log, every message the commands print is one line (a log is read a line per
    message), on stdout and stderr; a table still wraps inside its cells at 150 columns."""
    code = ("from carbonsched.cli.common import out, err, table\n"
            "out.print('word ' * 60 + 'end-of-out')\n"
            "err.print('word ' * 60 + 'end-of-err')\n"
            "t = table('a', 'b'); t.add_row('x', 'cell ' * 60); out.print(t)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == ("word " * 60 + "end-of-out").rstrip()
    assert r.stderr.splitlines() == [("word " * 60 + "end-of-err").rstrip()]
    rows = [ln for ln in r.stdout.splitlines()[1:] if ln.startswith("│")]
    assert len(rows) >= 2 and max(len(ln) for ln in r.stdout.splitlines()[1:]) <= 150


def test_the_port_check_binds_as_uvicorn_does_per_address_family():
    """An IPv4 listener on 0.0.0.0:P does not hold [::]:P (asyncio binds IPv6 with
    IPV6_V6ONLY), so ``--host ::`` is not refused; the same IPv4 address is."""
    import socket

    from carbonsched.cli.service import _check_port_free
    from carbonsched.errors import InputError

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        try:
            _check_port_free("::", port)
        except InputError as exc:
            if "Cannot assign" in str(exc) or "not available" in str(exc):
                pytest.skip(f"IPv6 not configured: {exc}")
            raise
        with pytest.raises(InputError, match=rf"cannot listen on 0\.0\.0\.0:{port}: Address "
                                             "already in use"):
            _check_port_free("0.0.0.0", port)
