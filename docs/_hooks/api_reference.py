"""Build-time pages of the docs site: the API reference and the catalog schema.

The API reference is generated from the installed ``carbonsched`` package at every build, so moving
a module never leaves a page pointing at a path that no longer exists: one page per top-level
module or subpackage of ``carbonsched`` (``reference/carbonsched.<name>.md`` holding
``::: carbonsched.<name>``; a subpackage's page lists its submodules too), found with ``pkgutil``.

``pyproject.toml`` maps folders outside ``carbonsched/`` into the package (``forecasts/`` is
``carbonsched.forecasts``). The import system follows that mapping (the editable install's finder
holds it as ``MAPPING``), but griffe's static loader looks for ``carbonsched/forecasts/`` on disk.
So the hook lays out the package as the import system sees it, one symlink per entry in a temporary
folder, and points the mkdocstrings python handler at that folder: a regular (wheel) install and an
editable one give the same pages.

``regions/schema.md`` is package data outside ``docs/``; it is published as ``catalog-schema.md``
(its bracketed citations escaped so that Markdown does not read them as links).

Docstrings that griffe's numpy parser warns about (the build runs with ``warn_unknown_params`` and
``warn_missing_types`` off, see ``mkdocs.yml``): ``forecasts/green_surplus.py``, the class docstring
of ``GreenSurplusForecaster`` documents ``**params``, which its ``__init__`` does not take;
``forecasts/baselines.py``, ``SeasonalNaive`` and ``Climatology`` end their Parameters section with
a "Source: ..." line, parsed as a parameter named ``Source`` (a Notes or References section would
hold it).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import sys
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

PACKAGE = "carbonsched"
REFERENCE_DIR = "reference"
_state: dict[str, object] = {}


def _package_dirs() -> dict[str, Path]:
    """Folder of ``carbonsched`` and of every subpackage the install maps to another folder.

    Returns
    -------
    dict
        Dotted package name -> folder, parents first.
    """
    pkg = importlib.import_module(PACKAGE)
    dirs = {PACKAGE: Path(next(iter(pkg.__path__))).resolve()}
    for finder in sys.meta_path:  # setuptools' editable finder keeps the package-dir mapping
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict):
            for name, path in mapping.items():
                if name == PACKAGE or name.startswith(PACKAGE + "."):
                    dirs[name] = Path(path).resolve()
    return dict(sorted(dirs.items(), key=lambda kv: kv[0].count(".")))


def _lay_out(dirs: dict[str, Path], root: Path) -> Path:
    """Symlink the package's files into ``root`` as the import system sees them."""
    for name, src in dirs.items():
        dest = root.joinpath(*name.split("."))
        dest.mkdir(parents=True, exist_ok=True)
        for entry in src.iterdir():
            if entry.name == "__pycache__" or (dest / entry.name).exists():
                continue
            if ".".join((name, entry.name)) in dirs:  # mapped elsewhere: laid out on its own
                continue
            os.symlink(entry, dest / entry.name)
    return root


def _top_level_modules(root: Path) -> list[str]:
    """``carbonsched.<name>`` for every module and subpackage directly under the package."""
    found = pkgutil.iter_modules([str(root / PACKAGE)], prefix=PACKAGE + ".")
    return sorted(info.name for info in found if not info.name.rsplit(".", 1)[1].startswith("_"))


@event_priority(100)  # before mkdocstrings' on_config, which creates the python handler
def on_config(config):
    """Lay the package out for griffe and add the reference pages to the navigation."""
    root = Path(tempfile.mkdtemp(prefix="carbonsched-api-"))
    _state["root"] = root
    _lay_out(_package_dirs(), root)
    modules = _top_level_modules(root)
    _state["modules"] = modules
    python = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    python["paths"] = [str(root)]
    entries = [{"Overview": f"{REFERENCE_DIR}/index.md"}]
    entries += [{name: f"{REFERENCE_DIR}/{name}.md"} for name in modules]
    if config.nav is not None:
        config.nav.append({"API reference": entries})
    return config


def _summary(name: str) -> str:
    """First line of a module's docstring, read without importing it."""
    import ast

    root = _state["root"]
    rel = Path(*name.split("."))
    for path in (root / rel / "__init__.py", (root / rel).with_suffix(".py")):
        if path.exists():
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            return doc.strip().splitlines()[0] if doc.strip() else ""
    return ""


def on_files(files: Files, config) -> Files:
    """Add one generated page per top-level module, an index of them, and the catalog schema."""
    modules = _state["modules"]
    lines = [
        "# API reference",
        "",
        "Generated at build time from the installed package's numpydoc docstrings: one page",
        "per top-level module or subpackage of `carbonsched` (a subpackage's page holds its",
        "submodules).",
        "",
        "| module | what it holds |",
        "|---|---|",
    ]
    for name in modules:
        lines.append(f"| [`{name}`]({name}.md) | {_summary(name).replace('|', '/')} |")
    index = "\n".join(lines) + "\n"
    files.append(File.generated(config, f"{REFERENCE_DIR}/index.md", content=index))
    for name in modules:
        content = f"# `{name}`\n\n::: {name}\n"
        files.append(File.generated(config, f"{REFERENCE_DIR}/{name}.md", content=content))
    schema = _state["root"] / PACKAGE / "regions" / "schema.md"
    if schema.exists():
        # citations such as "hubs.md [S4][S5]" would read as a Markdown reference link: escape them
        text = re.sub(r"\[(S\d+)\]", r"\\[\1\\]", schema.read_text(encoding="utf-8"))
        files.append(File.generated(config, "catalog-schema.md", content=text))
    return files


def on_shutdown() -> None:
    """Remove the temporary package layout."""
    root = _state.pop("root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)
