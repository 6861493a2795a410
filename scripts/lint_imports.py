"""Check the import-linter contracts of pyproject.toml ([tool.importlinter]) on this checkout.

carbonsched maps the root folders ``forecasts/``, ``adapters/``, ``regions/`` and ``data/`` into
the package (pyproject's ``package-dir``); import-linter reads a package from one folder. This
script lays the package out as an installed wheel would (a folder of symbolic links) in a
temporary directory and runs ``lint-imports`` on it, so the contracts see every stage.

Run (repository root)::

    python3 scripts/lint_imports.py

Exit status: import-linter's (0 when every contract is kept).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_tree(dest: Path) -> Path:
    """Lay out ``carbonsched`` under ``dest`` as installed: one folder, mapped folders linked in."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping = cfg["tool"]["setuptools"]["package-dir"]
    pkg = dest / "carbonsched"
    pkg.mkdir()
    for entry in (ROOT / mapping["carbonsched"]).iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        if name != "carbonsched":
            (pkg / name.split(".", 1)[1]).symlink_to(ROOT / folder)
    return dest


def main() -> int:
    """Run ``lint-imports`` on the laid-out package; return its exit status."""
    with tempfile.TemporaryDirectory(prefix="carbonsched-imports-") as tmp:
        package_tree(Path(tmp))
        env = dict(os.environ, PYTHONPATH=tmp)
        cmd = [sys.executable, "-c", "import sys; from importlinter.cli import "
               "lint_imports_command as c; sys.exit(c())", "--config", str(ROOT / "pyproject.toml"),
               "--no-cache"]
        return subprocess.run(cmd, cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
