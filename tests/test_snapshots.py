"""Snapshots of what users depend on: CLI help and exit codes, the API's OpenAPI surface, the plan
document's structure and the ``CARBONSCHED_*`` environment variables the code names.

The committed snapshots are under ``tests/snapshots/``. A change to any of them must be
deliberate: regenerate with

    CARBONSCHED_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py -p no:xdist

then review ``git diff tests/snapshots/`` and commit it with the change.

These tests import no module path that a package reshuffle may move: the CLI is reached through
the installed ``carbonsched`` console-script entry point (in-process by
``tests/snapshot_driver.py`` in one subprocess with a fixed environment, and once as the real
executable), the API through ``carbonsched.api.app.create_app``, whose settings class is taken
from its signature, and the environment-variable scan reads the folders that pyproject.toml maps
into the package.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
DRIVER = Path(__file__).resolve().parent / "snapshot_driver.py"
UPDATE_ENV = "CARBONSCHED_UPDATE_SNAPSHOTS"
UPDATING = os.environ.get(UPDATE_ENV, "") not in ("", "0")
HOW_TO_UPDATE = (f"If the change is deliberate, regenerate the snapshots with\n"
                 f"    {UPDATE_ENV}=1 python -m pytest tests/test_snapshots.py -p no:xdist\n"
                 f"then review `git diff tests/snapshots/` and commit it with the change.")
PLAN_DATE = "2023-07-15"
"""Fixed day of the plan run (the default catalog's modelled signals plan any day)."""

# ---------------------------------------------------------------------------- snapshot files


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _diff(expected: str, actual: str, name: str) -> str:
    lines = difflib.unified_diff(expected.splitlines(keepends=True),
                                 actual.splitlines(keepends=True),
                                 fromfile=f"{name} (committed)", tofile=f"{name} (now)", n=2)
    text = "".join(lines)
    return text if len(text) < 6000 else text[:6000] + "\n... (diff cut)\n"


def check_snapshot(path: Path, actual: str) -> None:
    """Compare ``actual`` with the committed snapshot ``path`` (or write it when updating)."""
    if UPDATING:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    if not path.is_file():
        pytest.fail(f"snapshot {_rel(path)} is missing.\n{HOW_TO_UPDATE}", pytrace=False)
    expected = path.read_text()
    if actual != expected:
        pytest.fail(f"{_rel(path)} differs from what the code gives now.\n{HOW_TO_UPDATE}\n\n"
                    + _diff(expected, actual, _rel(path)), pytrace=False)


def check_snapshot_dir(folder: Path, files: dict[str, str]) -> None:
    """Compare a folder of snapshot files as a whole (new, removed and changed files)."""
    if UPDATING:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.txt"):
            if old.name not in files:
                old.unlink()
        for name, text in files.items():
            (folder / name).write_text(text)
        return
    committed = {p.name for p in folder.glob("*.txt")} if folder.is_dir() else set()
    problems = []
    for name in sorted(committed - set(files)):
        problems.append(f"{_rel(folder / name)}: committed, but the code no longer gives it")
    for name in sorted(set(files) - committed):
        problems.append(f"{_rel(folder / name)}: new, not committed")
    for name in sorted(committed & set(files)):
        expected = (folder / name).read_text()
        if expected != files[name]:
            problems.append(_diff(expected, files[name], _rel(folder / name)))
    if problems:
        pytest.fail(f"{len(problems)} snapshot(s) under {_rel(folder)} differ from what the code "
                    f"gives now.\n{HOW_TO_UPDATE}\n\n" + "\n".join(problems)[:12000],
                    pytrace=False)


# ---------------------------------------------------------------------------- the CLI

ERROR_FILES = {
    "bad-field.json": json.dumps({"jobs": [{"id": "j1", "gpus": 1, "hours": 2}]}),
    "not-json.json": "{\"jobs\": [\n",
    "bad-rows.csv": "id,gpu_type,gpus,hours\nj1,H100,-3,2\n",
}
"""Workload files the error cases read (written to the driver's working directory)."""

ERROR_CASES: list[list[str]] = [
    # Click/Typer usage errors
    [],
    ["--no-such-option"],
    ["no-such-command"],
    ["plan", "--no-such-option"],
    ["plan", "--time-limit"],
    ["plan", "--hours", "many"],
    ["workload"],
    # `plan` options refused fast by the console script's precheck
    ["plan", "--date", "2023-13-01"],
    ["plan", "--date", "2023-7-15"],
    ["plan", "--date=tomorrow"],
    ["plan", "--solver", "gurobi"],
    ["plan", "--time-limit", "-5"],
    ["plan", "--time-limit", "0"],
    ["plan", "--time-limit", "nan"],
    ["plan", "--time-limit", "inf"],
    ["plan", "--time-limit", "soon"],
    ["plan", "--hours", "0"],
    ["plan", "--hours", "169"],
    ["plan", "--hours", "1.5"],
    # `plan` options refused inside the command, before any planning
    ["plan", "--no-store", "--slot-minutes", "7"],
    ["plan", "--no-store", "--rolling"],
    ["plan", "--no-store", "--dispatch", "--slot-minutes", "30"],
    ["plan", "--no-store", "--catalog", "no-such-catalog"],
    # workload files
    ["plan", "--no-store", "--jobs", "missing-jobs.json"],
    ["plan", "--no-store", "--jobs", "bad-field.json"],
    ["plan", "--no-store", "--jobs", "not-json.json"],
    ["plan", "--no-store", "--jobs", "bad-rows.csv"],
    # other commands
    ["catalog", "show", "no-such-catalog"],
]


def cli_env(home: Path) -> dict[str, str]:
    """A deterministic environment for the CLI: 100 columns, no colour, no CARBONSCHED_*."""
    drop = ("FORCE_COLOR", "PY_COLORS", "CLICOLOR", "CLICOLOR_FORCE", "GITHUB_ACTIONS",
            "TERMINAL_WIDTH", "COLUMNS", "LINES", "NO_COLOR", "TERM", "COLORTERM",
            "JUPYTER_COLUMNS", "JUPYTER_LINES", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
            "PYTHONSTARTUP")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("CARBONSCHED_", "TYPER_", "_TYPER_"))}
    env.update(COLUMNS="100", LINES="40", TERMINAL_WIDTH="100", NO_COLOR="1", TERM="dumb",
               _TYPER_FORCE_DISABLE_TERMINAL="1", HOME=str(home), OMP_NUM_THREADS="1",
               PYTHONIOENCODING="utf-8", LC_ALL="C.UTF-8", LANG="C.UTF-8")
    return env


