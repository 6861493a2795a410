"""Drive Debian's headless Chromium over the DevTools protocol (CDP) from a test.

Unlike ``--dump-dom``, a CDP session can send a bearer token with every request of a page
(``Network.setExtraHTTPHeaders``) and hears what a person's console would show: console
errors, uncaught exceptions and failed loads (``Log.entryAdded``, ``Runtime.*``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from websockets.sync.client import connect

from tests.report.chromium import FLAGS, chromium, chromium_env


@dataclass
class Loaded:
    """A page after its load event."""

    status: int
    dom: str
    console_errors: list[str] = field(default_factory=list)
    value: object = None  # what ``evaluate`` returned (by value)


def open_with_headers(url: str, headers: dict[str, str], screenshot: Path,
                      width: int = 1200, timeout: float = 180.0,
                      evaluate: str | None = None) -> Loaded:
    """Load ``url`` with ``headers`` on every request; return DOM, status and console errors.

    ``evaluate``: a JavaScript expression evaluated after the load (layout measurements); its
    value is ``Loaded.value``. Writes a full-page PNG to ``screenshot``. ``timeout`` is a
    generous deadline for a loaded machine, not a budget the page must meet.
    """
    with _profile() as profile:
        # TMPDIR in the profile: a browser ended by a signal leaves files there
        proc = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}",
                                 "--remote-debugging-port=0", f"--window-size={width},1000",
                                 "about:blank"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=chromium_env(profile))
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.exists() and port_file.read_text().strip()):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("chromium did not open its DevTools port")
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=30).json()
            ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            with connect(ws_url, max_size=None, open_timeout=timeout) as ws:
                return _drive(ws, url, headers, screenshot, deadline, evaluate)
        finally:
            _close(port_file)
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@contextlib.contextmanager
def _profile() -> Iterator[str]:
    """A throw-away Chromium profile directory, removed even if a helper still writes to it.

    Chromium's helper processes (the network service) can outlive the browser by a moment and
    write a file into the profile while it is being removed, which left the directory behind in
    ``TMPDIR``; removal is retried until the directory is gone (a generous 30 s, then an error).
    """
    profile = tempfile.mkdtemp(prefix="carbonsched-cdp-")
    try:
        yield profile
    finally:
        deadline = time.monotonic() + 30.0
        while True:
            shutil.rmtree(profile, ignore_errors=True)
            if not os.path.exists(profile):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not remove the Chromium profile {profile}")
            time.sleep(0.2)


def _close(port_file: Path) -> None:
    """Ask the browser to quit (its helpers end with it), if it opened its port."""
    try:
        text = port_file.read_text().split()
        version = httpx.get(f"http://127.0.0.1:{text[0]}/json/version", timeout=10).json()
        with connect(version["webSocketDebuggerUrl"], open_timeout=10) as ws:
            ws.send(json.dumps({"id": 1, "method": "Browser.close"}))
            ws.recv(timeout=10)
    except Exception:  # noqa: BLE001 - best effort; terminate() follows
        pass


def _drive(ws, url: str, headers: dict[str, str], screenshot: Path,  # noqa: ANN001
           deadline: float, evaluate: str | None = None) -> Loaded:
    ids = iter(range(1, 10_000))
    errors: list[str] = []
    status = {"code": 0}

    def call(method: str, **params) -> dict:
        mid = next(ids)
        ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = event(deadline)
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def event(until: float) -> dict:
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from chromium")
        msg = json.loads(ws.recv(timeout=left))
        m, p = msg.get("method"), msg.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                 for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            errors.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            errors.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url', '')})")
        elif m == "Network.loadingFailed":
            errors.append(f"load failed: {p.get('errorText')}")
        elif m == "Network.responseReceived" and p.get("type") == "Document":
            status["code"] = p["response"]["status"]
        return msg

    for domain in ("Page", "Runtime", "Log", "Network"):
        call(f"{domain}.enable")
    call("Network.setExtraHTTPHeaders", headers=headers)
    call("Page.navigate", url=url)
    while event(deadline).get("method") != "Page.loadEventFired":
        pass
    # let late console messages arrive (a short settle, not a budget the page must meet)
    settle = time.monotonic() + 1.0
    try:
        while True:
            event(settle)
    except TimeoutError:
        pass
    dom = call("Runtime.evaluate", expression="document.documentElement.outerHTML",
               returnByValue=True)["result"]["value"]
    value = None if evaluate is None else call(
        "Runtime.evaluate", expression=evaluate, returnByValue=True)["result"].get("value")
    shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    return Loaded(status["code"], dom, errors, value)
