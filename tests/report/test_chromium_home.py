"""Headless Chromium as the suite runs it leaves the user's HOME as it found it."""

from __future__ import annotations

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
