"""The pre-check of one job: where it can run at all, and whether its window meets the horizon.

One set of rules, order and messages for the planner (:func:`carbonsched.plan.compile_sets`, over
every job of a problem) and the API's placement book
(:meth:`carbonsched.service.placement.PlacementBook.job_options`, one job per query), so both
refuse a job for the same reason in the same words. Both pass the IT power allowed in the job's
window: the IT cap, the facility cap divided by the PUE's upper 95 % bound, and grid-event
commitments (the book reads the plan's PUE bounds and commitments).

The site checks, in order (the first that leaves no site is the job's reason):

1. the GPU type exists in the catalog (``UnknownGpuType``);
2. an allowed site is in the catalog (``DataResidency``);
3. a site's backend runs what the job names (``NoPayload``; only for a job with a payload);
4. a site has the GPU type (``NoFeasibleSlot``), enough of it (``GangTooLarge``), a node shape
   that cuts the gang into whole nodes (``GangNotWholeNodes``), and network domains that hold
   a topology-bound gang (``DomainTooSmall``);
5. a site's IT power cap in the job's window covers the job's draw (``ExceedsPowerCap``).

Then the window: the deadline is after the horizon start (``DeadlinePassed``), some start ends
by the deadline (``DeadlinePassed`` for work already due, else ``NoFeasibleSlot``), and some such
start is inside the horizon (``DeferredPastHorizon``: a later run plans it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
import pandas as pd

from carbonsched.domain import (
    Job,
    ReasonCode,
    Site,
    domain_reason,
    domains_hold,
    gang_shape_reason,
    payload_reason,
    runs_at,
)

Reason = tuple[ReasonCode, str]
"""A reason code and its detail (the sentence the user reads)."""


def site_precheck(job: Job, sites: Sequence[Site], spos: Mapping[str, int],
                  known_types: Collection[str], count: np.ndarray,
                  whole_nodes: Callable[[int], bool], cap_kw: Callable[[], np.ndarray],
                  it_cap_kw: np.ndarray | None = None) -> tuple[Reason | None, list[int]]:
    """The sites ``job`` can run at, or the reason it can run at none.

    Parameters
    ----------
    job
        The job.
    sites
        The problem's sites, by position.
    spos
        Site id -> position in ``sites``.
    known_types
        GPU types any site of the catalog has.
    count
        GPUs of the job's type per site position, shape ``(S,)`` (0 where a site lacks the
        type). [-]
    whole_nodes
        Whether a site position's node shape cuts the job's gang into whole nodes.
    cap_kw
        The most IT power each site allows in any slot the job could occupy, shape ``(S,)``;
        called only when the power check is reached. [kW]
    it_cap_kw
        Each site's own IT power cap, shape ``(S,)``, when ``cap_kw`` may be lower because of
        a facility cap: the message then says so. [kW]

    Returns
    -------
    (reason, sites)
        ``reason`` when no site is left, else ``None`` and the site positions left (in the
        order of ``job.allowed_sites``, or ascending).
    """
    if job.gpu_type not in known_types:
        return (ReasonCode.UNKNOWN_GPU_TYPE,
                f"no site in the catalog has GPU type {job.gpu_type!r}"), []
    if job.allowed_sites:
        cand = [spos[s] for s in job.allowed_sites if s in spos]
        if not cand:
            return (ReasonCode.DATA_RESIDENCY,
                    f"none of the allowed sites {list(job.allowed_sites)} is in the catalog"), []
    else:
        cand = list(range(len(sites)))
    # only where the site's backend runs what the job names (dispatch would refuse it)
    if job.payload is not None:
        ran = [s for s in cand if runs_at(sites[s], job)]
        if not ran:
            return payload_reason(job, [sites[s] for s in cand]), []
        cand = ran
    typed = [s for s in cand if count[s] > 0]
    if not typed:
        return (ReasonCode.NO_FEASIBLE_SLOT,
                f"no allowed site has GPU type {job.gpu_type!r}"), []
    fits = [s for s in typed if count[s] >= job.gpus]
    if not fits:
        return (ReasonCode.GANG_TOO_LARGE,
                f"gang of {job.gpus} {job.gpu_type} exceeds every allowed site "
                f"(largest {int(count[typed].max())})"), []
    # a gang larger than a node runs on whole nodes only (the site's node shape)
    shaped = [s for s in fits if whole_nodes(s)]
    if not shaped:
        return gang_shape_reason(job.gpus, job.gpu_type, [sites[s] for s in fits]), []
    fits = shaped
    # a gang with a topology constraint: only where that many network domains hold it
    if job.max_domains is not None:
        spanned = [s for s in fits if domains_hold(sites[s], job)]
        if not spanned:
            return domain_reason(job, [sites[s] for s in fits]), []
        fits = spanned
    cap = cap_kw()
    kw = job.it_power_kw
    powered = [s for s in fits if cap[s] >= kw - 1e-9]
    if not powered:
        by_facility = it_cap_kw is not None and any(cap[s] < it_cap_kw[s] - 1e-9 for s in fits)
        return (ReasonCode.EXCEEDS_POWER_CAP,
                f"job draws {kw:.1f} kW IT power, above every allowed site's cap in its "
                f"window (largest {cap[fits].max():.1f} kW"
                + (", with facility power caps at the PUE's upper bound)" if by_facility
                   else ")")), []
    return None, powered


def window_precheck(job: Job, deadline_slots: float, first: int, last_any: int, last: int,
                    t0: pd.Timestamp, horizon_end: pd.Timestamp,
                    grid_word: str = "the hour") -> Reason | None:
    """Whether the job's window meets the horizon, or the reason it does not.

    Parameters
    ----------
    job
        The job.
    deadline_slots
        Its deadline, in slots from the horizon start ``t0``. [slots]
    first
        Its first start slot (its earliest start rounded up to the grid, at least 0). [slot]
    last_any
        Its latest start slot that still ends by the deadline, not cut to the horizon. [slot]
    last
        ``last_any`` cut to the horizon's last slot. [slot]
    t0, horizon_end
        The horizon's start and end (UTC).
    grid_word
        How the message names the start grid (``"the hour"``, ``"the 15-minute grid"``).

    Returns
    -------
    (ReasonCode, str) or None
        ``None`` when some start inside the horizon ends by the deadline.
    """
    if deadline_slots <= 0:
        return (ReasonCode.DEADLINE_PASSED,
                f"deadline {job.deadline.isoformat()} is before the horizon starts")
    if last_any < first:
        if job.earliest_start < t0:
            return (ReasonCode.DEADLINE_PASSED,
                    f"started at the horizon start {t0.isoformat()}, its "
                    f"{job.duration_minutes} min would end after its deadline "
                    f"{job.deadline.isoformat()}")
        return (ReasonCode.NO_FEASIBLE_SLOT,
                f"no start in [{job.earliest_start.isoformat()} rounded up to {grid_word}, "
                f"deadline - {job.duration_minutes} min]")
    if last < first:
        # no start inside the horizon, but one after it: pending for a later run
        return (ReasonCode.DEFERRED_PAST_HORIZON,
                f"earliest start {job.earliest_start.isoformat()} is at or after the horizon "
                f"end {horizon_end.isoformat()}; a later run plans it")
    return None
