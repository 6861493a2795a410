"""The README's tour (issue 33 item 5) runs as written: real data -> a replayed plan -> dispatch
to the local clusters -> status -> the report, each line a command that exits 0."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UP = 'eval "$(bash scripts/services.sh up global)"'
DOWN = "bash scripts/services.sh down"


def tour_block(path: Path, title: str) -> list[str]:
    """The lines of the first ``bash`` block under ``title`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    section = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert section, f"{path.name}: no '## {title}' section"
    block = re.search(r"^```bash\n(.*?)^```", section.group(1), flags=re.M | re.S)
    assert block, f"{path.name}: no bash block under '## {title}'"
    return block.group(1).splitlines()


def command(line: str) -> str:
    """The line without its trailing comment."""
    return re.sub(r"\s+#\s.*$", "", line).strip()


def test_the_readme_and_the_tour_page_show_the_same_commands():
    lines = tour_block(ROOT / "README.md", "A tour")
    assert lines == tour_block(ROOT / "docs" / "tour.md", "The commands")
    assert command(lines[1]) == UP and command(lines[-1]) == DOWN
    assert any("--replay-from" in ln for ln in lines)


def test_services_sh_as_a_command_says_how_to_use_it(tmp_path):
    """``up``/``down`` exist; ``down`` with nothing up stops nothing (no root needed)."""
    env = {**os.environ, "CARBONSCHED_SERVICES_DIR": str(tmp_path / "svc")}
    r = subprocess.run(["bash", "scripts/services.sh"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert "usage: bash scripts/services.sh up [CATALOG] | down" in r.stderr
    r = subprocess.run(["bash", "scripts/services.sh", "down"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "nothing to stop" in r.stderr and r.stdout == ""


@pytest.mark.slurm
@pytest.mark.kube_emulator
@pytest.mark.shared_data
def test_the_tour_runs_as_written(tmp_path, slurm_dir, emulator_kubeconfig, shared_data):
    """Each line in one shell, in a fresh folder with a store of its own; the suite's clusters
    (started by scripts/test from the same ``services.sh``) stand in for ``up``/``down``."""
    lines = tour_block(ROOT / "README.md", "A tour")
    script = ["set -e"]
    for ln in map(command, lines):
        if ln == UP:
            ln = (f"export CARBONSCHED_SLURM_CONF_DIR={shlex.quote(str(slurm_dir))} "
                  f"CARBONSCHED_KUBECONFIG={shlex.quote(str(emulator_kubeconfig))}")
        elif ln == DOWN:
            continue
        ln = ln.replace("../shared/data", shlex.quote(str(shared_data)))
        script += [f"echo +++ {shlex.quote(ln)}", ln]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}", "COLUMNS": "200"}
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    out = " ".join(r.stdout.split())
    jobs = json.loads((tmp_path / "day.json").read_text())["jobs"]
    n = len(jobs)
    assert "signals: REPLAYED - the real signals (estimated) and work of Saturday 2023-07-15" in out
    assert f"placed {n} jobs, 0 unplaced" in out
    # dispatched (or, on clusters that hold them from an earlier run, found by key): none late
    assert "deadline_passed" not in r.stderr and "nothing submitted" not in r.stderr
    assert f"{n} jobs: {n} Dispatched" in out
    assert "note: REPLAYED: the 1 plan(s) of this report" in " ".join(r.stderr.split())
    assert (tmp_path / "report.html").read_text(encoding="utf-8").count("REPLAYED") >= 1
