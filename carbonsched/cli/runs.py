"""``carbonsched runs``: the run records (``CARBONSCHED_DATABASE_URL``), one per issue time.

``runs list`` shows them, newest first, as ``GET /v1/runs`` does; ``runs abandon KEY --reason``
gives up a stopped run that can never be finished (its plan lost), which would otherwise stop
every later rolling run (``RunBlockedError``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from carbonsched.cli.common import table

runs_app = typer.Typer(help="Run records, one per issue time (CARBONSCHED_DATABASE_URL).",
                       no_args_is_help=True)


def _service_store() -> Any:
    from carbonsched.config import get_settings
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    return ServiceStore(Store(get_settings().resolved_database_url()))


def _when(t: Any) -> str:
    return "" if t is None else f"{t.astimezone(UTC):%Y-%m-%d %H:%M}"


@runs_app.command("list")
def runs_list(
    limit: Annotated[int, typer.Option(help="At most this many records, newest first.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
    = False,
) -> None:
    """List run records, newest issue time first: status, plan, attempts, who ran them."""
    from carbonsched.cli.common import errors, out
    from carbonsched.errors import InputError

    with errors():
        if limit < 1:
            raise InputError(f"--limit {limit} must be >= 1")
        rows = _service_store().runs(limit)
        if as_json:
            typer.echo(json.dumps(rows, indent=2, default=str))
            return
        if not rows:
            out.print("no run records; `carbonsched plan --dispatch` or the service's cron "
                      "makes one per issue time", soft_wrap=True)
            return
        t = table("issued at (key)", "status", "plan", "attempts", "trigger", "replica",
                  "started (UTC)", "finished (UTC)", title="Run records (newest first)")
        for r in rows:
            t.add_row(r["run_key"], r["status"], (r["plan_id"] or "")[:12], str(r["attempts"]),
                      r["trigger"], r["replica"], _when(r["started_at"]),
                      _when(r["finished_at"]))
        out.print(t)
        now = datetime.now(UTC)
        stopped = [r["run_key"] for r in rows if r["plan_id"] and (
            r["status"] == "interrupted" or r["status"] == "running" and (
                r["lease_expires_at"] is None or r["lease_expires_at"] < now))]
        if stopped:
            out.print(f"{len(stopped)} run(s) stopped after storing a plan ({', '.join(stopped)})"
                      ": they are finished from that plan when claimed again; one that can "
                      "never be finished is given up with `carbonsched runs abandon KEY "
                      "--reason TEXT`", highlight=False, soft_wrap=True)


@runs_app.command("abandon")
def runs_abandon(
    key: Annotated[str, typer.Argument(
        help="The run's issue time as `runs list` shows it (e.g. 2023-07-10T06:00Z), or a "
        "planning date YYYY-MM-DD for the run issued at its 00:00 UTC.")],
    reason: Annotated[str, typer.Option(
        help="Why it is given up (kept in the run's record).", show_default=False)],
) -> None:
    """Give up a stopped run for good (its record becomes ``abandoned``).

    For a run stopped after it stored its plan that can never be finished (its plan lost,
    the rolling state impossible to save from it): until then every later rolling run is
    refused (``RunBlockedError``, exit 3). Afterwards no claim runs it again, and later runs
    plan on the rolling state as the newest run that saved it left it. The units its
    dispatch recorded stay on their clusters (`carbonsched status` shows them; `carbonsched
    cancel` stops one): later runs do not plan those jobs again and hold the GPUs and power
    their running units use. Refused (exit 2) for a run that is going on (a live lease) or
    already final.
    """
    from carbonsched.cli.common import err, errors

    with errors():
        rec = _service_store().abandon_run(key, reason, datetime.now(UTC))
        plan = (f"; the units plan {rec['plan_id'][:12]}'s dispatch recorded stay on their "
                "clusters (`carbonsched status`), and later runs neither plan those jobs again "
                "nor book the GPUs their running units hold" if rec["plan_id"] else "")
        err.print(f"run {rec['run_key']} abandoned: no claim runs it again, and a later "
                  "rolling run no longer waits for it (it plans on the rolling state as the "
                  f"newest run that saved it left it){plan}",
                  highlight=False, soft_wrap=True)
        print(json.dumps(rec, default=str))
