"""``carbonsched dispatch``, ``status`` and ``cancel``: a stored plan onto the sites' schedulers.

Exit codes as elsewhere: 2 bad input (or a placement the backend rejected, or nothing of what
``dispatch`` was asked to submit was submitted: e.g. every placement of a past day is past its
deadline), 3 a backend still unavailable after the retries (its placements stay pending; run the
command again), 0 otherwise (something submitted, or nothing asked: a dry run, an empty plan,
every placement after ``--commit-before``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import pandas as pd
import typer
from rich.markup import escape

from carbonsched.cli.common import table
from carbonsched.domain import ReasonCode
from carbonsched.errors import TimeAxisError

if TYPE_CHECKING:
    from carbonsched.dispatch.outbox import DispatchSummary


def _store():  # noqa: ANN202 - Store, imported lazily like the other commands
    from carbonsched.config import get_settings
    from carbonsched.store import Store

    return Store(get_settings().resolved_database_url())


def _ts(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NaT:
        return ""
    return pd.Timestamp(value).tz_convert("UTC").strftime("%Y-%m-%d %H:%M")


def dispatch(
    plan: Annotated[str, typer.Option("--plan", help="Stored plan id, a unique start of one "
                                      "(at least 6 characters, as `plan` prints 12), or "
                                      "'latest'.")] = "latest",
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the exact sbatch lines and Job manifests; submit nothing.")]
        = False,
    commit_before: Annotated[str | None, typer.Option(
        "--commit-before", help="Commit only jobs whose first piece starts before this UTC "
        "instant, each whole (ISO 8601 with offset, e.g. 2026-12-01T06:00Z); default: the "
        "whole plan.")] = None,
    catalog: Annotated[str | None, typer.Option(
        "--catalog", help="Catalog name or path (default: the one the plan names).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    placeholder: Annotated[bool, typer.Option(
        "--placeholder", help="Run jobs that name nothing to run as 'sleep <planned seconds>' "
        "(a demo; labelled on the backend). Without it they are not submitted.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="One line per placement that was not submitted (rejected, deadline "
        "passed, backend unavailable, ...); by default one line per outcome, counted.")]
    = False,
) -> None:
    """Dispatch a stored plan to each site's Slurm cluster or Kubernetes namespace, once."""
    from carbonsched.cli.common import err, errors, out
    from carbonsched.dispatch.outbox import dispatch_plan

    with errors():
        cb = None
        if commit_before:
            try:
                cb = datetime.fromisoformat(commit_before.replace("Z", "+00:00"))
            except ValueError as exc:
                raise TimeAxisError(f"--commit-before {commit_before!r} is not ISO 8601; "
                                    "e.g. 2026-12-01T06:00Z") from exc
            if cb.tzinfo is None:
                raise TimeAxisError(f"--commit-before {commit_before!r} has no offset; give UTC "
                                    "with Z, e.g. 2026-12-01T06:00Z")
        summary = dispatch_plan(_store(), plan, catalog, dry_run=dry_run, commit_before=cb,
                                placeholder=placeholder or None)
    if as_json:
        out.print_json(json.dumps(summary.to_dict()))
    elif dry_run:
        for o in summary.outcomes:
            if o.rendered:
                out.print(f"# {o.site} · {o.backend} · {o.key}", highlight=False)
                out.print(escape(o.rendered), highlight=False, soft_wrap=True)
        others = {k: v for k, v in summary.counts.items() if k != "dry_run"}
        out.print(f"dry run of plan {summary.plan_id}: {summary.counts.get('dry_run', 0)} "
                  f"submissions rendered, nothing submitted; other placements: {others}")
    else:
        t = table(title=f"dispatch of plan {summary.plan_id}")
        for col in ("site", "backend", "action", "count"):
            t.add_column(col, justify="right" if col == "count" else "left")
        per: dict[tuple[str, str, str], int] = {}
        for o in summary.outcomes:
            k = (o.site, o.backend, o.action)
            per[k] = per.get(k, 0) + 1
        for (site, be, action), n in sorted(per.items()):
            t.add_row(site, be, action, str(n))
        out.print(t)
        counts = _in_words(sorted(summary.counts.items()))
        retries = f"{summary.retries} backoff retr{'y' if summary.retries == 1 else 'ies'}"
        out.print(f"{counts or 'nothing to dispatch'} · {retries} · {summary.seconds:.1f} s",
                  highlight=False)
    if not as_json:
        for note in summary.notes:
            out.print(f"note: {escape(note)}", highlight=False)
        for line in problem_lines(summary.outcomes, verbose):
            err.print(line, highlight=False, soft_wrap=True)
    if not summary.complete:
        raise typer.Exit(3)
    if summary.counts.get("rejected"):
        raise typer.Exit(2)
    if summary.nothing_submitted:
        from carbonsched.cli.common import print_error

        with errors():
            doc = _store().get_plan(summary.plan_id)
        print_error(nothing_submitted_message(summary, doc))
        raise typer.Exit(2)


