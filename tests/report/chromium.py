"""Open an HTML file in Debian's headless Chromium: the DOM after load and a screenshot."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chromium() -> str:
    """The Chromium binary (``$CARBONSCHED_CHROMIUM`` or ``chromium`` on the PATH)."""
    exe = os.environ.get("CARBONSCHED_CHROMIUM") or shutil.which("chromium")
    if not exe:
        pytest.fail("Debian's chromium is not installed: run the test command (bash scripts/test)"
                    " or `source scripts/services.sh && start_chromium` as root")
    return exe


def chromium_env(profile: str) -> dict[str, str]:
    """The environment with TMPDIR, HOME and the XDG directories in the profile.

    A browser that is killed (a timeout) leaves its ``org.chromium.Chromium.*`` in TMPDIR, and
    every run writes ``~/.config/chromium/Crash Reports`` and ``~/.cache/dconf`` whatever its
    ``--user-data-dir``: in the profile they go with it, and the suite leaves the user's HOME
    as it found it.
    """
    return {**os.environ, "TMPDIR": profile, "HOME": profile,
            "XDG_CONFIG_HOME": os.path.join(profile, ".config"),
            "XDG_CACHE_HOME": os.path.join(profile, ".cache")}


def open_page(html: Path, screenshot: Path, width: int = 1200, height: int = 4000
              ) -> str:
    """Load ``html`` as a person would (file URL); return the DOM and write a PNG screenshot."""
    url = html.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="carbonsched-chromium-") as profile:
        base = [chromium(), *FLAGS, f"--user-data-dir={profile}"]
        dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                             timeout=180, check=True, env=chromium_env(profile)).stdout
    for attempt in (1, 2):
        # headless Chromium can stall on a loaded machine; one retry with a fresh profile
        with tempfile.TemporaryDirectory(prefix="carbonsched-chromium-") as profile:
            base = [chromium(), *FLAGS, f"--user-data-dir={profile}"]
            try:
                subprocess.run([*base, f"--screenshot={screenshot.resolve()}",
                                f"--window-size={width},{height}", url], capture_output=True,
                               timeout=180, check=True, env=chromium_env(profile))
                break
            except subprocess.TimeoutExpired:
                if attempt == 2:
                    raise
    return dom


def artefact_dir(name: str) -> Path:
    """``test-artifacts/<name>/`` at the repository root (ignored by git), created."""
    d = Path(__file__).resolve().parents[2] / "test-artifacts" / name
    d.mkdir(parents=True, exist_ok=True)
    return d
