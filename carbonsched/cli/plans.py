"""``carbonsched plans``: find recorded plans in the store and read them back.

``plans list`` shows the newest plans; ``plans show ID|latest`` prints one, ``--json`` prints the
plan document exactly as ``plan --out`` wrote it (only JSON on stdout, so it can be piped).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from carbonsched.cli.common import table

plans_app = typer.Typer(help="Plans recorded in the store (CARBONSCHED_DATABASE_URL).",
                        no_args_is_help=True)


def _store():
    from carbonsched.config import get_settings
    from carbonsched.store import Store

    return Store(get_settings().resolved_database_url())


@plans_app.command("list")
def plans_list(
    date: Annotated[str | None, typer.Option(help="Only plans for this day, YYYY-MM-DD.")]
    = None,
    limit: Annotated[int, typer.Option(help="At most this many plans, newest first.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
    = False,
) -> None:
    """List recorded plans, newest first."""
    from carbonsched.cli.common import errors, out

    with errors():
        if limit < 1:
            from carbonsched.errors import InputError

            raise InputError(f"--limit {limit} must be >= 1")
        rows = _store().list_plans(date, limit=limit)
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        if not rows:
            out.print("no plans recorded" + (f" for {date}" if date else "")
                      + "; run `carbonsched plan` to make one", soft_wrap=True)
            return
        t = table("plan_id", "date", "catalog", "signals", "status", "kg CO2e",
                  "baseline kg", "recorded (UTC)", title="Recorded plans (newest first)")
        for r in rows:
            t.add_row(r["plan_id"], r["date"], r["catalog"], r["signal_quality"],
                      r["solver_status"], f"{r['emissions_kg']:,.1f}",
                      f"{r['baseline_emissions_kg']:,.1f}", r["created_at"][:19])
        out.print(t)
        out.print("show one with `carbonsched plans show ID` (or `latest`), add --json for "
                  "the plan document", highlight=False, soft_wrap=True)


@plans_app.command("show")
def plans_show(
    plan_id: Annotated[str, typer.Argument(
        help="A plan id (see `plans list`), a unique start of one (at least 6 characters, as "
        "`plan` prints 12), or 'latest'.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan document as JSON.")]
    = False,
    all_notes: Annotated[bool, typer.Option(
        "--all-notes", "--verbose", help="Print every note of the plan as recorded; by "
        "default one line per kind of note, with its count.")] = False,
    jobs: Annotated[bool, typer.Option(
        "--jobs", help="Also print every job: start, end, site, GPUs, kWh and kg CO2e.")]
    = False,
) -> None:
    """Show one recorded plan (``latest`` for the newest)."""
    from carbonsched.cli.common import errors, out
    from carbonsched.cli.plan_view import print_plan
    from carbonsched.pipeline.document import read_plan_document

    with errors():
        db = _store()
        pid = db.resolve_plan_id(plan_id)
        doc = db.get_plan(pid)
        typed = read_plan_document(doc, f"plan {pid}")
        if as_json:
            typer.echo(json.dumps(typed.model_dump(mode="json", exclude_unset=True), indent=2))
            return
        # every site of the plan, idle ones too, as `plan` printed them (plans recorded before
        # site_roles was added show no role)
        roles = doc.get("site_roles", {})
        summary: dict[str, dict] = {}

        def row(site: str) -> dict:
            return summary.setdefault(site, {"site": site, "role": roles.get(site, ""),
                                             "jobs": 0, "job_gpu_hours": 0.0,
                                             "inference_gpu_hours": 0.0, "energy_kwh": 0.0,
                                             "emissions_kg": 0.0})

        for site in doc.get("sites", []):
            row(site)
        jobs_at: dict[str, set[str]] = {}
        for p in doc["placements"]:
            r = row(p["site"])
            jobs_at.setdefault(p["site"], set()).add(p["job_id"])
            r["jobs"] = len(jobs_at[p["site"]])   # a job in pieces once per site
            hours = (_hours(p["end"]) - _hours(p["start"]))
            r["job_gpu_hours"] += p["gpus"] * hours
            r["energy_kwh"] += p["energy_kwh"]
            r["emissions_kg"] += p["emissions_kg"]
        for i in doc.get("inference", []):
            r = row(i["site"])
            r["inference_gpu_hours"] += i["gpus"]
            r["energy_kwh"] += i.get("energy_kwh", 0.0)
            r["emissions_kg"] += i.get("emissions_kg", 0.0)
        print_plan(doc, list(summary.values()), all_notes)
        out.print(payload_line(doc["placements"]), highlight=False, soft_wrap=True)
        if jobs:
            from carbonsched.cli.plan_jobs import print_jobs

            print_jobs(doc)
        out.print(f"plan id {doc['plan_id']}; as JSON: `carbonsched plans show "
                  f"{doc['plan_id']} --json`", highlight=False, soft_wrap=True)


def payload_line(placements: list[dict]) -> str:
    """One line on what the placements run: payload kinds, templates, GPU slices, none.

    A placement runs on a GPU slice when the plan gave it one (:func:`placement_slice`); a job
    asking for a slice that the plan put on a whole GPU is counted apart.

    Parameters
    ----------
    placements
        The plan document's ``placements`` (each with an optional ``payload``).
    """
    from carbonsched.dispatch.outbox import placement_slice

    kinds: dict[str, int] = {}
    templates: set[str] = set()
    slices = whole = none = 0
    for p in placements:
        pay = p.get("payload") or {}
        what = next((k for k in ("pod_template", "script", "script_path", "command", "image")
                     if pay.get(k)), None)
        if what is None:
            none += 1
        else:
            kinds[what] = kinds.get(what, 0) + 1
        if pay.get("template"):
            templates.add(str(pay["template"]))
        sliced = placement_slice(p) != (None, None)
        slices += sliced
        whole += not sliced and bool(pay.get("gpu_milli") or pay.get("mig_profile"))
    parts = [f"{n} {k}" for k, n in sorted(kinds.items())]
    if templates:
        parts.append(f"templates {', '.join(sorted(templates))}")
    if slices:
        parts.append(f"{slices} on a GPU slice (gpu_milli/mig_profile)")
    if whole:
        parts.append(f"{whole} asking for a GPU slice, planned on a whole GPU")
    if none:
        parts.append(f"{none} name nothing to run (dispatched only with --placeholder)")
    return (f"payloads of {len(placements)} placements: {'; '.join(parts) or 'none'}; each "
            "one's in `plans show ID --json`")


def _hours(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() / 3600.0