def _in_words(counts: Iterable[tuple[str, int]]) -> str:
    """``[("submitted", 3), ("unavailable", 1)]`` as ``3 submitted, 1 unavailable``."""
    return ", ".join(f"{n} {what}" for what, n in counts)


def nothing_submitted_message(summary: DispatchSummary, plan: dict) -> str:
    """The one line ``dispatch`` ends with when none of the units it was asked for was submitted.

    Parameters
    ----------
    summary
        The run's :class:`~carbonsched.dispatch.outbox.DispatchSummary`.
    plan
        The plan document dispatched (its date, catalog and ``replay`` block name the fix).

    Returns
    -------
    str
        What happened (the outcomes counted), why, and the commands that give a plan to
        dispatch.
    """
    from carbonsched.dispatch.outbox import NOT_ASKED
    from carbonsched.domain import ReasonCode

    asked = [o for o in summary.outcomes if o.action not in NOT_ASKED]
    reasons: dict[str, int] = {}
    for o in asked:
        reasons[o.reason] = reasons.get(o.reason, 0) + 1
    why_counts = _in_words(sorted(reasons.items()))
    cat, day = plan.get("catalog", "global"), plan.get("date", "?")
    source = (plan.get("replay") or {}).get("source_date") or day
    pid = summary.plan_id[:12]
    why = (f"every placement of plan {pid} (for {day}) ends past its deadline: the day is over"
           if reasons.keys() == {str(ReasonCode.DEADLINE_PASSED)}
           else f"no placement of plan {pid} (for {day}) reached its backend")
    return (f"nothing submitted: none of the {len(asked)} placement(s) asked for is on its "
            f"backend ({why_counts}); {why}. Dispatch a plan that lies ahead: `carbonsched plan "
            f"--catalog {cat}` plans tomorrow, or `carbonsched plan --catalog {cat} "
            f"--replay-from {source}` plans tomorrow on that past day's real signals "
            "(signal_quality 'replayed'); then `carbonsched dispatch`")


PROBLEM_ACTIONS = ("rejected", "unavailable", "deadline_passed", "held_elsewhere", "lost_claim",
                   "interrupted", "no_payload")
"""Dispatch outcomes that leave a placement not submitted, said on stderr."""


def problem_lines(outcomes: list, verbose: bool = False) -> list[str]:
    """What ``dispatch`` says on stderr about placements it did not submit (Rich markup).

    By default one line per outcome of :data:`PROBLEM_ACTIONS`: its count, the count per site
    and the first placement's detail (a stale plan: one line, not one per placement); with
    ``verbose`` one line per placement.
    """
    bad = [o for o in outcomes if o.action in PROBLEM_ACTIONS]
    if verbose:
        return [f"[yellow]{o.action}[/] {escape(o.key)} at {o.site}: {escape(o.detail)}"
                for o in bad]
    lines = []
    for action in PROBLEM_ACTIONS:
        mine = [o for o in bad if o.action == action]
        if not mine:
            continue
        per_site: dict[str, int] = {}
        for o in mine:
            per_site[o.site] = per_site.get(o.site, 0) + 1
        sites = ", ".join(f"{s} {n}" for s, n in per_site.items())
        more = "; --verbose lists each" if len(mine) > 1 else ""
        lines.append(f"[yellow]{action}[/] {len(mine)} placement(s) ({sites}); first "
                     f"{escape(mine[0].key)} at {mine[0].site}: {escape(mine[0].detail)}{more}")
    return lines


