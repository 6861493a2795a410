"""A dispatch step that holds its run: with ``CARBONSCHED_TEST_BLOCK_MARKER`` set it writes that
file and then waits (up to 10 minutes) as a long dispatch would, so the test can kill the process
while it holds the day's run; without it, it returns at once."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def hold(store: Any, plan_id: str, catalog: Any, **kwargs: Any) -> dict[str, Any]:
    """Write the marker and wait, or return at once; dispatches nothing."""
    marker = os.environ.get("CARBONSCHED_TEST_BLOCK_MARKER")
    if marker:
        Path(marker).write_text(f"{os.getpid()} {plan_id}\n")
        time.sleep(600)
    return {"plan_id": plan_id, "dispatched": 0}
