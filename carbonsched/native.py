"""Long native calls and the process's signal handlers.

Python runs a signal handler only between bytecodes of the main thread: while a native call
runs there (a HiGHS solve, up to its time limit) a handled SIGTERM waits for it to return. The
command-line handler (:mod:`carbonsched.cli.interrupts`) turns SIGTERM into a clean stop, but a
pod's grace period (30 s by default) is shorter than a solve's default limit (60 s), so the
kubelet's SIGKILL would come first. :func:`native_section` gives SIGTERM its default action
(the process ends at once, as without a handler) for the length of such a call: a stop during
a solve loses only the solve, whose run record's lease lapses as after any crash.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def native_section() -> Iterator[None]:
    """SIGTERM ends the process at once while the block runs (a long native call).

    Only in the main thread with a Python-level SIGTERM handler installed; elsewhere (a worker
    thread of ``carbonsched serve``, no handler) it changes nothing. The handler is restored
    when the block ends, however it ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.getsignal(signal.SIGTERM)
    if not callable(prev):
        yield
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, prev)
