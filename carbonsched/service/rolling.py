"""One rolling step of the service: plan over ``H`` from the issue time, commit, carry the rest.

The service's run path (:func:`carbonsched.service.runs.execute_run` with
``CARBONSCHED_ROLLING=true``: the cron and ``carbonsched plan --dispatch --rolling``) calls
:func:`rolling_step` once per run:

1. load the carried state from the store (:class:`~carbonsched.store.rolling_state.RollingStore`)
   and add the new work: the configured workload and the jobs submitted through the API
   (``POST /v1/jobs``) that are not committed yet;
2. end the pending jobs whose deadline has passed (``DeadlinePassed``); committed work that
   overlaps the horizon holds its GPUs and power as the planner's running work
   (:meth:`carbonsched.plan.rolling.RollingPlanner.prepare`);
3. forecast and plan the horizon ``[issued_at, issued_at + H)`` with the daily plan's own code
   (:func:`carbonsched.pipeline.daily.run_daily_plan` with ``horizon_hours = H`` and the run's
   issue time, which need not be 00:00 UTC when the service runs every few hours), so the plan
   document, its notes and fallbacks, the stored forecasts and the dispatch path are the ones
   of every plan; the solve starts warm from the previous run's plan (:func:`warm_start`: the
   placements it made after its commit window, which this run plans again), and the notes say
   whether it did (``warm start: warm: ...`` or ``warm start: cold: <why>``);
4. commit the placements that start before the next run (``issued_at + run_every``) and keep
   the others pending (:meth:`~carbonsched.plan.rolling.RollingPlanner.apply`); the document gets a
   ``rolling`` section (committed, deferred, ended with reasons, pinned running work) and the
   pinned stand-ins are removed from it, so that dispatch never sees them;
5. the run path stores the plan, writes the state back, updates the API jobs' states and
   dispatches with ``commit_before = issued_at + run_every``
   (:func:`carbonsched.dispatch.outbox.dispatch_plan`). A run stopped after it stored its plan
   (before or after its state was written) is finished from that plan when run again, never
   stepped twice (:func:`carbonsched.service.runs.saved_run`; :func:`stored_step` takes the
   step again from the plan when the state was not written yet).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from carbonsched.catalog import Catalog
from carbonsched.domain import Job, Placement, ReasonCode, Unplaced, Workload, jsonable
from carbonsched.pipeline.daily import DailyPlan, run_daily_plan
from carbonsched.plan.colgen.warm import CarriedDuals
from carbonsched.plan.rolling import RollingPlanner, RollingState, RunResult
from carbonsched.plan.solve import WarmStart
from carbonsched.store.rolling_state import RollingStore
from carbonsched.timeaxis import hourly_slots


@dataclass
class RollingStep:
    """What one rolling step produced (before it is stored)."""

    daily: DailyPlan
    run: RunResult
    planner: RollingPlanner
    rolling_store: RollingStore


_CARRIED: OrderedDict[tuple[str, str, pd.Timestamp], CarriedDuals] = OrderedDict()
"""In-process cache of column generation's multipliers and columns by (database URL,
catalog, issue time of the run that made them): what the next rolling run's warm start
needs besides the plan (issue 36 item 2). The store keeps the plan, not these; a restart or
a run on another replica finds nothing here, and that run starts its multipliers cold with
the reason in its notes (``warm start: ...; multipliers: cold: ...``)."""

CARRIED_KEEP = 8
"""Entries :data:`_CARRIED` keeps (the newest): one per catalog and database in use. [-]"""


def carried_key(store: Any, catalog_ref: str, issued_at: pd.Timestamp
                ) -> tuple[str, str, pd.Timestamp]:
    """The :data:`_CARRIED` key of a run: database URL, catalog and issue time (UTC)."""
    return (str(getattr(store, "url", id(store))), str(catalog_ref),
            pd.Timestamp(issued_at).tz_convert("UTC"))


def take_carried(store: Any, catalog_ref: str, state: RollingState) -> None:
    """Set ``state.carried`` to the previous run's multipliers from :data:`_CARRIED`.

    When the cache has none for the run issued at ``state.last_issued_at`` (a restart, a run
    on another replica, or a run without column generation), ``state.carried`` is ``None``
    and ``state.carried_missing`` says so: the next solve starts its multipliers cold and
    its ``solver.warm_start`` names why. Nothing is set before the first run.
    """
    last = state.last_issued_at
    if last is None:
        return
    state.carried = _CARRIED.get(carried_key(store, catalog_ref, last))
    state.carried_missing = "" if state.carried is not None else (
        f"the multipliers of the run issued at {last:%Y-%m-%dT%H:%MZ} are not in this "
        "process (it ran before a restart, on another replica, or without column "
        "generation); only its plan is carried")


def keep_carried(store: Any, catalog_ref: str, issued_at: pd.Timestamp,
                 carried: CarriedDuals | None) -> None:
    """Keep a run's multipliers in :data:`_CARRIED` for the next run; ``None`` keeps nothing.

    Only the newest :data:`CARRIED_KEEP` entries are kept.
    """
    if carried is None:
        return
    _CARRIED[carried_key(store, catalog_ref, issued_at)] = carried
    _CARRIED.move_to_end(carried_key(store, catalog_ref, issued_at))
    while len(_CARRIED) > CARRIED_KEEP:
        _CARRIED.popitem(last=False)


def warm_start(state: RollingState, run_every_hours: int) -> tuple[WarmStart | None, str]:
    """The previous run's plan as a warm start of this run, or ``None`` and why not.

    The previous run placed its pending jobs over its whole horizon and committed those
    starting before this run; the others (``state.tentative``) keep their absolute site and
    start, which on this run's slot grid is the previous plan shifted by ``run_every``.
    Column generation's multipliers and columns come with it when ``state.carried`` holds
    them (else ``duals_missing`` says why).

    Returns
    -------
    (WarmStart or None, str)
        The start, and the sentence for the notes when there is none (``cold: ...``).
    """
    if state.last_issued_at is None:
        return None, "cold: the first rolling run (no previous plan)"
    placements = [p for ps in state.tentative.values() for p in ps]
    last = state.last_issued_at.strftime("%Y-%m-%dT%H:%MZ")
    if not placements:
        return None, (f"cold: the previous run ({last}) left no placement to re-plan (it "
                      "committed or ended all its work)")
    return WarmStart(placements, f"the plan of the run issued at {last}, shifted by "
                                 f"{run_every_hours} h", duals=state.carried,
                     duals_missing=state.carried_missing), ""


def unplannable_pending(state: RollingState, catalog: Catalog) -> list[Unplaced]:
    """The rolling state's waiting jobs that ``catalog`` can no longer plan, and why.

    A job waits in the state as it was submitted; its sites are checked and its template is
    applied at each run. When a catalog edit has since removed a site it names
    (``UnknownSite``), or removed or changed the template it names so that the merged job no
    longer passes the job schema (``UnusableTemplate``, with the schema's message), the
    planner would refuse the whole run, every run, until the job's deadline; it is ended
    instead.

    Returns
    -------
    list of Unplaced
        One per such pending job, with the reason and a detail naming what is missing.
    """
    from carbonsched.errors import WorkloadError
    from carbonsched.workload.schema import apply_templates

    known = set(catalog.site_ids)
    out: list[Unplaced] = []
    for jid, job in state.pending.items():
        lost = sorted(set(job.allowed_sites) - known)
        if lost:
            out.append(Unplaced(jid, ReasonCode.UNKNOWN_SITE, (
                f"it names site(s) {', '.join(lost)} that catalog {catalog.name!r} no longer "
                "defines; submit it again with sites of this catalog")))
            continue
        if job.payload is None or job.payload.template is None:
            continue
        try:
            apply_templates([job], catalog.templates, where=f"catalog {catalog.name!r}")
        except WorkloadError as exc:
            out.append(Unplaced(jid, ReasonCode.UNUSABLE_TEMPLATE, (
                f"its template no longer applies ({exc}); submit it again with a template "
                "of this catalog, or with its fields given")))
    return out


def rolling_step(store: Any, catalog: Catalog, catalog_ref: str, pdate: str,
                 issued_at: pd.Timestamp, new_jobs: list[Job], workload: Workload,
                 data_dir: Any, solver: str, time_limit_s: float, horizon_hours: int,
                 run_every_hours: int = 24, signal_loader: Any = None,
                 exogenous_loader: Any = None,
                 end_first: Sequence[Unplaced] = (),
                 dispatched: Sequence[Any] = ()) -> RollingStep:
    """Plan one rolling step (see the module docstring); nothing is written yet.

    Parameters
    ----------
    store
        The :class:`~carbonsched.store.Store` holding ``rolling_jobs``.
    catalog, catalog_ref
        The catalog and the name or path ``run_daily_plan`` loads.
    pdate
        Planning date, ``YYYY-MM-DD``: the UTC date of ``issued_at``.
    issued_at
        The step's issue time (tz-aware, on the hour; any hour of a cadence of
        ``run_every_hours``).
    new_jobs
        Work to add as pending (ids already known are ignored).
    workload
        Its inference demand is planned in the horizon.
    data_dir, solver, time_limit_s
        As for :func:`carbonsched.pipeline.daily.run_daily_plan`.
    horizon_hours, run_every_hours
        ``H`` and the hours to the next run. [h]
    signal_loader, exogenous_loader
        As for :func:`~carbonsched.pipeline.daily.run_daily_plan`: the providers' history and
        published forecasts (:mod:`carbonsched.service.providers`); ``None``: the files,
        history only.
    end_first
        Pending jobs to end before planning, with their reason (an API job naming a site the
        catalog no longer defines would make the planner refuse the whole run).
    dispatched
        Running work (:class:`~carbonsched.domain.RunningWork`) of jobs dispatch holds that
        the rolling state does not (a workload file's job dispatched from a daily run's plan:
        :func:`carbonsched.service.runs.without_dispatched_jobs`), held beside its committed
        work.

    Raises
    ------
    InputError
        As :func:`~carbonsched.pipeline.daily.run_daily_plan`; a horizon shorter than the interval.
    """
    rs = RollingStore(store)
    t = pd.Timestamp(issued_at).tz_convert("UTC")
    # what this run reads of the state: the pending jobs, the committed work still holding
    # capacity in the horizon (from t, its first slot), and the rows of the new jobs' ids (a
    # clash below is found exactly)
    rp = RollingPlanner(catalog.sites, horizon_hours=horizon_hours,
                        run_every_hours=run_every_hours,
                        state=rs.load(t, job_ids=[j.id for j in new_jobs]))
    # a waiting job a catalog edit made unplannable ends, named; it would stop every run
    named = {u.job_id for u in end_first}
    # a waiting job whose stored spec the schema now refuses ends too: it cannot be dispatched
    unreadable = rp.end_pending([
        Unplaced(jid, ReasonCode.INVALID_SPEC, detail)
        for jid, detail in rp.state.unreadable.items() if jid not in named])
    named |= {u.job_id for u in unreadable}
    edited = rp.end_pending([u for u in unplannable_pending(rp.state, catalog)
                             if u.job_id not in named])
    ended_first = [*rp.end_pending(end_first), *unreadable, *edited]
    # ids are one namespace: a new job whose id the state already holds for another job is
    # ignored (the held one keeps it), and said
    clash = sorted({j.id for j in new_jobs if j.id in rp.jobs and rp.jobs[j.id] != j})
    rp.submit(new_jobs)
    jobs, running, ended = rp.prepare(t, hourly_slots(t, horizon_hours))
    ended = [*ended_first, *ended]
    inf = [d for d in workload.inference
           if t <= d.hour < t + pd.Timedelta(hours=horizon_hours)]
    take_carried(store, catalog_ref, rp.state)
    start, cold = warm_start(rp.state, run_every_hours)
    daily = run_daily_plan(pdate, catalog_ref, Workload(jobs=jobs, inference=inf), data_dir,
                           solver, time_limit_s, horizon_hours,
                           running=[*running, *dispatched], issued_at=t,
                           warm_start=start, signal_loader=signal_loader,
                           exogenous_loader=exogenous_loader)
    run = rp.apply(t, daily.problem, daily.result, ended)
    keep_carried(store, catalog_ref, t, rp.state.carried)
    doc = daily.document
    held = sorted({r.job_id for r in daily.problem.running})
    how = daily.result.solver.warm_start or cold or "cold: no previous plan"
    # the daily path already said the greedy fallback (its "solver: ..." note): the run's own
    # sentences of it would say it twice
    said = any(n.startswith("solver: no incumbent") for n in doc.get("notes", []))
    own = [n for n in run.notes if not (said and " greedy " in n)]
    if edited:
        own.append(f"{len(edited)} waiting job(s) ended Failed: a catalog edit removed a site "
                   "or template they name (UnknownSite, UnusableTemplate), so no run could plan "
                   "them: " + ", ".join(f"{u.job_id} ({u.reason})" for u in edited[:10])
                   + (" ..." if len(edited) > 10 else ""))
    if unreadable:
        own.append(f"{len(unreadable)} waiting job(s) ended Failed: their stored spec no longer "
                   "passes the job schema (InvalidSpec; a rule tightened since): "
                   + ", ".join(u.job_id for u in unreadable[:10])
                   + (" ..." if len(unreadable) > 10 else ""))
    if clash:
        own.append(f"{len(clash)} new job(s) share an id with a different job the rolling "
                   "state already holds, and were ignored (the held job keeps the id; submit "
                   f"the new one under another id): {', '.join(clash[:10])}"
                   + (" ..." if len(clash) > 10 else ""))
    doc["notes"] = list(doc.get("notes", [])) + [f"warm start: {how}"] + own
    doc["rolling"] = {
        "horizon_hours": horizon_hours, "run_every_hours": run_every_hours,
        "warm_start": how,
        "commit_before": jsonable(run.commit_before),
        "committed": sorted(p.job_id for p in run.committed),
        "deferred": [{"job_id": p.job_id, "start": jsonable(p.start)} for p in run.deferred],
        "ended": [jsonable(u) for u in run.ended],
        "still_pending": [jsonable(u) for u in run.still_pending],
        "running_held": held,
        "rule": "placements starting before commit_before are committed (dispatched); later "
                "ones stay pending and are planned again by the next run",
    }
    return RollingStep(daily, run, rp, rs)



def plan_job_ids(doc: dict[str, Any]) -> set[str]:
    """The jobs a rolling run's plan document decides on: placed, unplaced or ended by it.

    Parameters
    ----------
    doc
        A stored rolling plan document (with its ``rolling`` section).

    Returns
    -------
    set of str
        Job ids.
    """
    rolling = doc.get("rolling") or {}
    return ({str(p["job_id"]) for p in doc.get("placements", [])}
            | {str(u["job_id"]) for u in doc.get("unplaced", [])}
            | {str(u["job_id"]) for u in rolling.get("ended", [])}
            | {str(u["job_id"]) for u in rolling.get("still_pending", [])})


_PLACEMENT_FIELDS = frozenset(f.name for f in fields(Placement))


def _placement(row: dict[str, Any]) -> Placement:
    """A plan document's placement row as the planner's :class:`~carbonsched.domain.Placement`."""
    d = {k: v for k, v in row.items() if k in _PLACEMENT_FIELDS}
    d["start"] = pd.Timestamp(d["start"]).tz_convert("UTC")
    d["end"] = pd.Timestamp(d["end"]).tz_convert("UTC")
    d["domains"] = tuple(d.get("domains") or ())
    return Placement(**d)


def stored_step(store: Any, catalog: Catalog, issued_at: pd.Timestamp, doc: dict[str, Any],
                jobs: Mapping[str, Job]) -> tuple[RollingPlanner, RunResult]:
    """The rolling step a stored plan made, taken on the saved state again without planning.

    For a run stopped after it stored its plan (and may have dispatched part of it) but before
    it saved the rolling state: the state is loaded as that run loaded it (no run saved it
    since: :func:`carbonsched.service.runs.saved_run`), the plan's jobs the state does not hold
    are added from ``jobs``, the jobs the run ended before planning end with the plan's
    reasons, and the plan's placements are committed or kept pending by the planner's own rule
    (:meth:`~carbonsched.plan.rolling.RollingPlanner.apply`), so that
    :meth:`~carbonsched.store.rolling_state.RollingStore.save` then records what the plan
    decided and dispatch submitted.

    Parameters
    ----------
    store
        The :class:`~carbonsched.store.Store` holding ``rolling_jobs``.
    catalog
        The run's catalog.
    issued_at
        The run's issue time (tz-aware).
    doc
        The stored plan document of the run (with its ``rolling`` section).
    jobs
        Job id -> job, for the plan's jobs the rolling state does not hold yet (the
        workload file's and the API's); others may be in it.

    Returns
    -------
    (RollingPlanner, RunResult)
        The planner holding the state after the step, and the step's result.

    Raises
    ------
    InputError
        The plan names a job that neither the rolling state nor ``jobs`` holds (the workload
        file lost it since), or the step taken again commits or ends other jobs than the plan
        says: the state is then not saved from it.
    """
    from carbonsched.errors import InputError
    from carbonsched.plan import PlanningProblem, PlanResult, PlanStatus, SolverRecord

    t = pd.Timestamp(issued_at).tz_convert("UTC")
    rolling = doc["rolling"]
    named = plan_job_ids(doc)
    rp = RollingPlanner(catalog.sites, horizon_hours=int(rolling["horizon_hours"]),
                        run_every_hours=int(rolling["run_every_hours"]),
                        state=RollingStore(store).load(t, job_ids=sorted(named)))
    lost = sorted(j for j in named if j not in rp.jobs and j not in jobs)
    if lost:
        raise InputError(
            f"plan {doc['plan_id']} of the rolling run issued at {t:%Y-%m-%dT%H:%MZ} names "
            f"job(s) {', '.join(lost[:10])} that neither the rolling state nor the workload "
            "file nor the API's jobs hold now (the workload file was edited since the run "
            "was stopped?): its rolling state cannot be saved from the plan; restore those "
            "jobs in the workload file and run it again")
    rp.submit(jobs[j] for j in sorted(named) if j in jobs)
    in_plan = ({p["job_id"] for p in doc["placements"]}
               | {u["job_id"] for u in doc["unplaced"]})
    ended = rp.end_pending(Unplaced(u["job_id"], ReasonCode(u["reason"]), u.get("detail", ""))
                           for u in rolling.get("ended", []) if u["job_id"] not in in_plan)
    slots = hourly_slots(t, int(rolling["horizon_hours"]))
    pending, running, late = rp.prepare(t, slots)
    status = PlanStatus(doc["solver"]["status"])
    result = PlanResult(
        status=status, solver=SolverRecord(str(doc["solver"].get("name", "")), status),
        placements=[_placement(p) for p in doc["placements"]],
        unplaced=[Unplaced(u["job_id"], ReasonCode(u["reason"]), u.get("detail", ""))
                  for u in doc["unplaced"]])
    problem = PlanningProblem(sites=list(catalog.sites), jobs=pending, inference=[],
                              slots=slots, signals=pd.DataFrame(), running=running)
    run = rp.apply(t, problem, result, [*ended, *late])
    got = (sorted({p.job_id for p in run.committed}), sorted(u.job_id for u in run.ended))
    want = (sorted(rolling.get("committed", [])),
            sorted(u["job_id"] for u in rolling.get("ended", [])))
    if got != want:
        raise InputError(
            f"plan {doc['plan_id']} of the rolling run issued at {t:%Y-%m-%dT%H:%MZ} "
            f"commits {want[0]} and ends {want[1]}, but taken again on the saved rolling state "
            f"it commits {got[0]} and ends {got[1]}: the state or the jobs changed since the "
            "run was stopped; its rolling state is not saved from the plan (`carbonsched "
            f"status {doc['plan_id'][:12]}` shows what dispatch holds)")
    return rp, run
