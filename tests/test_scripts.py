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


def test_services_find_the_sbin_tools_from_a_path_without_sbin(tmp_path: Path) -> None:
    """A login shell's PATH may lack /usr/sbin (runuser, slurmctld, slurmd live there): a fresh
    user's `bash scripts/test` failed at `runuser: command not found`."""
    services = Path(__file__).resolve().parents[1] / "scripts" / "services.sh"
    r = subprocess.run(
        ["bash", "-c", f'source "{services}"; command -v runuser; '
         'rm -rf "$CARBONSCHED_SERVICES_DIR"'],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             "CARBONSCHED_SERVICES_DIR": str(tmp_path / "services")},
        capture_output=True, text=True)
    if not Path("/usr/sbin/runuser").exists():
        pytest.skip("no /usr/sbin/runuser on this machine")
    assert r.returncode == 0 and r.stdout.strip() == "/usr/sbin/runuser", (r.stdout, r.stderr)
