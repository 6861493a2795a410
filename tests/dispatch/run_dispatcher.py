"""One dispatcher process for the concurrency and kill tests: ``python run_dispatcher.py SPEC``.

SPEC is a JSON object: ``url`` (store), ``plan_id``, ``settings`` (Settings keyword arguments),
``go`` (a file to wait for before dispatching: every process starts together), ``out`` (where
the summary JSON is written), ``kill_after`` (SIGKILL this process right after that many
successful submissions, before recording them), ``ready`` (a file written once the process has
imported everything and is waiting for ``go``), ``submit_delay_s`` and ``started`` (each
submission, once its claim is taken, appends its key to ``started`` and waits that long before
it reaches the backend: a slow backend), ``signals`` (SIGINT and SIGTERM handled as the CLI
handles them: the interruption's line on stderr, its exit code).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def main() -> None:
    spec = json.loads(sys.argv[1])
    from carbonsched.adapters.dispatch import kubernetes, slurm
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import dispatch_plan
    from carbonsched.store import Store

    if spec.get("kill_after") is not None:
        lock, done = threading.Lock(), [0]
        for cls in (slurm.SlurmAdapter, kubernetes.KubernetesAdapter):
            real = cls.submit

            def submit_then_die(self, req, _real=real):  # noqa: ANN001, ANN202
                job = _real(self, req)  # the submission succeeded on the backend ...
                with lock:
                    done[0] += 1
                    if done[0] >= spec["kill_after"]:
                        Path(spec["out"] + ".killed").write_text(req.key)
                        os.kill(os.getpid(), signal.SIGKILL)  # ... and is never recorded
                return job

            cls.submit = submit_then_die
    if spec.get("started"):
        started = Path(spec["started"])
        lock = threading.Lock()
        for cls in (slurm.SlurmAdapter, kubernetes.KubernetesAdapter):
            real = cls.submit

            def slow_submit(self, req, _real=real):  # noqa: ANN001, ANN202
                with lock, started.open("a") as f:
                    f.write(req.key + "\n")
                time.sleep(spec.get("submit_delay_s", 0))
                return _real(self, req)

            cls.submit = slow_submit
    store = Store(spec["url"])
    settings = Settings(**spec.get("settings", {}))
    if spec.get("ready"):
        Path(spec["ready"]).write_text(str(os.getpid()))
    if spec.get("go"):
        while not Path(spec["go"]).exists():
            time.sleep(0.01)
    if spec.get("signals"):
        from carbonsched.cli.interrupts import handle_signals, interrupted_line
        from carbonsched.errors import Interrupted

        handle_signals()
        try:
            summary = dispatch_plan(store, spec["plan_id"], settings=settings)
        except Interrupted as exc:
            print(interrupted_line(exc), file=sys.stderr)
            sys.exit(exc.exit_code)
    else:
        summary = dispatch_plan(store, spec["plan_id"], settings=settings)
    Path(spec["out"]).write_text(json.dumps(summary.to_dict()))


if __name__ == "__main__":
    main()
