"""Build damaged data dirs in a tmp folder from symlinks to the real files (never committed)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def mirror(shared: Path, dest: Path, edits: dict[str, Callable[[str], str]] | None = None) -> Path:
    """Mirror ``shared`` into ``dest`` with one symlink per file.

    ``edits`` maps a path relative to ``shared`` to a function of the file's text; that file is
    written as an edited copy instead of a symlink.
    """
    edits = edits or {}
    for root, _dirs, files in os.walk(shared):
        rel = Path(root).relative_to(shared)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            key = str(rel / name) if str(rel) != "." else name
            src = Path(root) / name
            if key in edits:
                (dest / rel / name).write_text(edits[key](src.read_text(encoding="utf-8")),
                                               encoding="utf-8")
            else:
                (dest / rel / name).symlink_to(src)
    return dest


def keep_until(last_stamp: str) -> Callable[[str], str]:
    """Edit: keep the header and the rows up to the one starting with ``last_stamp``."""

    def edit(text: str) -> str:
        out = []
        for line in text.splitlines(keepends=True):
            out.append(line)
            if line.startswith(last_stamp):
                break
        return "".join(out)

    return edit
