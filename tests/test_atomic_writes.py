"""Nothing half-written (issue 7, item 12): a kill -9 mid-write leaves the old file or the new one.

A real child process rewrites a large plan with the CLI's own writer in a loop over an existing
valid plan; it is killed with SIGKILL at random moments and the file must parse as one of the
complete documents every time. Before, ``Path.write_text`` left 0 bytes or half a plan.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from carbonsched.errors import InputError
from carbonsched.fileio import atomic_open, atomic_path, atomic_write_text

WRITER = r"""
import os, signal, sys, threading
from pathlib import Path
from carbonsched.cli.common import write_json as _write_json
path = Path(sys.argv[1])
# two large documents of the same length, cheap to encode: most of the time goes to writing
docs = [{"plan_id": f"p{k}", "notes": [chr(ord("a") + k) * 20_000_000]} for k in range(2)]
_write_json(path, docs[0])
full = path.stat().st_size
print("ready", flush=True)

def writer():
    k = 1
    while True:
        _write_json(path, docs[k % 2])
        k += 1

threading.Thread(target=writer, daemon=True).start()
# kill -9 at the worst moment: as soon as the plan file is seen incomplete (a writer that
# truncates and rewrites in place shows this within a few loops; an atomic one never does)
while True:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = -1
    if size != full:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_kill_9_mid_write_leaves_a_complete_plan(tmp_path):
    path = tmp_path / "plan.json"
    rng = random.Random(7)
    seen = []
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        try:                       # killed by itself if it ever saw the file incomplete
            proc.wait(timeout=rng.uniform(2.0, 4.0))
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        text = path.read_text()
        assert len(text) > 20_000_000, f"{len(text)} bytes left by the kill"
        doc = json.loads(text)                       # never truncated, never empty
        assert doc["plan_id"] in ("p0", "p1")
        assert doc["notes"][0] == ("a" if doc["plan_id"] == "p0" else "b") * 20_000_000
        seen.append(doc["plan_id"])
    # what a kill can leave is a hidden temporary file, never a damaged plan
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "plan.json"]
    assert all(n.startswith(".plan.json.") and n.endswith(".tmp") for n in leftovers)


def test_failure_mid_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(path) as fh:
        fh.write("half a pl")
        raise RuntimeError("killed")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_atomic_write_keeps_permissions_and_creates_folders(tmp_path):
    path = tmp_path / "a" / "b" / "plan.json"
    atomic_write_text(path, "one")
    assert path.read_text() == "one"
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    path.chmod(0o640)
    atomic_write_text(path, "two")
    assert path.read_text() == "two" and path.stat().st_mode & 0o777 == 0o640
    with atomic_path(tmp_path / "fig.png") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".fig.png.")
        tmp.write_bytes(b"png")
    assert (tmp_path / "fig.png").read_bytes() == b"png"


def test_unwritable_place_is_an_input_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match=r"afile/plan.json: cannot write here"):
        atomic_write_text(tmp_path / "afile" / "plan.json", "{}")


def test_cli_out_into_an_uncreatable_folder_is_exit_2(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from carbonsched.cli.app import app
    from carbonsched.config import get_settings

    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", f"sqlite:///{tmp_path}/s.db")
    get_settings.cache_clear()
    (tmp_path / "afile").write_text("x")
    r = CliRunner().invoke(app, ["plan", "--date", "2026-11-30", "--no-store", "--out",
                                 str(tmp_path / "afile" / "plan.json")])
    get_settings.cache_clear()
    assert r.exit_code == 2, r.output
    assert "cannot write here" in r.output and "Traceback" not in r.output


def test_workload_and_backtest_writers_are_atomic(tmp_path, monkeypatch):
    """Every file carbonsched writes goes through carbonsched.fileio (checked by failing it)."""
    import carbonsched.fileio as fileio
    from carbonsched.domain import Workload
    from carbonsched.workload.files import write_workload

    for name in ("w.json", "w.csv"):
        p = tmp_path / name
        p.write_text("old")
        real_replace = os.replace

        def no_rename(src, dst, _real=real_replace):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(fileio.os, "replace", no_rename)
        with pytest.raises(InputError, match="writing failed .*No space left on device.*the "
                                              "previous file, if any, is unchanged"):
            write_workload(Workload(jobs=[], inference=[]), p)
        monkeypatch.setattr(fileio.os, "replace", real_replace)
        assert p.read_text() == "old"
        assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".")) == []
    src = Path(__file__).resolve().parents[1]
    # no direct writes left in the package (all go through fileio)
    offenders = []
    for py in list((src / "carbonsched").rglob("*.py")) + [src / "forecasts" / "backtest.py"]:
        text = py.read_text()
        for needle in (".write_text(", ".savefig(path)", 'open("w"', ".to_csv(path"):
            if needle in text and py.name != "fileio.py":
                offenders.append(f"{py.name}: {needle}")
    assert offenders == []
