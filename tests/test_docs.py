"""The docs: the site builds strictly, the README stays a front door, relative links resolve."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICK_START = [
    "python3 -m pip install -c requirements/lock.txt -e . && carbonsched plan",
    "bash scripts/test",  # CI's .ci/run calls exactly this
]
README_MAX_BYTES = 12_000


def test_docs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    site = tmp_path / "site"
    assert (site / "index.html").exists()
    reference = site / "reference" / "carbonsched.plan" / "index.html"
    assert reference.exists(), sorted(p.name for p in (site / "reference").iterdir())
    assert "solve_plan" in reference.read_text(encoding="utf-8")
    assert (site / "benchmarks" / "planner-log" / "index.html").exists()


def test_readme_is_a_front_door():
    size = (ROOT / "README.md").stat().st_size
    assert size < README_MAX_BYTES, f"README.md is {size} bytes; the reference belongs in docs/"


def _section(text, title):
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"no '## {title}' section"
    return match.group(1)


def test_quick_start_holds_exactly_the_two_commands():
    quick = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Quick start")
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", quick, flags=re.M | re.S)
    assert len(blocks) == 1, f"Quick start has {len(blocks)} code blocks, expected one"
    lang, body = blocks[0]
    assert lang == "bash"
    assert body.splitlines() == QUICK_START


def _relative_links(text):
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # links inside code are not links
    text = re.sub(r"`[^`\n]*`", "", text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same file
        yield target.split("#", 1)[0]


@pytest.mark.parametrize("name", ["README.md", "CHANGELOG.md", "BENCHMARKS.md"])
def test_relative_links_resolve(name):
    path = ROOT / name
    missing = [t for t in _relative_links(path.read_text(encoding="utf-8"))
               if not (path.parent / t).exists()]
    assert not missing, f"{name}: links to missing files: {missing}"
