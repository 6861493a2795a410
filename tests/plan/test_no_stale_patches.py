"""A test's ``monkeypatch.setattr(module, "name", ...)`` must patch a name its module reads.

Patching a module attribute only changes what the code sees when that module looks the name
up itself: a constant moved into an options object, or a function another module imported
by name, leaves the patch with no effect and the test proving nothing. Every such call under
``tests/`` whose target is a ``carbonsched`` module is checked: the module's own source must
load the name somewhere other than where it defines (or imports) it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import types
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → dotted module path, for every import in the file (any scope)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _patches(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of the file's ``monkeypatch.setattr(<module>, "<name>", ...)``."""
    tree = ast.parse(path.read_text())
    alias = _aliases(tree)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setattr" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "monkeypatch" and len(node.args) >= 2):
            continue
        target, name = node.args[0], node.args[1]
        if not (isinstance(target, ast.Name) and isinstance(name, ast.Constant)
                and isinstance(name.value, str)):
            continue
        dotted = alias.get(target.id)
        if dotted and dotted.startswith("carbonsched"):
            out.append((node.lineno, dotted, name.value))
    return out


def _module(dotted: str) -> types.ModuleType | None:
    """The module ``dotted`` names, or None when it names something else (a class)."""
    try:
        if importlib.util.find_spec(dotted) is None:
            return None
    except ModuleNotFoundError:          # a name inside a module (its parent is no package)
        return None
    mod = importlib.import_module(dotted)
    return mod if isinstance(mod, types.ModuleType) else None


def reads(source: str, name: str) -> bool:
    """Whether ``source`` loads ``name`` (a bare name in load context), not only defines it."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for n in ast.walk(ast.parse(source)))


def _stale() -> list[str]:
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for line, dotted, name in _patches(path):
            mod = _module(dotted)
            if mod is None or mod.__file__ is None:
                continue
            if not reads(Path(mod.__file__).read_text(), name):
                found.append(f"{path.relative_to(TESTS)}:{line}: {dotted}.{name} is never "
                             f"read by {dotted}")
    return found


def test_every_monkeypatched_module_attribute_is_read_by_its_module():
    assert _stale() == []


def test_the_check_finds_a_patch_that_cannot_take_effect(tmp_path):
    # a re-export (the package's __init__ imports the name, never calls it) and a definition
    # read nowhere do not count; a call does
    assert not reads("from x import f\n__all__ = ['f']\n", "f")
    assert not reads("LIMIT = 3\n", "LIMIT")
    assert reads("def f():\n    pass\n\n\ndef g():\n    return f()\n", "f")
    case = tmp_path / "test_case.py"
    case.write_text("from carbonsched.plan import solve as solve_mod\n\n\n"
                    "def test_x(monkeypatch):\n"
                    "    monkeypatch.setattr(solve_mod, 'AUTO_MILP_MAX_OPTIONS', 0)\n"
                    "    monkeypatch.setattr(solve_mod, 'ABS_GAP_KG', 0.0)\n")
    found = _patches(case)
    assert found == [(5, "carbonsched.plan.solve", "AUTO_MILP_MAX_OPTIONS"),
                     (6, "carbonsched.plan.solve", "ABS_GAP_KG")]
    source = Path(_module("carbonsched.plan.solve").__file__).read_text()
    assert [reads(source, name) for _, _, name in found] == [True, False]
