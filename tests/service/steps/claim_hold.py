"""A dispatch step that claims dispatch intents and holds them, as a long dispatch pass would.

With ``CARBONSCHED_TEST_BLOCK_MARKER`` set it writes the plan's intents (one per placement, the
real :class:`~carbonsched.dispatch.lease.Claimant` of the dispatch passes claiming them under its
heartbeat, as another host's claimant, so no same-host liveness check frees them), writes the
marker file with the number claimed and waits (up to 10 minutes), so a test can signal the
process while it holds them; without it, it returns at once.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from carbonsched.dispatch.lease import Claimant
from carbonsched.store.models import DispatchRow

SITE = "test-claim-hold"
LEASE_S = 120.0
"""The claims' lease: a signalled process that did not release them would block for it. [s]"""


def claim_and_hold(store: Any, plan_id: str, catalog: Any, **kwargs: Any) -> dict[str, Any]:
    """Claim the intents written here and wait holding them, or return at once."""
    marker = os.environ.get("CARBONSCHED_TEST_BLOCK_MARKER")
    if not marker:
        return {"plan_id": plan_id, "dispatched": 0}
    t = datetime.now(UTC)
    with store.engine.begin() as c:
        c.execute(insert(DispatchRow), [dict(
            key=f"{plan_id}-k{i}", job_id=f"j{i}", piece=0, plan_id=plan_id, site=SITE,
            backend="slurm:held", state="Pending", reason="AwaitingSubmit", detail="",
            request_json="{}", planned_start=t, planned_end=t, attempts=0, created_at=t,
            updated_at=t, duplicates="") for i in range(5)])
    claimant = Claimant(store, LEASE_S, owner=f"pod-a/boot/ns/1/{os.getpid()}/abcd")
    with claimant.heartbeat():
        n = len(claimant.claim([SITE]).ids)
        Path(marker).write_text(f"{os.getpid()} {n}\n")
        time.sleep(600)
    return {"plan_id": plan_id, "dispatched": 0}


def claim_until_stopped(store: Any, plan_id: str, catalog: Any, *, stop: Any = None,
                        **kwargs: Any) -> dict[str, Any]:
    """As :func:`claim_and_hold`, as this process's own claimant, until ``stop`` is set.

    A dispatch step that honours the service's stop event as ``dispatch_plan`` does: it
    returns once the event is set (or after 10 minutes), its units not submitted, still
    pending, and its claims released by the heartbeat on the way out.
    """
    marker = os.environ.get("CARBONSCHED_TEST_BLOCK_MARKER")
    if not marker or stop is None:
        return {"plan_id": plan_id, "dispatched": 0}
    t = datetime.now(UTC)
    with store.engine.begin() as c:
        c.execute(insert(DispatchRow), [dict(
            key=f"{plan_id}-k{i}", job_id=f"j{i}", piece=0, plan_id=plan_id, site=SITE,
            backend="slurm:held", state="Pending", reason="AwaitingSubmit", detail="",
            request_json="{}", planned_start=t, planned_end=t, attempts=0, created_at=t,
            updated_at=t, duplicates="") for i in range(5)])
    claimant = Claimant(store, LEASE_S)
    with claimant.heartbeat():
        n = len(claimant.claim([SITE]).ids)
        Path(marker).write_text(f"{os.getpid()} {n}\n")
        stop.wait(600)
    return {"plan_id": plan_id, "complete": False, "counts": {"interrupted": n},
            "outcomes": []}
