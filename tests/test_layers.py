"""The package's architecture as a checked contract.

The stages (pyproject.toml ``[tool.importlinter]``) let the data flow run down only, with no
import cycle between the modules of any package, function-level imports included; and no module
takes a private name (``_x``) from another module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_FOLDERS = ("carbonsched", "forecasts", "adapters")


def test_import_contracts_are_kept():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "lint_imports.py")],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in run.stdout


def private_imports(folder: Path) -> list[str]:
    """``from carbonsched.x import _name`` statements under ``folder`` (path:line: statement)."""
    hits = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("carbonsched")):
                hits += [f"{path}:{node.lineno}: from {node.module} import {a.name}"
                         for a in node.names
                         if a.name.startswith("_") and not a.name.startswith("__")]
    return hits


def test_no_module_imports_a_private_name_of_another():
    hits = [h for folder in SOURCE_FOLDERS for h in private_imports(ROOT / folder)]
    assert not hits, "private names imported across modules:\n" + "\n".join(hits)


def test_the_private_import_check_finds_one(tmp_path):
    (tmp_path / "a.py").write_text("from carbonsched.plan.sets import _hidden\n"
                                   "from carbonsched.plan.sets import public, __version__\n")
    assert private_imports(tmp_path) == [
        f"{tmp_path / 'a.py'}:1: from carbonsched.plan.sets import _hidden"]


def test_the_layer_contract_catches_an_upward_import(tmp_path, monkeypatch):
    """A kernel module importing the CLI breaks the stages contract (run on a copy)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import lint_imports
    finally:
        sys.path.pop(0)
    tree = lint_imports.package_tree(tmp_path)
    units = tree / "carbonsched" / "units.py"
    text = units.read_text()
    units.unlink()
    units.write_text(text + "\nfrom carbonsched.cli import common  # noqa: E402,F401\n")
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command "
         "as c; sys.exit(c())", "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path),
                                                           "PATH": "/usr/bin:/bin"})
    assert run.returncode == 1, run.stdout
    assert "carbonsched.units -> carbonsched.cli.common" in run.stdout
