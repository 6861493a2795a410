"""``carbonsched serve``, ``carbonsched token ...`` and ``carbonsched plan --dispatch``.

``serve`` runs the REST API on uvicorn with the daily cron (APScheduler) in the same process;
``plan --dispatch`` runs the cron's run path (:func:`carbonsched.service.runs.execute_run`) once
from a system cron or a Kubernetes CronJob, idempotent by issue time like the cron itself (with
``--rolling``, the issue time the cron claims now, :func:`rolling_issue`).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from zoneinfo import ZoneInfo

import typer

from carbonsched.cli.common import (
    err,
    errors,
    require_service_extra,
    solver_chatter_to_stderr,
    tomorrow,
)
from carbonsched.errors import InputError, StoreUnavailableError

if TYPE_CHECKING:
    from carbonsched.clock import Clock

token_app = typer.Typer(help="API bearer tokens.", no_args_is_help=True)


def _settings(**overrides: Any):  # noqa: ANN202
    from pydantic import ValidationError

    from carbonsched.config import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"invalid service settings: {msgs}") from exc


def _default(field: str) -> str:
    """The built-in default of a :class:`~carbonsched.config.Settings` field, for ``--help``."""
    from carbonsched.config import Settings

    return str(Settings.model_fields[field].default)


def serve(
    host: Annotated[str | None, typer.Option(
        help=f"Interface to listen on (CARBONSCHED_HOST). \\[default: {_default('host')}]")]
    = None,
    port: Annotated[int | None, typer.Option(
        help=f"TCP port (CARBONSCHED_PORT). \\[default: {_default('port')}]")] = None,
    catalog: Annotated[str | None, typer.Option(
        help="Catalog name or TOML path (CARBONSCHED_CATALOG). "
        f"\\[default: {_default('catalog')}]")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", help="Folder of the real public data.")] = None,
    no_cron: Annotated[bool, typer.Option("--no-cron", help="Serve only; no daily run.")]
    = False,
    as_of: Annotated[str | None, typer.Option(
        "--as-of", help="Pin the service's clock, ISO 8601 with zone (e.g. "
        "2023-07-15T06:00:00Z).")] = None,
    config: Annotated[Path | None, typer.Option(
        help="TOML config file (keys as the CARBONSCHED_* settings, lower case).")] = None,
    workload: Annotated[Path | None, typer.Option(
        "--jobs", help="Workload file the daily run plans (default: demo day).")] = None,
) -> None:
    """Run the REST API and the daily plan -> dispatch cron (FastAPI on uvicorn).

    SIGTERM or Ctrl-C stops it within bounds: no dispatch submission begins after the signal,
    the requests and the background work in progress get CARBONSCHED_SHUTDOWN_TIMEOUT_S each
    (default 30 s), then the process exits 143 or 130.
    """
    with errors():
        require_service_extra("carbonsched serve")
    import threading

    import uvicorn

    from carbonsched.api.app import create_app
    from carbonsched.clock import FixedClock, SystemClock, parse_as_of
    from carbonsched.service.cron import load_dispatch_step

    with errors():
        if config is not None:
            if not config.is_file():
                raise InputError(f"config file {config} not found")
            os.environ["CARBONSCHED_CONFIG"] = str(config)
        clock_at = parse_as_of(as_of) if as_of else None
        s = _settings(host=host, port=port, catalog=catalog, data_dir=data_dir,
                      cron_enabled=False if no_cron else None, as_of=clock_at,
                      workload_file=workload)
        clock = FixedClock(s.as_of) if s.as_of else SystemClock()
        from carbonsched.catalog import load_catalog

        cat = load_catalog(s.catalog)  # fail before binding the port
        if s.cron_enabled:
            from carbonsched.service.cron import check_cron_settings, cron_zone

            check_cron_settings(s, cron_zone(s, cat), clock)
        _check_store_catalog(s, cat.name)
        dispatch = load_dispatch_step(s.dispatcher)
        _check_port_free(s.host, s.port)
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        logging.getLogger("carbonsched").info("settings: %s", s.public_dict())
        stop = threading.Event()
        app = create_app(s, clock, dispatch, stop)
    config = uvicorn.Config(app, host=s.host, port=s.port, log_level="info", access_log=False,
                            timeout_graceful_shutdown=s.shutdown_timeout_s)
    _serve_until_stopped(uvicorn, config, app, stop, s.shutdown_timeout_s)


def _serve_until_stopped(uvicorn: Any, config: Any, app: Any, stop: Any,
                         timeout_s: float) -> None:
    """Run uvicorn; on its first SIGINT or SIGTERM set ``stop`` at once, then exit bounded.

    ``stop`` asks the background work (the dispatch loops, the cron's run) to begin no further
    submission while uvicorn drains the requests (``timeout_graceful_shutdown``). uvicorn then
    raises the signal again, which :mod:`carbonsched.cli.interrupts` turns into
    :class:`~carbonsched.errors.Interrupted` (exit 143 or 130). When the background work was
    still running after ``timeout_s`` (:attr:`~carbonsched.api.state.ServiceState.stuck`), its
    threads would hold the interpreter's exit: the line is printed and the process ends now.
    """
    from carbonsched.cli.interrupts import interrupted_line
    from carbonsched.errors import Interrupted

    class Server(uvicorn.Server):  # type: ignore[misc,name-defined]
        def handle_exit(self, sig: int, frame: Any) -> None:
            stop.set()
            super().handle_exit(sig, frame)

    try:
        Server(config).run()
    except Interrupted as exc:
        state = getattr(app.state, "svc", None)
        stuck = getattr(state, "stuck", None)
        if not stuck:
            raise
        exc.add_note(f"{' and '.join(stuck)} still running after {timeout_s:g} s "
                     "(CARBONSCHED_SHUTDOWN_TIMEOUT_S): left behind; a run it held is taken "
                     "over once its lease runs out")
        err.print(interrupted_line(exc), highlight=False, soft_wrap=True)
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(exc.exit_code)


def _check_port_free(host: str, port: int) -> None:
    """Refuse a host and port this process cannot listen on, before anything starts.

    Binds a socket to each address of ``host`` as asyncio's ``create_server`` (uvicorn's)
    does: ``SO_REUSEADDR``, IPv6 sockets ``IPV6_V6ONLY``, an address family this host lacks
    skipped; then closes them. The port may still be taken in between, when uvicorn says so.

    Raises
    ------
    InputError
        The host does not resolve, or the port is in use or not allowed.
    """
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"--host {host!r} (CARBONSCHED_HOST) does not resolve: {exc}; give an "
                         "address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from exc
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    for family, kind, proto, _, addr in infos:
        try:
            sock = socket.socket(family, kind, proto)
        except OSError:
            continue                      # a family this host lacks (asyncio skips it too)
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                why = ("ports below 1024 need root or CAP_NET_BIND_SERVICE"
                       if exc.errno == errno.EACCES else
                       f"`ss -ltnp 'sport = :{port}'` names a process that holds it")
                raise InputError(f"cannot listen on {where}: {exc.strerror or exc} ({why}); "
                                 "pick another port with --port or CARBONSCHED_PORT") from exc


def _check_store_catalog(settings: Any, catalog: str) -> None:
    """Refuse a store whose runs planned another catalog.

    A dead store is not checked here: the service's outage state says so once it runs.
    """
    from carbonsched.service.runs import check_store_catalog
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    try:
        db = ServiceStore(Store(settings.resolved_database_url()))
    except StoreUnavailableError:
        return
    try:
        check_store_catalog(db, catalog)
    except StoreUnavailableError:
        return


def _token_store():  # noqa: ANN202
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore

    return ServiceStore(Store(_settings().resolved_database_url()))


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Option(help="read, submit or admin.")],
    name: Annotated[str, typer.Option(help="A label for the token.")] = "",
    expires_in: Annotated[str | None, typer.Option(
        "--expires-in", help="Lifetime, <number><unit> with unit s, m, h, d or w (e.g. 90d).")]
    = None,
    expires_at: Annotated[str | None, typer.Option(
        "--expires-at", help="Expiry instant, ISO 8601 with zone (e.g. 2030-01-01T00:00:00Z).")]
    = None,
) -> None:
    """Mint a bearer token; only its hash is stored. The token is the last line printed."""
    from carbonsched.clock import SystemClock, parse_as_of
    from carbonsched.service.tokens import parse_lifetime

    with errors():
        if expires_in is not None and expires_at is not None:
            raise InputError("give --expires-in or --expires-at, not both")
        now = SystemClock().now()
        expiry = now + parse_lifetime(expires_in) if expires_in is not None else None
        if expires_at is not None:
            try:
                expiry = parse_as_of(expires_at)
            except InputError as exc:
                raise InputError(str(exc).replace("--as-of", "--expires-at")) from None
        db = _token_store()
        token_id, token = db.create_token(role, now, name, expiry)
        until = f"valid until {expiry.isoformat()}" if expiry else "no expiry"
        err.print(f"token {token_id} with role {role} stored (hashed) in {db.safe_url()} "
                  f"({until}); it is shown once:", highlight=False, soft_wrap=True)
        print(token)


@token_app.command("list")
def token_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
) -> None:
    """List stored tokens: id, role, label, created, expires, revoked (never the token)."""
    import json

    from carbonsched.clock import SystemClock
    from carbonsched.service.tokens import token_public

    with errors():
        now = SystemClock().now()
        rows = [token_public(r, now) for r in _token_store().tokens()]
        if as_json:
            print(json.dumps({"data": rows, "count": len(rows)}, default=str))
            return
        print("token_id          role    active  created                    expires"
              "                    revoked                    name")
        for r in rows:
            def ts(v: Any) -> str:
                return v.isoformat() if v is not None else "-"
            print(f"{r['token_id']:<17} {r['role']:<7} {'yes' if r['active'] else 'no':<7} "
                  f"{ts(r['created_at']):<26} {ts(r['expires_at']):<26} "
                  f"{ts(r['revoked_at']):<26} {r['name']}")


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (`carbonsched token list`).")],
) -> None:
    """Revoke a token: refused on every replica within CARBONSCHED_TOKEN_CACHE_S seconds."""
    from carbonsched.clock import SystemClock

    with errors():
        s = _settings()
        try:
            row = _token_store().revoke_token(token_id, SystemClock().now())
        except KeyError:
            raise InputError(f"no token {token_id!r}; list them with `carbonsched token "
                             "list`") from None
        err.print(f"token {token_id} ({row['role']}) revoked at "
                  f"{row['revoked_at'].isoformat()}; every replica refuses it within "
                  f"{s.token_cache_s:g} s (CARBONSCHED_TOKEN_CACHE_S)", highlight=False)


def plan_and_dispatch(date: str, catalog: str, jobs: Path | None, data_dir: Path | None,
                      solver: str, time_limit: float, hours: int, out_file: Path | None,
                      rolling: bool | None = None, providers_file: Path | None = None,
                      clock: Clock | None = None) -> int:
    """Run the service's run path once (``carbonsched plan --dispatch``).

    :func:`carbonsched.service.runs.execute_run`, as the cron runs it; idempotent by issue
    time: a run that has a record is not planned again (the record is printed). Daily: the run
    of ``date`` (default tomorrow, UTC), issued at its 00:00 UTC. Rolling (``rolling`` or
    ``CARBONSCHED_ROLLING``): the run the service's cron would claim now, the newest due issue
    time of its cadence (:meth:`carbonsched.service.cron.CronRule.due_issue`), or with ``date``
    the run issued at its 00:00 UTC, refused when that is after the newest due issue time
    (:func:`rolling_issue`); a run stopped after it stored its plan is finished from that
    plan, and a rolling run issued before the newest run of the rolling state (a missed day)
    is refused before it is claimed. ``providers_file`` (``--providers``) overrides
    ``CARBONSCHED_PROVIDERS_FILE``: the run plans on the providers' history and published
    forecasts. ``clock``: "now" (default the machine's clock).

    Returns
    -------
    int
        Exit code: 0 done (or done before), 4 infeasible plan; 3 when the run is held by
        another process or interrupted (run again after its lease), or dispatch left units
        pending; 2 when a backend refused units or nothing was submitted; 1 when the recorded
        run failed. A run that succeeded before is dispatched again (what is still pending;
        exactly once), with the same codes. A run failing now raises its error.

    Raises
    ------
    InputError
        A rolling ``date`` whose 00:00 UTC is after the newest due issue time, or before the
        newest run of the rolling state (a missed run: the message names the newer run;
        :func:`carbonsched.service.runs.saved_run`).
    StoreUnavailableError
        The database was lost during the run (exit 3): one message naming it (URL without the
        password), whether the plan file was written, and when and how to run it again (the
        run record's lease runs out ``lease_s`` after the last heartbeat).
    """
    import json

    from carbonsched.clock import SystemClock
    from carbonsched.service.cron import load_dispatch_step
    from carbonsched.service.runs import execute_run
    from carbonsched.store import Store
    from carbonsched.store.service import ServiceStore, run_key
    from carbonsched.timeaxis import day_start_utc

    clock = clock or SystemClock()
    s = _settings(catalog=catalog, data_dir=data_dir, workload_file=jobs, solver=solver,
                  time_limit_s=time_limit, horizon_hours=hours, rolling=rolling,
                  providers_file=providers_file)
    dispatch = load_dispatch_step(s.dispatcher)
    db = ServiceStore(Store(s.resolved_database_url()))
    from carbonsched.catalog import load_catalog
    from carbonsched.service.runs import check_store_catalog

    cat = load_catalog(s.catalog)
    check_store_catalog(db, cat.name)
    local_day = None
    if s.rolling:
        day, _, issued = rolling_issue(s, cat, date, clock.now())
        local_day = day.isoformat()
        if db.get_run(issued) is None:
            # a run issued before the newest run of the rolling state (a missed one) is
            # refused before a record is claimed for it; one with a record goes on below
            from carbonsched.service.runs import saved_run

            saved_run(db, issued, rolling=True)
    else:
        issued = day_start_utc(date or tomorrow(clock.now())).to_pydatetime()
    pdate = issued.strftime("%Y-%m-%d")
    # a run issued at 00:00 UTC is named by its date (as its record is), others by their key
    label = pdate if run_key(issued) == run_key(pdate) else run_key(issued)
    what = f"planning date {pdate}" if label == pdate else f"the run issued at {label}"
    replica = f"cli@{socket.gethostname()}:{os.getpid()}"
    # the run's own log lines (the failure, the lost heartbeat) are in the one error line
    logging.getLogger("carbonsched.service.runs").addHandler(logging.NullHandler())
    before = _mtime(out_file)
    try:
        with solver_chatter_to_stderr():
            out = execute_run(s, db, clock, planning_date=pdate, issued_at=issued,
                              trigger="cli", replica=replica, dispatch=dispatch,
                              local_day=local_day, out_file=out_file)
    except StoreUnavailableError as exc:
        written = out_file is not None and _mtime(out_file) not in (None, before)
        raise lost_database(exc, pdate, out_file if written else None, s.lease_s,
                            issued if s.rolling else None) from exc
    rec = db.get_run(issued)
    if out is None and rec["status"] in ("running", "interrupted"):
        why = ("is being run by" if rec["status"] == "running" else
               "was interrupted by an outage (retried after its lease) on")
        err.print(f"{what} {why} {rec['replica']} (its lease runs until "
                  f"{rec['lease_expires_at']}, last heartbeat {rec['heartbeat_at']}); not run "
                  "now: run this again after its lease (exit 3)", highlight=False)
        print(json.dumps(rec, default=str))
        return 3
    if out is None and rec["status"] == "abandoned":
        err.print(f"{what} was abandoned by an operator ({rec['error']}); not run again",
                  highlight=False, soft_wrap=True)
        print(json.dumps(rec, default=str))
        return 0
    if out is None:
        err.print(f"{what} already has a run ({rec['status']}, "
                  f"{rec['trigger']} on {rec['replica']}); not run again", highlight=False)
        print(json.dumps(rec, default=str))
        code = RECORDED_EXIT.get(rec["status"], 1)
        if code == 0 and dispatch is not None and rec.get("plan_id"):
            return _dispatch_again(db, s, dispatch, rec["plan_id"], clock)
        return code
    if out_file:
        err.print(f"plan written to {out_file}")
    err.print(f"run for {label}: {rec['status']}, plan {rec['plan_id']}; {rec['dispatch']}",
              highlight=False)
    if out.notes:
        err.print(f"notes: {out.notes}", highlight=False, soft_wrap=True)
    if out.dispatch_outcome == "not_configured":
        err.print("nothing was dispatched: no dispatcher is configured; set "
                  "CARBONSCHED_DISPATCHER=carbonsched.dispatch.outbox:dispatch_plan to submit "
                  "each run's plan to the catalog's backends (docs/service.md)", highlight=False)
    print(json.dumps(rec, default=str))
    if out.status == "infeasible":
        return 4
    return RECORDED_EXIT.get(out.status, 1) or DISPATCH_EXIT.get(out.dispatch_outcome, 0)


def rolling_issue(settings: Any, catalog: Any, date: str, now: datetime
                  ) -> tuple[Any, Any, datetime]:
    """``(local_day, planning_date, issued_at)`` of a rolling ``plan --dispatch`` run at ``now``.

    Without ``date``: the run the service's cron claims at ``now``, the newest due issue time
    of its rule (:meth:`carbonsched.service.cron.CronRule.due_issue`; every N < 24 hours: the
    newest of 00:00 UTC and every N hours after it), so the command and the service's cron
    share its record (one run per issue time). With ``date``: the run issued at its 00:00 UTC,
    which may be earlier than the newest due one but not later: a rolling run issued ahead of
    the clock would commit work the next service runs plan and, as the latest run in the
    store, make every service run issued before it fail ("not after the previous run").

    Raises
    ------
    InputError
        ``date``'s 00:00 UTC is after the newest due issue time; or, daily, cron settings
        whose run comes after its plan's issue time
        (:func:`carbonsched.service.cron.check_daily_issue`).
    """
    from carbonsched.service.cron import CronRule, check_daily_issue
    from carbonsched.store.service import run_key
    from carbonsched.timeaxis import day_start_utc

    rule = CronRule.from_settings(settings, catalog)
    if rule.every_hours == 24:   # the daily rule: as the cron refuses, so does this command
        check_daily_issue(rule.zone, rule.at, rule.offset_days,
                          now.astimezone(ZoneInfo(rule.zone)).date())
    day, planning, due = rule.due_issue(now)
    if not date:
        return day, planning, due
    issued = day_start_utc(date).to_pydatetime()
    zone = ZoneInfo(rule.zone)
    # the local day the cron gives this run (its issue time's, or the day that plans it) and
    # the moment the cron's rule has it due
    if rule.every_hours < 24:
        local, due_at = issued.astimezone(zone).date(), issued
    else:
        local = issued.date() - timedelta(days=rule.offset_days)
        due_at = datetime.combine(local, rule.at, tzinfo=zone).astimezone(UTC)
    if issued > due:
        every = (f"every {rule.every_hours} h from 00:00 UTC "
                 "(CARBONSCHED_ROLLING_RUN_EVERY_HOURS)" if rule.every_hours < 24 else
                 f"daily at {rule.at:%H:%M} {rule.zone}, each planning {rule.offset_days} "
                 "day(s) ahead (CARBONSCHED_CRON_TIME, CARBONSCHED_CRON_PLAN_OFFSET_DAYS)")
        raise InputError(
            f"--rolling --date {date}: the run would be issued at {run_key(issued)}, after the "
            f"newest due issue time {run_key(due)} (now {_utc(now)}; runs are issued {every}); "
            "a rolling run issued ahead of the clock commits work early and makes every "
            "service run issued before it fail. Drop --date to run the run due now "
            f"({run_key(due)}), or run this from {_utc(due_at)}; for a plan of {date} that "
            f"commits nothing, run `carbonsched plan --date {date} --no-store --out plan.json` "
            "(without --dispatch)")
    return local, issued.date(), issued


def _utc(t: datetime) -> str:
    """``t`` in UTC to the second, ``YYYY-MM-DDTHH:MM:SSZ``."""
    return f"{t.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _dispatch_again(db: Any, settings: Any, dispatch: Any, plan_id: str, clock: Any) -> int:
    """Dispatch a done run's plan again; its exit code by :data:`DISPATCH_EXIT`.

    The outbox submits only what is not on its backend yet (exactly once), so a retry after
    exit 3 (units left pending) finishes the day's dispatch instead of reporting it done.
    """
    from carbonsched.catalog import load_catalog
    from carbonsched.service.runs import finish_run

    doc = db.store.get_plan(plan_id)
    rolling = doc.get("rolling") or {}
    kw = ({"commit_before": datetime.fromisoformat(rolling["commit_before"].replace(
        "Z", "+00:00"))} if rolling.get("commit_before") else {})
    # the run path's own dispatch step: a failure is said (exit 1), an outage raised (exit 3)
    run_status, _, disp, outcome, said = finish_run(
        doc, db, load_catalog(settings.catalog), clock, dispatch, None, **kw)
    if run_status == "dispatch_failed":
        err.print(f"plan {plan_id[:12]} dispatched again: {disp}", highlight=False,
                  soft_wrap=True)
        return 1
    err.print(f"plan {plan_id[:12]} dispatched again (what was still pending): {outcome}"
              + (f"; {said}" if said else ""), highlight=False, soft_wrap=True)
    return DISPATCH_EXIT.get(outcome, 0)


RECORDED_EXIT = {"succeeded": 0, "infeasible": 4, "failed": 1, "dispatch_failed": 1}
"""Exit code of ``plan --dispatch`` by run status (a run that did not finish: 3)."""

DISPATCH_EXIT = {"incomplete": 3, "rejected": 2, "nothing_submitted": 2}
"""Exit code of a new ``plan --dispatch`` run by dispatch outcome, as ``carbonsched dispatch``
exits (3: units left pending, run it again; 2: refused or nothing submitted)."""


def _mtime(path: Path | None) -> int | None:
    """``path``'s modification time [ns], or ``None`` when there is no such file."""
    try:
        return None if path is None else path.stat().st_mtime_ns
    except OSError:
        return None


def lost_database(exc: StoreUnavailableError, pdate: str, out_file: Path | None,
                  lease_s: float, rolling_issue_time: datetime | None = None
                  ) -> StoreUnavailableError:
    """The one message of a ``plan --dispatch`` run that lost its database.

    Names the database (URL without its password) and what was being done, says whether the
    plan file was written (``out_file``; ``None``: not written), and how to run it again: the
    run record, if it was claimed, is ``running`` or ``interrupted`` until its lease runs out
    (``lease_s`` after the last heartbeat); then the same command (or any replica's cron)
    takes it over. ``rolling_issue_time``: the issue time of a rolling run (``--rolling``),
    which the command without ``--date`` runs again while it is the newest due one.
    """
    wrote = (f"the plan is written to {out_file}" if out_file is not None
             else "no plan file was written")
    if rolling_issue_time is None:
        again, what = f"--date {pdate}", "the date's run record"
    else:
        from carbonsched.store.service import run_key

        key = run_key(rolling_issue_time)
        if key == run_key(pdate):
            again, what = f"--rolling --date {pdate}", f"the record of the run issued at {key}"
        else:   # --date names 00:00 only: without it, the newest due issue time is run
            again = "--rolling"
            what = (f"the record of the run issued at {key}, while no later issue time is "
                    "due,")
    hint = (f"{wrote}; once the database is back, run `carbonsched plan --dispatch {again}` "
            f"again (it takes {what} over {lease_s:g} s after this run's last heartbeat)")
    return StoreUnavailableError(exc.url, exc.doing, exc.detail, hint)


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``token`` to the main CLI."""
    app.command()(serve)
    app.add_typer(token_app, name="token")
