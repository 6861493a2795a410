"""A dispatch step that stops the test's PostgreSQL server, then dispatches: the database dies
between plan and dispatch, at the same line every time.

``CARBONSCHED_TEST_PG_STOP`` holds the ``pg_ctl ... stop`` command line (JSON list).
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any


def stop_then_dispatch(store: Any, plan_id: str, catalog: Any, **kwargs: Any) -> Any:
    """Stop the database, then run the real dispatch step."""
    subprocess.run(json.loads(os.environ["CARBONSCHED_TEST_PG_STOP"]), check=True,
                   capture_output=True, timeout=120)
    from carbonsched.dispatch.outbox import dispatch_plan

    return dispatch_plan(store, plan_id, catalog, **kwargs)
