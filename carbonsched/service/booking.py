"""Reservations booked exactly once: the database is the arbiter, the placement book a fast view.

A reservation (``POST /v1/placements`` with ``reserve: true``, or a job of ``POST /v1/jobs``
placed into the current plan) is made by :func:`reserve_job`:

1. the replica's :class:`~carbonsched.service.placement.PlacementBook` recommends a site and
   start from its in-memory view (the plan's load and the reservations it knows of; the
   periodic refresh may lag the database by one refresh interval, and other replicas' newest
   reservations may be missing from it);
2. :meth:`carbonsched.store.service.ServiceStore.reserve_job` takes the lock row of that plan's
   site, re-checks the fit against the reservations committed there
   (:meth:`~carbonsched.service.placement.PlacementBook.fits_with`) and inserts the job only
   if it fits, in one transaction;
3. the answer is returned only after that commit. If the check fails (the view was stale), the
   book takes the site's committed reservations and places the job again, at most
   :data:`BOOKING_ATTEMPTS` times.

So the sum of reservations and the plan's own load never exceeds a site's GPUs or IT power
cap in any hour, whatever the interleaving of requests, refreshes, restarts and replicas,
and every acknowledged reservation is a committed row.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial
from typing import Any

import pandas as pd

from carbonsched.domain import Job
from carbonsched.errors import BackendUnavailableError
from carbonsched.service.placement import PlacementBook
from carbonsched.store.service import ServiceStore

BOOKING_ATTEMPTS = 8
"""Placements tried for one reservation before giving up with 503: each failed attempt means
another reservation took the capacity first (the system made progress), and corrects this
replica's view of that site. [-]"""
BOOKING_RETRY_AFTER_S = 1
"""``Retry-After`` of the 503 answered when every attempt lost its race. [s]"""


class BookingContentionError(BackendUnavailableError):
    """Every attempt to book a job lost its race for the capacity it was offered (retry)."""

    retry_after_s = BOOKING_RETRY_AFTER_S


def job_row(spec: dict[str, Any], ans: dict[str, Any] | None, reserved: bool, now: datetime,
            no_plan: str = "no plan loaded", awaiting_reason: str = "AwaitingPlan"
            ) -> dict[str, Any]:
    """The ``service_jobs`` row of a submitted job, in the state its placement answer gives it.

    Parameters
    ----------
    spec
        The job spec as JSON-able dict (``id``, ``tenant``, ...).
    ans
        :meth:`PlacementBook.place_job`'s answer, or ``None`` when no plan is loaded.
    reserved
        Whether the answer's recommended option is booked (state ``Planned``).
    now
        Submission time (tz-aware).
    no_plan, awaiting_reason
        Detail and reason of a job submitted while no plan is loaded.
    """
    row: dict[str, Any] = {"job_id": spec["id"], "tenant": spec["tenant"],
                           "spec_json": json.dumps(spec), "submitted_at": now,
                           "updated_at": now, "reserved": False, "detail": ""}
    if ans is None:
        row |= {"state": "Pending", "reason": awaiting_reason, "detail": no_plan}
    elif ans["placed"] and reserved:
        rec = ans["recommended"]
        row |= {"state": "Planned", "reason": "Placed", "plan_id": ans["plan_id"],
                "site": rec["site"], "start": pd.Timestamp(rec["start"]).to_pydatetime(),
                "end": pd.Timestamp(rec["end"]).to_pydatetime(),
                "emissions_kg": rec["emissions_kg"], "energy_kwh": rec["energy_kwh"],
                "reserved": True}
    else:
        row |= {"state": "Pending", "reason": ans["reason"], "detail": ans["detail"],
                "plan_id": ans["plan_id"]}
    return row


def reserve_job(book: PlacementBook, db: ServiceStore, job: Job, spec: dict[str, Any],
                now: datetime, alternatives: int = 3
                ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Place ``job`` in ``book``'s plan and book it durably (see the module docstring).

    Parameters
    ----------
    book
        The plan's placement book (this replica's view).
    db
        The service store (the arbiter).
    job
        The job to place.
    spec
        Its spec as stored (``JobSpec`` fields, JSON-able).
    now
        The service clock's time: starts before it are not offered; submission time.
    alternatives
        Next-best options in the answer.

    Returns
    -------
    (answer, row)
        :meth:`PlacementBook.place_job`'s answer for the option booked, and the committed
        row; ``row`` is ``None`` when the job has no room (the answer says why; nothing is
        stored).

    Raises
    ------
    DuplicateJobError
        The job id exists already.
    BookingContentionError
        :data:`BOOKING_ATTEMPTS` attempts each lost the capacity they were offered to another
        reservation committed first.
    """
    with book.booking_lock:
        return _reserve(book, db, job, spec, now, alternatives)


def _reserve(book: PlacementBook, db: ServiceStore, job: Job, spec: dict[str, Any],
             now: datetime, alternatives: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    for _ in range(BOOKING_ATTEMPTS):
        ans = book.place_job(job, now, alternatives)
        if not ans["placed"]:
            return ans, None
        booking = book.booking_of_answer(job, ans)
        row = job_row(spec, ans, True, now)
        ok, committed = db.reserve_job(row, now, partial(book.fits_with, booking),
                                       book.booking_window(booking))
        # the reservations the check saw (those sharing an hour with this one): learnt for free
        book.add_reservations(committed)
        if ok:
            book.add_reservation(job.id, booking)
            return ans, row
        # this replica's view was stale: take the site's committed reservations, place again
        book.set_site_reservations(row["site"], db.jobs(plan_id=book.plan_id,
                                                        site=row["site"], reserved=True))
    raise BookingContentionError(
        f"job {job.id!r}: the capacity offered was taken by other reservations "
        f"{BOOKING_ATTEMPTS} times in a row while booking; nothing was reserved — retry in "
        f"{BOOKING_RETRY_AFTER_S} s")
