"""SIGTERM while planning ends a command at once, as before a handler was installed.

The command-line handler (:mod:`carbonsched.cli.interrupts`) turns SIGTERM into a clean stop,
but Python runs it only between bytecodes of the main thread: inside a solve (HiGHS runs up to
its time limit) it waited for the solver, longer than a pod's grace period. ``solve_plan`` runs
under :func:`carbonsched.native.native_section`, where SIGTERM keeps its default action.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from carbonsched.cli.interrupts import handle_signals
from carbonsched.native import native_section

SCRIPT = textwrap.dedent("""
    from carbonsched.cli.interrupts import handle_signals
    from carbonsched.plan import solve_plan
    from carbonsched.plan.instances import make_instance

    problem = make_instance(3000, 16, 48, seed=1)
    handle_signals()
    said = []

    def progress(message):   # called inside solve_plan: the signal comes after this line
        if not said:
            said.append(message)
            print("solving", flush=True)

    solve_plan(problem, time_limit_s=600, method="milp", progress=progress)
    print("solved", flush=True)
""")


def test_sigterm_during_a_solve_ends_the_process_at_once(shared_data):
    env = {**os.environ, "CARBONSCHED_SHARED_DATA": str(shared_data)}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "solving"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    # the default action: ended by the signal (before: the handler's Interrupted, raised only
    # once the solver returned)
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, err[-2000:])
    assert "solved" not in out


def test_the_handler_is_back_after_the_section_and_untouched_elsewhere():
    before = signal.getsignal(signal.SIGTERM)
    try:
        handle_signals()
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        with native_section():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is handler
        signal.signal(signal.SIGTERM, signal.SIG_DFL)       # no handler: nothing changes
        with native_section():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, before if s == signal.SIGTERM else signal.default_int_handler)


def test_an_interrupt_with_no_claim_held_says_nothing_of_claims(tmp_path):
    """Before, every interrupted heartbeat added '0 dispatch claims released (another
    dispatcher may take them at once)' although it held none."""
    import pytest

    from carbonsched.cli.interrupts import interrupted_line
    from carbonsched.dispatch.lease import Claimant
    from carbonsched.errors import Interrupted
    from carbonsched.store import Store

    claimant = Claimant(Store(f"sqlite:///{tmp_path / 's.db'}"), 120.0, owner="t@h:1")
    with pytest.raises(Interrupted) as info, claimant.heartbeat():
        raise Interrupted(signal.SIGTERM)
    assert interrupted_line(info.value) == "interrupted: SIGTERM; nothing was held"
