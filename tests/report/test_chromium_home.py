"""Headless Chromium and matplotlib as the suite runs them leave the user's HOME as it found it."""

from __future__ import annotations

import os
import subprocess
import sys

from .chromium import open_page


def test_chromium_writes_nothing_into_home(tmp_path, monkeypatch) -> None:
    # Chromium wrote ~/.config/chromium/Crash Reports and ~/.cache/dconf whatever its
    # --user-data-dir, so every test run left them in the user's HOME
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    page = tmp_path / "page.html"
    page.write_text("<!doctype html><title>t</title><p id='x'>carbonsched</p>")
    dom = open_page(page, tmp_path / "page.png", width=400, height=300)
    assert "carbonsched" in dom
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []


def test_matplotlib_in_the_suite_writes_nothing_into_home(tmp_path) -> None:
    # matplotlib wrote its font list to ~/.cache/matplotlib the first time a test drew the
    # replay's plot; the suite's MPLCONFIGDIR (tests/conftest.py) reaches the processes it
    # starts, as it reaches the tests
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(home)
    code = ("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; "
            "fig = plt.figure(); fig.text(0.5, 0.5, 'carbonsched'); "
            f"fig.savefig({str(tmp_path / 'plot.png')!r})")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    assert (tmp_path / "plot.png").stat().st_size > 0
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
