"""Load a script of ``bench/`` as a module (``bench/`` is not a package)."""

from __future__ import annotations

from types import ModuleType

from tests.scriptload import load_script


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py``, executed as a fresh module named ``name``."""
    return load_script(f"bench/{name}.py", name)