def status(
    plan: Annotated[str | None, typer.Option(
        "--plan", help="A plan id, a unique start of one (at least 6 characters), or "
        "'latest'; default every dispatched job.")] = None,
    refresh: Annotated[bool, typer.Option(
        "--refresh/--no-refresh", help="Ask the backends first (default) or show the store.")]
        = True,
    catalog: Annotated[str | None, typer.Option(
        "--catalog", help="Catalog name or path (default: the plan's, else 'global').")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Per dispatched job: site, backend id, state, reason, actual start and end.

    A job found on its backend more than once (the same key on several backend jobs) is
    flagged: its other backend ids are listed under the table, to cancel.
    """
    from carbonsched.cli.common import err, errors, out
    from carbonsched.dispatch.outbox import dispatch_records, refresh_status, resolve_plan_id

    with errors():
        store = _store()
        pid = resolve_plan_id(store, plan) if plan else None
        cat = catalog or (store.get_plan(pid)["catalog"] if pid else "global")
        df = (refresh_status(store, cat, plan_id=pid) if refresh
              else dispatch_records(store, pid))
    if as_json:
        recs = df.assign(**{c: df[c].map(_ts) for c in ("planned_start", "planned_end",
                                                         "actual_start", "actual_end")})
        out.print_json(json.dumps(recs.to_dict(orient="records"), default=str))
        return
    t = table(title=f"dispatch status{' of plan ' + pid if pid else ''} (UTC)")
    for col in ("job", "site", "backend id", "state", "reason", "planned start", "actual start",
                "actual end", "times from"):
        t.add_column(col, overflow="fold")
    stale = _unreachable(df)
    for r in df.itertuples(index=False):
        bid = escape(r.backend_id or "") + (" [bold red](+dup)[/]" if r.duplicates else "")
        st = r.state + (" [yellow](not refreshed)[/]" if r.key in stale else "")
        t.add_row(escape(r.key), r.site, bid, st, r.reason,
                  _ts(r.planned_start), _ts(r.actual_start), _ts(r.actual_end),
                  r.times_source or "")
    out.print(t)
    counts = df["state"].value_counts().to_dict() if len(df) else {}
    dups = df[df["duplicates"].fillna("") != ""] if len(df) else df
    by_state = _in_words(counts.items())
    out.print(f"{len(df)} jobs" + (f": {by_state}" if by_state else "")
              + (f" · {len(dups)} with DUPLICATES on their backend" if len(dups) else ""),
              highlight=False)
    for r in dups.itertuples(index=False):
        err.print(f"[yellow]duplicate[/] {escape(r.key)}: recorded as {escape(r.backend_id or '')}"
                  f", also on {r.site} as {escape(r.duplicates)}; cancel the extra job(s)",
                  highlight=False)
    for backend, (n, why) in _unreachable_backends(df, stale).items():
        err.print(f"[yellow]backend {escape(backend)} unreachable[/]: {escape(why)}; its {n} "
                  "job(s) show the state last recorded (not refreshed); run `carbonsched "
                  "status` again once it answers", highlight=False, soft_wrap=True)


def cancel(
    job: Annotated[str, typer.Argument(help="The dispatched job's id.")],
    from_piece: Annotated[int, typer.Option(
        "--from-piece", min=0, help="Cancel this piece (0-based) and every later one (a later "
        "piece resumes from an earlier one's checkpoint); default 0, the whole job.")] = 0,
    catalog: Annotated[str | None, typer.Option(
        "--catalog", help="Catalog name or path (default: the one its plan names).")] = None,
) -> None:
    """Cancel a dispatched job on its site's scheduler (scancel, or the Job deleted).

    Exactly once: every piece's outbox row is claimed before any is touched, so a cancel never
    races a dispatcher's submission (while one holds a piece nothing is cancelled, and the
    message says when to retry; exit 3); a piece that has ended keeps its record; a piece not
    yet on its backend is never submitted. A piece the outbox still records as waiting or
    running is looked up on its backend first: one that has ended there is recorded as it
    ended (Succeeded, Failed) and not cancelled; a backend that cannot say leaves its piece
    and the later ones as they were (exit 3 when unreachable; run it again).
    """
    from carbonsched.cli.common import errors, out
    from carbonsched.dispatch.outbox import (
        ALREADY_ENDED,
        CANCELLED,
        NOT_ON_BACKEND,
        cancel_job,
        dispatch_records,
    )

    with errors():
        store = _store()
        if catalog is None:
            mine = dispatch_records(store, job_ids=[job])
            catalog = (store.get_plan(str(mine.iloc[0]["plan_id"]))["catalog"] if len(mine)
                       else "global")
        for o in cancel_job(store, catalog, job, from_piece):
            said = {CANCELLED: f"cancelled {escape(o.key)} at {o.site} ({o.backend})",
                    NOT_ON_BACKEND: f"{escape(o.key)}: {o.backend} had nothing to cancel (it "
                    "no longer knows the job); recorded Cancelled",
                    ALREADY_ENDED: (
                        f"{escape(o.key)} had already ended ({o.state}) on its backend "
                        f"({o.backend}); nothing cancelled; recorded {o.state}"
                        if o.ended_on_backend else
                        f"{escape(o.key)} had already ended ({o.state_before}); "
                        "left as it is")}
            out.print(said[o.outcome], highlight=False)


UNAVAILABLE_PREFIX = f"{ReasonCode.BACKEND_UNAVAILABLE}: "
"""How :func:`carbonsched.dispatch.outbox.refresh_status` marks a row whose backend could not
be asked (its ``detail``)."""


def _unreachable(df: Any) -> set[str]:
    """Keys of the rows whose backend could not be asked at the last refresh."""
    if not len(df):
        return set()
    hit = df["detail"].fillna("").str.startswith(UNAVAILABLE_PREFIX)
    return set(df.loc[hit, "key"])


def _unreachable_backends(df: Any, stale: set[str]) -> dict[str, tuple[int, str]]:
    """Backend -> (rows not refreshed, why), for :func:`_unreachable` rows."""
    out: dict[str, tuple[int, str]] = {}
    for r in df[df["key"].isin(stale)].itertuples(index=False) if stale else ():
        n, _ = out.get(r.backend, (0, ""))
        out[r.backend] = (n + 1, r.detail[len(UNAVAILABLE_PREFIX):])
    return out


def register(app: typer.Typer) -> None:
    """Add ``dispatch``, ``status`` and ``cancel`` to the main app."""
    app.command()(dispatch)
    app.command()(status)
    app.command()(cancel)
