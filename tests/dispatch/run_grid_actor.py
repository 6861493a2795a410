"""One grid-event actor process for the kill test: ``python run_grid_actor.py SPEC``.

SPEC is a JSON object: ``url`` (store), ``settings`` (Settings keyword arguments), ``site``
(the one site to act on), ``kill_after`` (``pause``, ``resume``, ``hold`` or ``release``:
SIGKILL this process right after the first such call returned from the backend, before it is
recorded; ``out + ".killed"`` then holds the key), ``kill_before`` (the same, before the call
reaches the backend), ``out`` (where the pass's summary JSON is
written when the process lives).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path


def main() -> None:
    spec = json.loads(sys.argv[1])
    from carbonsched.adapters.dispatch import kubernetes, slurm
    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import build_adapters
    from carbonsched.service.grid_events import apply_events
    from carbonsched.store import Store

    verb = spec.get("kill_after") or spec.get("kill_before")
    if verb:
        method = {"release": "unhold"}.get(verb, verb)
        before = bool(spec.get("kill_before"))
        for cls in (slurm.SlurmAdapter, kubernetes.KubernetesAdapter):
            real = getattr(cls, method)

            def act_then_die(self, key, *args, _real=real):  # noqa: ANN001, ANN002, ANN202
                got = None if before else _real(self, key, *args)  # made on the backend ...
                Path(spec["out"] + ".killed").write_text(key)
                os.kill(os.getpid(), signal.SIGKILL)  # ... and never recorded
                return got

            setattr(cls, method, act_then_die)
    settings = Settings(**spec.get("settings", {}))
    catalog = load_catalog(spec.get("catalog", "global"))
    adapters = build_adapters(catalog, settings=settings)
    adapters = {spec["site"]: adapters[spec["site"]]}
    summary = apply_events(Store(spec["url"]), catalog, adapters, settings,
                           lambda: datetime.now(UTC))
    Path(spec["out"]).write_text(json.dumps(summary.to_dict()))


if __name__ == "__main__":
    main()
