"""Load a script of ``bench/`` or ``scripts/`` as a module (neither folder is a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str, name: str | None = None, register: bool = False) -> ModuleType:
    """``ROOT/<relpath>``, executed as a fresh module.

    Parameters
    ----------
    relpath
        The script's path from the repository root, e.g. ``"scripts/slurm_conf.py"``.
    name
        The module's name; default the file's stem.
    register
        Put the module in ``sys.modules`` before executing it: a script that defines
        dataclasses needs it (they look their module up while being defined).

    Returns
    -------
    types.ModuleType
        The executed module.
    """
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