def run_driver(request: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Run tests/snapshot_driver.py in a fresh working directory and HOME under ``tmp``."""
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    proc = subprocess.run([sys.executable, str(DRIVER)], input=json.dumps(request),
                          capture_output=True, text=True, cwd=work, env=cli_env(home),
                          timeout=300)
    assert proc.returncode == 0, f"the snapshot driver failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def cli_answers(tmp_path_factory) -> dict[str, Any]:
    """Every command's --help and every error case, from one driver process."""
    return run_driver({"help": True, "cases": ERROR_CASES, "files": ERROR_FILES},
                      tmp_path_factory.mktemp("snapshot-cli"))


def _help_file(path: list[str]) -> str:
    return ".".join(["carbonsched", *path]) + ".txt"


def test_cli_command_tree(cli_answers):
    lines = [" ".join(["carbonsched", *c["path"]]) + ("  (hidden)" if c["hidden"] else "")
             for c in cli_answers["commands"]]
    check_snapshot(SNAPSHOTS / "cli_commands.txt", "\n".join(lines) + "\n")


def test_cli_help(cli_answers):
    files = {}
    for r in cli_answers["help"]:
        name = _help_file(r["args"][:-1])
        assert r["exit"] == 0 and not r["stderr"], (name, r)
        files[name] = r["stdout"]
    check_snapshot_dir(SNAPSHOTS / "cli_help", files)


def _show_output(text: str, helps: dict[str, str]) -> str:
    """``text``, or which pinned --help output it is."""
    for name, help_text in helps.items():
        if text and text == help_text:
            return f"(the text of tests/snapshots/cli_help/{name})\n"
    return text


def test_cli_errors(cli_answers):
    helps = {_help_file(r["args"][:-1]): r["stdout"] for r in cli_answers["help"]}
    blocks = [f"# Exit codes and messages of representative failures (README: 0 success, 2 bad "
              f"input, 3 backend unavailable, 4 infeasible, 1 anything else).\n"
              f"# Workload files used: {json.dumps(ERROR_FILES)}\n"]
    for r in cli_answers["cases"]:
        blocks.append(f"$ {' '.join(['carbonsched', *r['args']])}\n"
                      f"exit code: {r['exit']}\n"
                      f"--- stdout\n{_show_output(r['stdout'], helps)}"
                      f"--- stderr\n{r['stderr']}")
    check_snapshot(SNAPSHOTS / "cli_errors.txt", "\n".join(blocks))
    # every representative failure here is a failure, and none is a crash (exit 1)
    bad = [(r["args"], r["exit"]) for r in cli_answers["cases"] if r["exit"] in (0, 1)]
    assert not bad, f"cases that should fail with a documented exit code: {bad}"


def _script() -> str:
    found = shutil.which("carbonsched", path=str(Path(sys.executable).parent))
    found = found or shutil.which("carbonsched")
    if not found:
        pytest.fail("the carbonsched console script is not installed (pip install -e .)",
                    pytrace=False)
    return found


def test_console_script_refuses_bad_plan_option(cli_answers, tmp_path):
    """The real executable gives the pinned exit code and message (the in-process cases run the
    same entry point; this checks the installed script is wired to it)."""
    args = ["plan", "--hours", "0"]
    pinned = next(r for r in cli_answers["cases"] if r["args"] == args)
    proc = subprocess.run([_script(), *args], capture_output=True, text=True, cwd=tmp_path,
                          env=cli_env(tmp_path), timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        pinned["exit"], pinned["stdout"], pinned["stderr"])


def test_cli_help_is_deterministic(cli_answers, tmp_path):
    """A second run elsewhere (other working directory and HOME) gives the same help text."""
    again = run_driver({"help": True}, tmp_path)
    assert again["commands"] == cli_answers["commands"]
    first = {tuple(r["args"]): r for r in cli_answers["help"]}
    for r in again["help"]:
        assert r == first[tuple(r["args"])], f"carbonsched {' '.join(r['args'])} changed"


# ---------------------------------------------------------------------------- the plan document


MODEL_MAPS = ("candidates", "validation_regret", "validation_score", "features")
"""Keys of the plan document whose objects are keyed by forecasting model name."""


def structure(value: Any, site_ids: frozenset[str] = frozenset(), key: str = "") -> Any:
    """The shape of a JSON value: objects by key, lists merged over all their elements.

    Scalars become their JSON type (``string``, ``number`` for int and float, ``boolean``,
    ``null``); a list becomes a one-element list of its elements' merged shape (``[]`` when
    empty); a key whose values differ in type across list elements reads e.g. ``"null|number"``.
    Objects keyed by data rather than by schema are merged the same way under one key: by site
    id (every key in ``site_ids``) as ``"<site>"``, by model name (under :data:`MODEL_MAPS`) as
    ``"<model>"``.
    """
    if isinstance(value, dict):
        shapes = {k: structure(v, site_ids, k) for k, v in sorted(value.items())}
        mark = ("<site>" if value and site_ids and set(value) <= site_ids
                else "<model>" if value and key in MODEL_MAPS else None)
        if mark is None:
            return shapes
        merged = None
        for shape in shapes.values():
            merged = shape if merged is None else _merge(merged, shape)
        return {mark: merged}
    if isinstance(value, list):
        if not value:
            return []
        merged = structure(value[0], site_ids)
        for item in value[1:]:
            merged = _merge(merged, structure(item, site_ids))
        return [merged]
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return "string"


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k))
                for k in sorted(set(a) | set(b))}
    if isinstance(a, list) and isinstance(b, list):
        if not a or not b:
            return a or b
        return [_merge(a[0], b[0])]
    if a == b:
        return a
    kinds = set()
    for x in (a, b):
        kinds.update(x.split("|") if isinstance(x, str) else [json.dumps(x, sort_keys=True)])
    return "|".join(sorted(kinds))


