"""The service start-up scripts parse: a broken one fails the test command before any test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.sh")) + [
    Path(__file__).resolve().parents[1] / "scripts" / "test",
    Path(__file__).resolve().parents[1] / ".ci" / "run"]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_shell_script_parses(script: Path) -> None:
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, f"{script}: {r.stderr}"


def test_a_broken_script_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("f() {\n  echo unclosed\n")
    r = subprocess.run(["bash", "-n", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "unexpected end of file" in r.stderr
