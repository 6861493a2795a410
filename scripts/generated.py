"""Write a generated file, or check that the committed one is current (``--check``)."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, text: str, argv: list[str], command: str) -> int:
    """Write ``text`` to ``path``; with ``--check`` in ``argv`` compare instead.

    Returns the exit status: 1 when checking finds the file missing or different (the message
    names ``command``, which regenerates it), else 0.
    """
    if "--check" in argv:
        if not path.is_file() or path.read_text() != text:
            sys.stderr.write(f"{path} is not up to date: run {command}\n")
            return 1
        return 0
    path.write_text(text)
    return 0
