"""SIGINT and SIGTERM raise :class:`~carbonsched.errors.Interrupted`: clean-ups run, one line.

Without a handler SIGTERM (a CronJob's pod deleted, ``kill``) ends the process at once: no
``finally`` runs, so the dispatch claims it held block the next dispatcher for their lease and
its run record stays ``running``. SIGINT's ``KeyboardInterrupt`` is turned by Typer into a silent
exit 130. :func:`handle_signals` makes both raise :class:`~carbonsched.errors.Interrupted` in the
main thread; what catches it on the way out (the run record marked ``interrupted``, dispatch
claims released) adds a note, and :func:`interrupted_line` prints them. A second signal while
those run ends the process at once (the default action).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from carbonsched.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _second(signum: int, frame: FrameType | None) -> None:
    """A second signal during the clean-up: the default action (the process ends now)."""
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


def _first(signum: int, frame: FrameType | None) -> None:
    for s in SIGNALS:
        signal.signal(s, _second)
    raise Interrupted(signum)


def handle_signals() -> None:
    """Raise :class:`~carbonsched.errors.Interrupted` on the first SIGINT or SIGTERM.

    Only from the main thread (Python runs signal handlers there); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for s in SIGNALS:
        signal.signal(s, _first)


def interrupted_line(exc: Interrupted) -> str:
    """``interrupted: SIGTERM; <what each clean-up gave up>`` on one line."""
    notes = getattr(exc, "__notes__", None) or ["nothing was held"]
    return "; ".join([f"interrupted: {exc}", *notes])
