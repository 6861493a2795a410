"""Atomic file writes: every file carbonsched writes is all old or all new, never half-written.

A file is written to a temporary file in the *same* folder (same file system), flushed and
``fsync``-ed, then renamed over the target with :func:`os.replace`, which POSIX makes atomic: a
reader (or a process killed with ``kill -9`` mid-write) sees either the previous file or the
complete new one. The folder is ``fsync``-ed after the rename so the new name survives a power
loss. This is the pattern of ``python-atomicwrites`` and of SQLite's own journal.

Failures (missing permission, a folder that cannot be created, a full disk) raise
:class:`~carbonsched.errors.InputError` naming the file; the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from carbonsched.errors import InputError


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` atomically.

    For writers that want a file name (``DataFrame.to_csv``, ``Figure.savefig``). The caller
    writes the whole file to the yielded path; nothing is visible at ``path`` until the block
    ends without an exception.

    Raises
    ------
    InputError
        The folder cannot be created or written, or the rename failed.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError(f"{target}: cannot write here ({exc.strerror or exc}); choose a "
                         "writable folder") from exc
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        if target.exists():  # keep the old file's permission bits, not mkstemp's 0600
            with contextlib.suppress(OSError):
                os.chmod(tmp_path, target.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        if isinstance(exc, OSError):
            raise InputError(f"{target}: writing failed ({exc.strerror or exc}); the previous "
                             "file, if any, is unchanged") from exc
        raise
    _fsync_dir(target.parent)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open(path, mode)`` that writes a temporary file and renames it at the end.

    Parameters
    ----------
    path
        The target file.
    mode
        ``"w"`` or ``"wb"`` (with ``encoding``/``newline`` keyword arguments as for
        :func:`open`).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files; mode {mode!r} is not 'w' or 'wb'")
    if mode == "w":
        kwargs.setdefault("encoding", "utf-8")
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh
        fh.flush()


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see the module docstring); return the path."""
    with atomic_open(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)
