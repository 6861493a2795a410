"""Leases on outbox rows: a dispatcher claims an intent before any side effect.

A claim is a lease written into the row itself (``lease_owner``, ``lease_expires_at`` of
``dispatch_intents``): the owner is one dispatcher run (:func:`owner_identity`), the expiry is in
the *database's* clock (PostgreSQL's ``clock_timestamp()``; the host's clock for SQLite, which is
a file on that host), so dispatchers on hosts with skewed clocks agree on it.

- :meth:`Claimant.claim` takes every pending row of the given sites that is free, whose lease
  has expired, or whose holder is known dead (:func:`holder_is_dead`). On PostgreSQL the rows are
  read with ``SELECT ... FOR UPDATE SKIP LOCKED`` (a concurrent claimant skips them instead of
  waiting) and updated in the same transaction; on SQLite each row is taken by a conditional
  ``UPDATE ... WHERE lease_owner IS <seen> AND lease_expires_at IS <seen>`` (a compare-and-set:
  SQLite serialises writers, so of two claimants that saw the same free row one updates it and
  the other's update matches nothing). A later piece of a job is claimed only with, or after,
  its earlier pending pieces (a resumed piece is chained to its predecessor on the backend).
- :meth:`Claimant.begin_side_effect` renews one row's lease and stamps ``submit_attempted_at``
  *only if the row is still ours and pending*, right before its submission: a claimant that lost
  its lease (it stalled past the expiry and another took the row over) never submits. A full
  lease is then left for the submission, which is why the lease must be at least twice the
  backend call's timeout (checked by :func:`check_lease_covers`).
- :meth:`Claimant.heartbeat` renews every row this claimant holds every third of the lease while
  it works, and releases them all when the work ends (also on an error).
- A claimant killed while holding rows leaves them leased until the expiry (or at once, when
  the holder was a process on this host that is gone: :func:`holder_is_dead`); the next
  claimant takes them over and the outbox looks each one up on its backend by key before any
  resubmission (``submit_attempted_at``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from carbonsched.domain import JobState
from carbonsched.errors import InputError
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

PENDING = JobState.PENDING.value
RENEW_FRACTION = 1 / 3
"""The heartbeat renews every ``RENEW_FRACTION * lease_s``: two renewals may be missed before a
lease lapses. [-] A project choice (Kubernetes' leader election renews at a similar ratio)."""


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _host_parts() -> tuple[str, str, str]:
    host = socket.gethostname()[:64]
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        boot = "-"
    try:
        pidns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pidns = "-"
    return host, boot, pidns


def owner_identity() -> str:
    """A lease owner id unique to this dispatcher run.

    ``<host>/<boot id>/<pid namespace>/<pid>/<process start>/<random>``: the first five say which
    process holds a lease (so a claimant on the same host can tell that it died), the random
    part tells two claimants of one process apart.
    """
    host, boot, pidns = _host_parts()
    pid = os.getpid()
    return f"{host}/{boot}/{pidns}/{pid}/{_proc_start(pid) or '-'}/{uuid.uuid4().hex[:8]}"


def holder_is_dead(owner: str) -> bool:
    """True when ``owner`` was a process on this host (same boot, same PID namespace) that is gone.

    A process is gone when no process has its pid, or the one that has it started at another
    time (the pid was reused). An owner on another host, another boot or another PID namespace
    is never judged dead here: its lease must expire.
    """
    parts = owner.split("/")
    if len(parts) != 6 or "-" in parts[:3] or parts[4] == "-":
        return False
    if tuple(parts[:3]) != _host_parts() or not parts[3].isdigit():
        return False
    return _proc_start(int(parts[3])) != parts[4]


def check_lease_covers(lease_s: float, call_timeout_s: float, what: str) -> None:
    """Refuse a lease shorter than twice the timeout of the side effect it covers.

    A claimant renews the lease right before a submission and gives up on the submission
    after ``call_timeout_s``; a lease of at least twice that leaves the submission inside the
    lease even when the renewal before it was slow.

    Raises
    ------
    InputError
        ``lease_s < 2 * call_timeout_s`` (the message names both and the settings).
    """
    if lease_s < 2 * call_timeout_s:
        raise InputError(
            f"the dispatch lease ({lease_s:g} s, CARBONSCHED_DISPATCH_LEASE_S) is shorter than "
            f"twice the timeout of {what} ({call_timeout_s:g} s): a submission could outlive "
            "its claim and be made twice; raise the lease or lower "
            "CARBONSCHED_DISPATCH_BACKEND_TIMEOUT_S")


@dataclass
class Claim:
    """The rows one :meth:`Claimant.claim` took.

    Attributes
    ----------
    ids
        Row ids now held by the claimant.
    taken_over
        Of those, the ids whose previous holder's lease had expired or who was dead.
    """

    ids: list[int] = field(default_factory=list)
    taken_over: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Holding:
    """A pending row held by another claimant (for waiting and for the summary)."""

    key: str
    owner: str
    expires_at: datetime


class Claimant:
    """One dispatcher run's claims on the outbox.

    Parameters
    ----------
    store
        The store holding ``dispatch_intents``.
    lease_s
        Lease length. [s]
    owner
        Lease owner id; default :func:`owner_identity`.
    is_dead
        Tells whether another owner is known dead (default :func:`holder_is_dead`); tests pass
        ``lambda _: False`` to make every takeover wait for the expiry.
    """

    def __init__(self, store: Store, lease_s: float, *, owner: str | None = None,
                 is_dead: Callable[[str], bool] = holder_is_dead) -> None:
        if lease_s <= 0:
            raise InputError(f"the dispatch lease must be > 0 s, got {lease_s:g}")
        self.store = store
        self.lease = timedelta(seconds=lease_s)
        self.owner = owner or owner_identity()
        self.is_dead = is_dead
        self.missed_beats = 0
        """Heartbeat renewals that failed (the database did not answer). [-]"""
        self._pg = store.engine.dialect.name == "postgresql"

    # -- time -----------------------------------------------------------------------------------
    def db_now(self, conn: Connection | None = None) -> datetime:
        """Now in the database's clock (tz-aware UTC)."""
        if not self._pg:
            return datetime.now(UTC)
        if conn is None:
            with self.store.engine.connect() as c:
                return self.db_now(c)
        return conn.execute(text("SELECT clock_timestamp()")).scalar_one().astimezone(UTC)

    def _write(self, fn: Callable[[Connection], object], doing: str) -> object:
        def run() -> object:
            with self.store.engine.begin() as conn:
                return fn(conn)
        return self.store._retry_locked(run, doing)

    # -- claiming -------------------------------------------------------------------------------
    def claim(self, sites: Collection[str], keys: Collection[str] | None = None) -> Claim:
        """Take the claimable pending rows of ``sites`` (only ``keys`` when given).

        Claimable: free, lease expired, held by this claimant, or held by an owner
        :attr:`is_dead` says is dead. A piece is taken only if every earlier pending piece of
        its job is taken too.
        """
        def take(conn: Connection) -> Claim:
            now = self.db_now(conn)
            q = select(DispatchRow.id, DispatchRow.job_id, DispatchRow.piece,
                       DispatchRow.lease_owner, DispatchRow.lease_expires_at).where(
                DispatchRow.state == PENDING, DispatchRow.site.in_(list(sites))
            ).order_by(DispatchRow.id)
            if keys is not None:
                q = q.where(DispatchRow.key.in_(list(keys)))
            if self._pg:
                q = q.with_for_update(skip_locked=True)
            rows = conn.execute(q).all()
            free = {}
            for r in rows:
                if (r.lease_owner is None or r.lease_owner == self.owner
                        or r.lease_expires_at is None or r.lease_expires_at <= now
                        or self.is_dead(r.lease_owner)):
                    free[r.id] = r
            # a piece only with its earlier pending pieces (pending rows not claimable block it)
            blocked_from: dict[str, int] = {}
            for r in rows:
                if r.id not in free:
                    blocked_from[r.job_id] = min(r.piece, blocked_from.get(r.job_id, r.piece))
            ids = [i for i, r in free.items() if r.piece < blocked_from.get(r.job_id, 1 << 30)]
            out = Claim()
            if not ids:
                return out
            expires = now + self.lease
            if self._pg:  # the rows are locked by this transaction: one update takes them all
                conn.execute(update(DispatchRow).where(DispatchRow.id.in_(ids)).values(
                    lease_owner=self.owner, lease_expires_at=expires))
                got = ids
            else:  # compare-and-set on what was seen
                got = []
                for i in ids:
                    seen = free[i]
                    res = conn.execute(update(DispatchRow).where(
                        DispatchRow.id == i, DispatchRow.state == PENDING,
                        DispatchRow.lease_owner.is_not_distinct_from(seen.lease_owner),
                        DispatchRow.lease_expires_at.is_not_distinct_from(seen.lease_expires_at),
                    ).values(lease_owner=self.owner, lease_expires_at=expires))
                    if res.rowcount == 1:
                        got.append(i)
            out.ids = got
            out.taken_over = {i for i in got
                              if free[i].lease_owner not in (None, self.owner)}
            return out

        return self._write(take, "claiming outbox rows")  # type: ignore[return-value]

    def claim_key(self, key: str) -> tuple[bool, str | None, datetime | None]:
        """Take the lease of the row ``key`` whatever its state (for a cancel).

        Taken when the row is free, its lease expired, held by this claimant, or held by an
        owner :attr:`is_dead` says is dead; a compare-and-set on what was seen, on either
        database.

        Returns
        -------
        (bool, str or None, datetime or None)
            Whether it was taken; else the live holder and its lease's expiry (UTC).

        Raises
        ------
        InputError
            No row has that key.
        """
        def take(conn: Connection) -> tuple[bool, str | None, datetime | None]:
            now = self.db_now(conn)
            r = conn.execute(select(DispatchRow.id, DispatchRow.lease_owner,
                                    DispatchRow.lease_expires_at).where(
                DispatchRow.key == key)).first()
            if r is None:
                raise InputError(f"no dispatch intent has key {key!r}: it was never dispatched")
            if not (r.lease_owner is None or r.lease_owner == self.owner
                    or r.lease_expires_at is None or r.lease_expires_at <= now
                    or self.is_dead(r.lease_owner)):
                return False, r.lease_owner, r.lease_expires_at
            res = conn.execute(update(DispatchRow).where(
                DispatchRow.id == r.id,
                DispatchRow.lease_owner.is_not_distinct_from(r.lease_owner),
                DispatchRow.lease_expires_at.is_not_distinct_from(r.lease_expires_at),
            ).values(lease_owner=self.owner, lease_expires_at=now + self.lease))
            if res.rowcount == 1:
                return True, None, None
            held = conn.execute(select(DispatchRow.lease_owner, DispatchRow.lease_expires_at
                                       ).where(DispatchRow.id == r.id)).one()
            return False, held.lease_owner, held.lease_expires_at

        return self._write(take, f"claiming outbox row {key}")  # type: ignore[return-value]

    def begin_side_effect(self, row_id: int) -> bool:
        """Renew one row's lease and stamp ``submit_attempted_at``, if it is still ours.

        Call right before the submission; submit only when this returns True.
        """
        def renew(conn: Connection) -> bool:
            now = self.db_now(conn)
            res = conn.execute(update(DispatchRow).where(
                DispatchRow.id == row_id, DispatchRow.lease_owner == self.owner,
                DispatchRow.state == PENDING,
            ).values(lease_expires_at=now + self.lease, submit_attempted_at=now))
            return res.rowcount == 1

        return bool(self._write(renew, "renewing a lease before a submission"))

    def renew_all(self) -> int:
        """Extend every lease this claimant holds; returns how many rows. [-]"""
        def renew(conn: Connection) -> int:
            now = self.db_now(conn)
            return conn.execute(update(DispatchRow).where(
                DispatchRow.lease_owner == self.owner).values(
                lease_expires_at=now + self.lease)).rowcount

        return int(self._write(renew, "renewing leases"))  # type: ignore[arg-type]

    def release(self, ids: Collection[int] | None = None) -> int:
        """Give up this claimant's leases (of ``ids``, or all); returns how many rows. [-]"""
        def free(conn: Connection) -> int:
            q = update(DispatchRow).where(DispatchRow.lease_owner == self.owner)
            if ids is not None:
                q = q.where(DispatchRow.id.in_(list(ids)))
            return conn.execute(q.values(lease_owner=None, lease_expires_at=None)).rowcount

        if ids is not None and not ids:
            return 0
        return int(self._write(free, "releasing leases"))  # type: ignore[arg-type]

    def held_elsewhere(self, keys: Collection[str]) -> list[Holding]:
        """Pending rows among ``keys`` that another live claimant holds now."""
        with self.store.engine.connect() as conn:
            now = self.db_now(conn)
            rows = conn.execute(select(DispatchRow.key, DispatchRow.lease_owner,
                                       DispatchRow.lease_expires_at).where(
                DispatchRow.key.in_(list(keys)), DispatchRow.state == PENDING,
                DispatchRow.lease_owner.is_not(None),
                DispatchRow.lease_owner != self.owner)).all()
        return [Holding(r.key, r.lease_owner, r.lease_expires_at) for r in rows
                if r.lease_expires_at is not None and r.lease_expires_at > now
                and not self.is_dead(r.lease_owner)]

    @contextlib.contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Renew this claimant's leases every third of the lease while the block runs.

        On leaving the block (normally or by an exception) every lease still held is released;
        an interruption (a ``BaseException`` that is no ``Exception``: a signal) gets a note
        saying how many were, or why not.
        A renewal that fails (the database is briefly unreachable) is tried again at the next
        beat; the lease covers two missed beats.
        """
        stop = threading.Event()
        every = self.lease.total_seconds() * RENEW_FRACTION

        def beat() -> None:
            while not stop.wait(every):
                try:
                    self.renew_all()
                except Exception:  # noqa: BLE001 - the next beat tries again; counted
                    self.missed_beats += 1

        t = threading.Thread(target=beat, name=f"lease-heartbeat-{self.owner[-8:]}",
                             daemon=True)
        t.start()
        try:
            yield
        except BaseException as exc:
            stop.set()
            t.join(timeout=every + 5)
            if isinstance(exc, Exception):
                with contextlib.suppress(OperationalError):
                    self.release()
            else:   # interrupted (a signal): the note says what was given up, if anything
                note = self._release_note()
                if note:
                    exc.add_note(note)
            raise
        stop.set()
        t.join(timeout=every + 5)
        with contextlib.suppress(OperationalError):
            self.release()

    def _release_note(self) -> str:
        """Release every lease of this claimant; say how many, or why not ("" for none held)."""
        try:
            n = self.release()
        except Exception as exc:  # noqa: BLE001 - said instead: the leases then run out
            orig = getattr(exc, "orig", None) or exc
            return (f"dispatch claims of {self.owner} not released, they run out after "
                    f"{self.lease.total_seconds():.0f} s: {' '.join(str(orig).split())[:200]}")
        if not n:
            return ""
        return (f"{n} dispatch claim{'s' * (n != 1)} released (another dispatcher may take "
                "them at once)")