@pytest.fixture(scope="session")
def plan_document(tmp_path_factory) -> dict[str, Any]:
    """`carbonsched plan --no-store --out FILE` on the default catalog and demo day (~10 s)."""
    tmp = tmp_path_factory.mktemp("snapshot-plan")
    out = tmp / "plan.json"
    proc = subprocess.run([_script(), "plan", "--no-store", "--date", PLAN_DATE, "--out",
                           str(out)], capture_output=True, text=True, cwd=tmp,
                          env=cli_env(tmp), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_plan_document_structure(plan_document):
    sites = frozenset(s for s in plan_document.get("sites", []) if isinstance(s, str))
    assert sites, "the plan names no sites"
    check_snapshot(SNAPSHOTS / "plan_document_structure.json",
                   json.dumps(structure(plan_document, sites), indent=2) + "\n")


def test_structure_merges_lists_and_data_keyed_objects():
    assert structure({"b": [{"x": 1, "y": None}, {"x": 2.5, "y": "s", "z": True}], "a": []}) == {
        "a": [], "b": [{"x": "number", "y": "null|string", "z": "boolean"}]}
    doc = {"per_site": {"s1": {"v": 1}, "s2": {"v": None, "w": "x"}},
           "candidates": {"ols": 0.1, "naive": 0.2}, "other": {"s1": 1, "k": 2}}
    assert structure(doc, frozenset({"s1", "s2"})) == {
        "candidates": {"<model>": "number"}, "other": {"k": "number", "s1": "number"},
        "per_site": {"<site>": {"v": "null|number", "w": "string"}}}


# ---------------------------------------------------------------------------- the API

_NOISE = ("description", "summary", "example", "examples")


def _strip(doc: Any, names: bool = False) -> Any:
    """``doc`` without prose and examples (they churn; the shapes are what clients use).

    ``names``: ``doc`` maps names to schemas (``properties``, ``schemas``), so its keys stay.
    """
    if isinstance(doc, dict):
        return {k: _strip(v, names=not names and k in ("properties", "schemas"))
                for k, v in doc.items() if names or k not in _NOISE}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    from carbonsched.api.app import create_app

    settings_class = typing.get_type_hints(create_app)["settings"]
    return create_app(settings_class.model_construct()).openapi()


def test_openapi_operations(openapi):
    ops = []
    for path, methods in openapi["paths"].items():
        for method, op in methods.items():
            ops.append(f"{method.upper():6} {path}  {op.get('operationId')}  "
                       f"[{', '.join(op.get('tags', []))}]")
    components = openapi.get("components", {})
    text = ("# method path operationId [tags]\n" + "\n".join(sorted(ops)) + "\n\n"
            "# component schemas\n" + "\n".join(sorted(components.get("schemas", {}))) + "\n\n"
            "# security schemes\n" + "\n".join(sorted(components.get("securitySchemes", {})))
            + "\n")
    check_snapshot(SNAPSHOTS / "openapi_operations.txt", text)


def test_openapi_bodies(openapi):
    """Parameters, request and response bodies of every route, and the component schemas, less
    descriptions, summaries and examples."""
    routes = {}
    for path, methods in openapi["paths"].items():
        for method, op in methods.items():
            routes[f"{method.upper()} {path}"] = _strip({
                k: op[k] for k in ("operationId", "parameters", "requestBody", "responses",
                                   "security") if k in op})
    doc = {"openapi": openapi.get("openapi"), "routes": routes,
           "components": _strip(openapi.get("components", {}))}
    check_snapshot(SNAPSHOTS / "openapi_bodies.json",
                   json.dumps(doc, indent=1, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------- environment variables

ENV_NAME = re.compile(r"CARBONSCHED_[A-Z0-9_]+")


def source_folders() -> list[Path]:
    """The folders pyproject.toml maps into the package, and scripts/."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = pyproject["tool"]["setuptools"].get("package-dir", {}).values()
    folders = {ROOT / (d or ".") for d in mapped} | {ROOT / "scripts"}
    return sorted(f for f in folders if f.is_dir())


def _settings_names(tree: ast.AST) -> set[str]:
    """``CARBONSCHED_<FIELD>`` of pydantic-settings classes with that ``env_prefix``."""
    names = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        prefix = None
        for stmt in cls.body:
            if (isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "model_config" for t in stmt.targets)
                    and isinstance(stmt.value, ast.Call)):
                for kw in stmt.value.keywords:
                    if kw.arg == "env_prefix" and isinstance(kw.value, ast.Constant):
                        prefix = kw.value.value
        if not (isinstance(prefix, str) and prefix.startswith("CARBONSCHED_")):
            continue
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            field = stmt.target.id
            if field.startswith("_") or field == "model_config":
                continue
            aliased = isinstance(stmt.value, ast.Call) and any(
                kw.arg in ("validation_alias", "alias") for kw in stmt.value.keywords)
            if not aliased:  # an aliased field reads its alias names (string literals)
                names.add(prefix + field.upper())
    return names


DOCUMENTERS = {"configuration_md.py"}
"""Scripts that name every variable to document it (docs/configuration.md); they read none."""


def scan_env_names() -> dict[str, set[str]]:
    """Each ``CARBONSCHED_*`` name found, with how: ``literal`` (a Python string literal),
    ``settings`` (a pydantic-settings field under ``env_prefix="CARBONSCHED_"``) or ``shell``
    (a shell script in scripts/)."""
    found: dict[str, set[str]] = {}
    for folder in source_folders():
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.name in DOCUMENTERS:
                continue
            if path.suffix == ".py":
                tree = ast.parse(path.read_text(), filename=str(path))
                for node in ast.walk(tree):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str):
                        for name in ENV_NAME.findall(node.value):
                            found.setdefault(name, set()).add("literal")
                for name in _settings_names(tree):
                    found.setdefault(name, set()).add("settings")
            elif folder.name == "scripts" and (path.suffix == ".sh" or path.read_bytes()
                                               .startswith(b"#!")):
                for line in path.read_text().splitlines():
                    if not line.lstrip().startswith("#"):
                        for name in ENV_NAME.findall(line):
                            found.setdefault(name, set()).add("shell")
    return found


def test_environment_variable_names():
    found = scan_env_names()
    width = max(map(len, found), default=0)
    lines = [f"{name:{width}}  {', '.join(sorted(kinds))}" for name, kinds in sorted(found.items())]
    check_snapshot(SNAPSHOTS / "env_vars.txt",
                   "# CARBONSCHED_* names in the source: literal = a Python string literal, "
                   "settings = a pydantic-settings field, shell = a shell script in scripts/\n"
                   + "\n".join(lines) + "\n")
