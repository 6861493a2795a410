"""Placement queries against the current plan: where and when should this job run?

:class:`PlacementBook` holds, for one stored plan, the forecasts that plan used and the capacity
it leaves free in every hour it covers (GPUs per site, hour and type; IT power under each site's
cap; green surplus not yet absorbed), minus the reservations booked into it since. A query
compiles the job with the planner's own sets (:func:`carbonsched.plan.compile_sets`: the same
pre-check reason codes and feasible ``(site, start)`` options as the daily MILP), keeps the
options with room for the whole run, and prices each with the plan's emissions accounting
(:func:`carbonsched.plan.result.emissions_by_site_hour`: facility energy IT × PUE, green surplus
absorbed first, the rest at the forecast grid carbon intensity). Nothing is re-forecast per
request.

The carbon-agnostic alternative is the planner's baseline rule (:func:`carbonsched.plan.
agnostic_plan`): the earliest start with room, at the first allowed site in the job's order.

The book is one replica's view, refreshed from the store; it never books by itself. A
reservation is checked again and written by the store under the site's lock
(:func:`carbonsched.service.booking.reserve_job`), then applied here
(:meth:`PlacementBook.add_reservation`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.catalog import Catalog
from carbonsched.domain import (
    InferenceDemand,
    Job,
    ReasonCode,
    jsonable,
)
from carbonsched.errors import InputError, UnknownSiteError
from carbonsched.plan import PlanningProblem, compile_sets
from carbonsched.plan.precheck import site_precheck, window_precheck
from carbonsched.plan.result import emissions_by_site_hour
from carbonsched.plan.sets import PUE_CAP_COLUMN, continue_signal
from carbonsched.timeaxis import HOUR, hourly_slots

SIGNALS = {"carbon_intensity": ("carbon_intensity_g_per_kwh", "gCO2eq/kWh"),
           "green_surplus": ("green_surplus_index", "index 0..1 of the site's contracted "
                             "absorbable green power"),
           "pue": ("pue", "-")}
"""API signal name -> (stored signal, unit)."""


@dataclass
class Booking:
    """Capacity one piece of work takes.

    ``kw`` IT power and ``gpus`` of type ``gtype`` at site position ``s`` over slot positions
    ``t0 .. t1 - 1``.
    """

    s: int
    t0: int
    t1: int
    gtype: int
    gpus: int
    kw: float


class PlacementBook:
    """The free capacity and forecasts of one plan (see the module docstring).

    Parameters
    ----------
    catalog
        The catalog the plan was made for.
    plan
        The plan document (``carbonsched plan --out`` keys, with ``issued_at``,
        ``horizon_hours`` and ``sites``).
    forecasts
        The plan's forecast rows (site, signal, model, issued_at, ts, mean, lo/hi 80/95).

    Raises
    ------
    InputError
        The forecasts do not cover a site and hour of the plan, or the plan is not on the
        hourly slot grid (``slot_minutes`` other than 60).
    """

    def __init__(self, catalog: Catalog, plan: dict[str, Any], forecasts: pd.DataFrame) -> None:
        self.catalog = catalog
        self.plan = plan
        self.plan_id: str = plan["plan_id"]
        if int(plan.get("slot_minutes", 60)) != 60:
            # the book keeps hourly ledgers: a sub-hour plan would be booked wrong, not refused
            raise InputError(f"plan {self.plan_id} is on a {plan['slot_minutes']}-minute slot "
                             "grid; placement queries need an hourly plan (plan without "
                             "--slot-minutes)")
        known = set(catalog.site_ids)
        self.sites = [catalog.site(s) for s in plan.get("sites", catalog.site_ids) if s in known]
        self.spos = {s.id: i for i, s in enumerate(self.sites)}
        issued = pd.Timestamp(plan.get("issued_at") or f"{plan['date']}T00:00:00Z")
        self.slots = hourly_slots(issued, int(plan.get("horizon_hours", 24)))
        self._t0_ns = int(self.slots[0].value)
        """Start of the horizon in ns since the epoch (per-query arithmetic stays off pandas)."""
        self.tpos = {ts: i for i, ts in enumerate(self.slots)}
        self.slot_iso = [jsonable(t) for t in self.slots] + [jsonable(self.slots[-1] + HOUR)]
        self.gtypes = sorted({g for s in self.sites for g in s.gpus})
        self.gpos = {g: i for i, g in enumerate(self.gtypes)}
        n_s, n_t = len(self.sites), len(self.slots)
        fc = forecasts.copy()
        fc["ts"] = pd.to_datetime(fc["ts"], utc=True)
        self.forecast_rows = fc
        wide = fc.pivot_table(index=["site", "ts"], columns="signal", values="mean")
        full = pd.MultiIndex.from_product([[s.id for s in self.sites], self.slots])
        wide = wide.reindex(full)

        def arr(col: str, fill: float | None = None) -> np.ndarray:
            if col not in wide:
                if fill is None:
                    raise InputError(f"plan {self.plan_id} has no {col} forecast")
                return np.full((n_s, n_t), fill)
            a = wide[col].to_numpy(float).reshape(n_s, n_t)
            if np.isnan(a).any():
                if fill is None:
                    s, t = np.argwhere(np.isnan(a))[0]
                    raise InputError(f"plan {self.plan_id}: {col} forecast missing for "
                                     f"{self.sites[s].id} at {self.slots[t].isoformat()}")
                a = np.nan_to_num(a, nan=fill)
            return a

        self.ci = arr("carbon_intensity_g_per_kwh")
        self.pue = arr("pue")
        gsi = arr("green_surplus_index", 0.0)
        self.surplus_kw = gsi * np.array([s.green_surplus_max_kw for s in self.sites])[:, None]
        # the PUE a grid connection is planned against: the forecast's upper 95 % bound, never
        # below the point forecast (as carbonsched.pipeline.daily passes it to the planner)
        hi = fc[fc["signal"] == "pue"].pivot_table(index=["site", "ts"], values="hi_95") \
            if "hi_95" in fc else pd.DataFrame()
        pue_hi = (hi["hi_95"].reindex(full).to_numpy(float).reshape(n_s, n_t)
                  if "hi_95" in hi else np.full((n_s, n_t), np.nan))
        self.pue_cap = np.fmax(np.nan_to_num(pue_hi, nan=-np.inf), self.pue)
        self.signals = pd.DataFrame(
            {"carbon_intensity_g_per_kwh": self.ci.ravel(), "pue": self.pue.ravel(),
             "green_surplus_kw": self.surplus_kw.ravel(), PUE_CAP_COLUMN: self.pue_cap.ravel()},
            index=pd.MultiIndex.from_product([[s.id for s in self.sites], self.slots],
                                             names=["site", "slot"]))
        self.count = np.zeros((n_s, len(self.gtypes)), dtype=np.int64)
        for i, s in enumerate(self.sites):
            for g, pool in s.gpus.items():
                self.count[i, self.gpos[g]] = pool.count
        self.it_cap_kw = np.array([s.it_power_cap_kw for s in self.sites], dtype=float)
        """Each site's IT power cap (PDU/UPS), shape ``(S,)``. [kW]"""
        commit_kw = self._commit_limits()
        fac_kw = np.array([np.inf if s.facility_power_cap_kw is None
                           else s.facility_power_cap_kw for s in self.sites], dtype=float)
        self._grid_cap_kw = np.minimum(self.it_cap_kw[:, None], fac_kw[:, None] / self.pue_cap)
        self.cap_kw = np.minimum(self._grid_cap_kw, commit_kw / self.pue_cap)
        """IT power allowed per site-hour, shape ``(S, T)``: the planner's rule
        (:attr:`carbonsched.plan.sets.CompiledSets.power_cap_kw`), the lower of the IT cap and
        the grid connection's and the plan's commitments' facility power divided by the PUE's
        upper 95 % bound. [kW]"""
        self._lock = threading.Lock()
        self.booking_lock = threading.Lock()
        """Held by :func:`carbonsched.service.booking.reserve_job` from placing to commit."""
        # the plan's own load, computed once; reservations are applied on top
        self._base_gpus = np.repeat(self.count[:, None, :], n_t, axis=1)
        self._base_it_kw = np.zeros((n_s, n_t))
        for b in self._plan_bookings():
            self._book(self._base_gpus, self._base_it_kw, b)
        self.reservations: dict[str, Booking] = {}
        self._recompute()

    # --- ledger -------------------------------------------------------------------------------
    def _commit_limits(self) -> np.ndarray:
        """The facility power the plan's commitments allow, from its ``site_hours``.

        Returns
        -------
        numpy.ndarray
            Shape ``(S, T)``: ``commit_limit_kw`` per site-hour, ``inf`` outside every
            commitment window. [kW]
        """
        commit = np.full((len(self.sites), len(self.slots)), np.inf)
        for r in self.plan.get("site_hours", []):
            s, t = self.spos.get(r["site"]), self.tpos.get(pd.Timestamp(r["hour"]))
            if s is not None and t is not None and r.get("commit_limit_kw") is not None:
                commit[s, t] = float(r["commit_limit_kw"])
        return commit

    def _plan_bookings(self) -> list[Booking]:
        """The plan's own work, and the running work it holds (``running``), as bookings.

        Raises
        ------
        InputError
            The plan places work at a site, or on a GPU type, the catalog no longer has: its
            capacity could not be booked, so every answer would offer what the plan uses.
        """
        running = self.plan.get("running", [])
        lost = sorted({f"{w['site']} ({w.get('gpu_type', '')})"
                       for w in [*self.plan.get("placements", []), *self.plan.get("inference", []),
                                 *running]
                       if w["site"] not in self.spos
                       or w.get("gpu_type", "") not in self.sites[self.spos[w["site"]]].gpus})
        if lost:
            raise InputError(
                f"plan {self.plan_id} places work at {len(lost)} site/GPU type(s) catalog "
                f"{self.catalog.name!r} no longer has: {', '.join(lost[:6])}"
                f"{' ...' if len(lost) > 6 else ''}; its capacity there cannot be booked, so "
                "placements are not answered from it: run the plan again with this catalog, or "
                "restore the catalog's sites")
        out = []
        for p in self.plan.get("placements", []):
            b = self._booking_of(p["site"], pd.Timestamp(p["start"]), pd.Timestamp(p["end"]),
                                 p["gpu_type"], int(p["gpus"]), None, p.get("energy_kwh"))
            if b is not None:
                out.append(b)
        # running work: held from its start (the horizon start if none) to its end; slices on
        # one GPU (gpu_index) hold that one GPU while any of them runs, each its own power
        sliced: dict[tuple[int, int, int], set[int]] = {}
        for r in running:
            start = max(self.slots[0], pd.Timestamp(r.get("start") or self.slots[0]))
            whole = r.get("gpu_index") is None
            b = self._booking_of(r["site"], start, pd.Timestamp(r["end"]), r["gpu_type"],
                                 int(r["gpus"]) if whole else 0, float(r["it_power_kw"]), None)
            if b is None:
                continue
            out.append(b)
            if not whole:     # the hours some slice runs on this GPU
                sliced.setdefault((b.s, b.gtype, int(r["gpu_index"])), set()).update(
                    range(b.t0, b.t1))
        for (s, gtype, _gpu), hours in sliced.items():
            for t in sorted(hours):
                out.append(Booking(s, t, t + 1, gtype, 1, 0.0))
        for i in self.plan.get("inference", []):
            h = pd.Timestamp(i["hour"])
            b = self._booking_of(i["site"], h, h + HOUR, i.get("gpu_type", ""), int(i["gpus"]),
                                 None, i.get("energy_kwh"))
            if b is not None:
                out.append(b)
        return out

    def _booking_of(self, site: str, start: pd.Timestamp, end: pd.Timestamp, gpu_type: str,
                    gpus: int, kw: float | None, energy_kwh: float | None) -> Booking | None:
        s = self.spos.get(site)
        if s is None or gpu_type not in self.gpos:
            return None
        # every hour the work runs in, partial first and last hours included (minutes)
        a_h = (start - self.slots[0]) / HOUR
        b_h = (end - self.slots[0]) / HOUR
        t0 = max(0, int(np.floor(a_h)))
        t1 = min(len(self.slots), int(np.ceil(b_h - 1e-9)))
        if t1 <= t0:
            return None
        if kw is None:
            # the plan keeps facility energy (IT × PUE); its IT power is energy / Σ(hours run
            # in each slot × PUE), partial hours weighted by their fraction
            k = np.arange(int(np.floor(a_h)), int(np.ceil(b_h - 1e-9)))
            frac = np.clip(np.minimum(k + 1, b_h) - np.maximum(k, a_h), 0.0, 1.0)
            inside = (k >= 0) & (k < len(self.slots))
            pue_sum = float((frac[inside] * self.pue[s, k[inside]]).sum())
            kw = float(energy_kwh or 0.0) / pue_sum if pue_sum > 0 else 0.0
        return Booking(s, t0, t1, self.gpos[gpu_type], gpus, kw)

    @staticmethod
    def _book(gpus: np.ndarray, it_kw: np.ndarray, b: Booking, sign: int = 1) -> None:
        gpus[b.s, b.t0:b.t1, b.gtype] -= sign * b.gpus
        it_kw[b.s, b.t0:b.t1] += sign * b.kw

    def _recompute(self) -> None:
        gpus = self._base_gpus.copy()
        it_kw = self._base_it_kw.copy()
        for b in self.reservations.values():
            self._book(gpus, it_kw, b)
        self.free_gpus = gpus
        self.it_kw = it_kw
        self.free_kw = self.cap_kw - it_kw
        facility = it_kw * self.pue
        self.free_surplus_kw = np.maximum(self.surplus_kw - facility, 0.0)

    def booking_of_row(self, row: dict[str, Any]) -> Booking | None:
        """The capacity a stored reserved job takes (``site``, ``start``, ``end``, ``spec``).

        ``None`` for a row without a site and start (not booked), at a site or GPU type the
        plan does not have, or entirely outside the horizon.
        """
        if row.get("site") is None or row.get("start") is None:
            return None
        spec = row["spec"]
        return self._booking_of(row["site"], pd.Timestamp(row["start"]),
                                pd.Timestamp(row["end"]), spec["gpu_type"], int(spec["gpus"]),
                                float(spec["gpus"]) * float(spec["power_per_gpu_kw"]), None)

    def booking_of_answer(self, job: Job, ans: dict[str, Any]) -> Booking:
        """The capacity ``job`` takes at its recommended option (:meth:`place_job`'s answer)."""
        rec = ans["recommended"]
        s = self.spos[rec["site"]]
        t = self.tpos[pd.Timestamp(rec["start"])]
        dur = -(-job.duration_minutes // 60)
        return Booking(s, t, t + dur, self.gpos[job.gpu_type], job.gpus, job.it_power_kw)

    def booking_window(self, booking: Booking) -> tuple[datetime, datetime]:
        """The hours a booking takes, ``[start, end)`` (tz-aware UTC)."""
        return ((self.slots[0] + booking.t0 * HOUR).to_pydatetime(),
                (self.slots[0] + booking.t1 * HOUR).to_pydatetime())

    def fits_with(self, booking: Booking, rows: list[dict[str, Any]]) -> bool:
        """Whether ``booking`` fits beside the plan's own load and the reservations ``rows``.

        The arbiter's check (:func:`carbonsched.service.booking.reserve_job`), run inside the
        database transaction that holds the site's booking lock, against the reservations
        committed at that site (``rows``, as :meth:`booking_of_row` reads them): GPUs of the
        booking's type and IT power under the site-hour's cap (:attr:`cap_kw`), in every hour
        it takes.
        """
        s, t0, t1 = booking.s, booking.t0, booking.t1
        gpus = self._base_gpus[s, t0:t1, booking.gtype].astype(np.int64)
        kw = self._base_it_kw[s, t0:t1].copy()
        for r in rows:
            b = self.booking_of_row(r)
            if b is None or b.s != s or b.t1 <= t0 or b.t0 >= t1:
                continue
            a, z = max(b.t0, t0) - t0, min(b.t1, t1) - t0
            if b.gtype == booking.gtype:
                gpus[a:z] -= b.gpus
            kw[a:z] += b.kw
        return bool((gpus >= booking.gpus).all()
                    and (kw + booking.kw <= self.cap_kw[s, t0:t1] + 1e-9).all())

    def set_reservations(self, rows: list[dict[str, Any]]) -> None:
        """Replace the reservations applied on top of the plan (rows of submitted jobs)."""
        res = {}
        for r in rows:
            b = self.booking_of_row(r)
            if b is not None:
                res[r["job_id"]] = b
        with self._lock:
            self.reservations = res
            self._recompute()

    def set_site_reservations(self, site: str, rows: list[dict[str, Any]]) -> None:
        """Replace the reservations of one site by ``rows`` (those committed there)."""
        s = self.spos[site]
        res = {}
        for r in rows:
            b = self.booking_of_row(r)
            if b is not None and b.s == s:
                res[r["job_id"]] = b
        with self._lock:
            self.reservations = {k: b for k, b in self.reservations.items() if b.s != s} | res
            self._recompute()

    def add_reservations(self, rows: list[dict[str, Any]]) -> None:
        """Apply committed reservations (rows as :meth:`booking_of_row` reads them)."""
        new = {r["job_id"]: b for r in rows if r["job_id"] not in self.reservations
               and (b := self.booking_of_row(r)) is not None}
        if new:
            with self._lock:
                self.reservations.update(new)
                self._recompute()

    def add_reservation(self, job_id: str, booking: Booking) -> None:
        """Apply a reservation the database has committed to this replica's view."""
        with self._lock:
            self.reservations[job_id] = booking
            self._recompute()

    # --- queries ------------------------------------------------------------------------------
    def _rate(self, kw: float) -> np.ndarray:
        """Emissions per hour of ``kw`` IT power at each (site, slot), surplus first. [kg/h]"""
        _, _, em = emissions_by_site_hour(np.full(self.pue.shape, kw), self.pue, self.ci,
                                          self.free_surplus_kw)
        return em

    def _fits(self, gtype: int, gpus: int, kw: float, dur: int) -> np.ndarray:
        """Boolean (S, T): a run of ``dur`` hours from (s, t) has room throughout."""
        ok = (self.free_gpus[:, :, gtype] >= gpus) & (self.free_kw >= kw - 1e-9)
        bad = np.concatenate([np.zeros((ok.shape[0], 1)), np.cumsum(~ok, axis=1)], axis=1)
        n_t = ok.shape[1]
        out = np.zeros_like(ok)
        if dur <= n_t:
            out[:, :n_t - dur + 1] = (bad[:, dur:] - bad[:, :n_t - dur + 1]) == 0
        return out

    @staticmethod
    def _window(a: np.ndarray, dur: int, frac: float = 1.0) -> np.ndarray:
        """Σ of ``a`` over a run of ``dur`` slots from each start, the last slot × ``frac``.

        ``frac`` is the share of the last slot the run uses: jobs are charged the minutes they
        run, as in :func:`carbonsched.plan.sets.window_cost`.
        """
        cum = np.concatenate([np.zeros((a.shape[0], 1)), np.cumsum(a, axis=1)], axis=1)
        n_t = a.shape[1]
        out = np.full(a.shape, np.inf)
        if 1 <= dur <= n_t:
            m = n_t - dur + 1
            last = a[:, dur - 1:dur - 1 + m]
            out[:, :m] = cum[:, dur - 1:dur - 1 + m] - cum[:, :m] + frac * last
        return out

    def _option(self, s: int, t: int, dur: int, kw: float, rate: np.ndarray,
                latency_ms: float | None = None, frac: float = 1.0) -> dict[str, Any]:
        w = np.ones(dur)
        w[-1] = frac
        end = (self.slot_iso[t + dur] if frac >= 1.0 else
               jsonable(self.slots[t] + (dur - 1 + frac) * HOUR))
        out = {"site": self.sites[s].id, "start": self.slot_iso[t], "end": end,
               "emissions_kg": round(float((rate[s, t:t + dur] * w).sum()), 6),
               "energy_kwh": round(float(kw * (self.pue[s, t:t + dur] * w).sum()), 6),
               "carbon_intensity_g_per_kwh": round(float(self.ci[s, t:t + dur].sum()) / dur, 3)}
        if latency_ms is not None:
            out["latency_ms"] = latency_ms
        return out

    def _unplaced(self, reason: ReasonCode | str, detail: str) -> dict[str, Any]:
        return {"plan_id": self.plan_id, "placed": False, "reason": str(reason),
                "detail": detail, "recommended": None, "carbon_agnostic": None,
                "saving_kg": None, "saving_pct": None, "alternatives": [],
                "signal_quality": self.plan.get("signal_quality")}

    def horizon_text(self) -> str:
        """The plan's horizon as ``[start, end)`` in UTC."""
        return f"[{jsonable(self.slots[0])}, {jsonable(self.slots[-1] + HOUR)})"

    def _hours_from_start(self, ts: pd.Timestamp | datetime) -> float:
        """Hours from the horizon start to ``ts`` (tz-aware). [h]"""
        return (pd.Timestamp(ts).value - self._t0_ns) / 3.6e12

    def _window_cap_kw(self, lo: int, hi: int) -> np.ndarray:
        """The most IT power each site allows in any hour of ``[lo, hi)``, shape ``(S,)``. [kW]

        The planner's pre-check window (:func:`carbonsched.plan.compile_sets`): hours past the
        horizon follow :func:`~carbonsched.plan.sets.continue_signal`; an empty window takes
        the most any hour allows.
        """
        if hi <= lo:
            return self._grid_cap_kw.max(axis=1)
        # a copy: continue_signal returns a view when the window ends inside the horizon
        cap = continue_signal(self._grid_cap_kw, max(hi, self.cap_kw.shape[1])).copy()
        n_t = self.cap_kw.shape[1]
        cap[:, :n_t] = self.cap_kw
        return cap[:, lo:hi].max(axis=1)

    def _candidates(self, job: Job) -> tuple[tuple[ReasonCode, str] | None, np.ndarray, int,
                                             int]:
        """The planner's pre-check for one job, as candidate sites and a start range.

        Returns
        -------
        (reason, sites, first, last)
            ``reason`` is ``(code, detail)`` when the job can never run, else ``None``;
            ``sites`` the allowed, typed, large and powered enough site positions (ascending)
            and ``first .. last`` the start slots inside the job's window and the horizon.
        """
        none = np.zeros(0, dtype=np.int64)
        n_t = len(self.slots)
        es = self._hours_from_start(job.earliest_start)
        dl = self._hours_from_start(job.deadline)
        first = max(int(np.ceil(es - 1e-9)), 0)
        # the planner's rule (carbonsched.plan.sets): the latest start that still ends by the
        # deadline, never cut to the horizon; starts are decided inside the horizon only
        end_by = self._hours_from_start(job.deadline - pd.Timedelta(minutes=job.duration_minutes))
        last_any = int(np.floor(end_by + 1e-9))
        last = min(last_any, n_t - 1)
        g = self.gpos.get(job.gpu_type)
        reason, powered = site_precheck(
            job, self.sites, self.spos, self.gpos.keys(),
            self.count[:, g] if g is not None else np.zeros(len(self.sites), dtype=np.int64),
            lambda s: self.sites[s].gang_nodes(job.gpu_type, job.gpus) is not None,
            lambda: self._window_cap_kw(first, last + -(-job.duration_minutes // 60)),
            self.it_cap_kw)
        if reason is None:
            reason = window_precheck(job, dl, first, last_any, last, self.slots[0],
                                     self.slots[0] + n_t * HOUR)
        if reason is not None:
            return reason, none, 0, -1
        return None, np.array(sorted(set(powered)), dtype=np.int64), first, last

    def job_options(self, job: Job) -> tuple[tuple[ReasonCode, str] | None, np.ndarray]:
        """The planner's pre-check and feasible ``(job, site, start)`` options for one job.

        The same rules, order and messages as :func:`carbonsched.plan.compile_sets` (a test
        checks both agree on random jobs), on arrays compiled once per plan: compiling the
        sets afresh costs ~10 ms of pandas index work per query, this ~0.1 ms.

        Returns
        -------
        (reason, options)
            ``reason`` is ``(code, detail)`` when the job can never run, else ``None``;
            ``options`` has shape ``(O, 3)`` (job position 0, site, start).
        """
        reason, sites, first, last = self._candidates(job)
        if reason is not None:
            return reason, np.zeros((0, 3), dtype=np.int64)
        n_w = last - first + 1
        ss = np.repeat(sites, n_w)
        tt = np.tile(np.arange(first, last + 1, dtype=np.int64), len(sites))
        return None, np.stack([np.zeros(ss.size, dtype=np.int64), ss, tt], axis=1)

    def place_job(self, job: Job, now: datetime, alternatives: int = 3) -> dict[str, Any]:
        """Recommend a site and start for ``job`` in the plan's free capacity.

        Parameters
        ----------
        job
            The job; starts before ``now`` (rounded up to the hour) are not offered.
        now
            The service clock's time.
        alternatives
            Number of next-best options (best start at each other site).

        Returns
        -------
        dict
            ``placed``, ``reason``, ``detail``, ``recommended``, ``carbon_agnostic``,
            ``saving_kg``, ``saving_pct``, ``alternatives``, ``plan_id``.
        """
        for sid in job.allowed_sites:
            if sid not in set(self.catalog.site_ids):
                raise UnknownSiteError(sid, self.catalog.site_ids)
        now_ns = pd.Timestamp(now).value
        first = pd.Timestamp(-(-now_ns // 3_600_000_000_000) * 3_600_000_000_000, tz="UTC")
        if job.earliest_start < first:
            if job.deadline <= first:
                return self._unplaced(ReasonCode.DEADLINE_PASSED,
                                      f"deadline {jsonable(job.deadline)} is not after the "
                                      f"service's now ({jsonable(first)}, rounded up to the "
                                      "hour)")
            job = replace(job, earliest_start=first)
        reason, sites, first_t, last_t = self._candidates(job)
        if reason is not None:
            code, detail = reason
            if code == ReasonCode.NO_FEASIBLE_SLOT and "horizon" in detail:
                detail += f" of the current plan {self.horizon_text()}"
            elif code == ReasonCode.DEFERRED_PAST_HORIZON:
                detail += f" (the current plan covers {self.horizon_text()})"
            return self._unplaced(code, detail)
        g = self.gpos[job.gpu_type]
        kw = job.it_power_kw
        dur = -(-job.duration_minutes // 60)   # whole slots the run occupies
        frac = (job.duration_minutes - 60 * (dur - 1)) / 60.0  # share of the last one it uses
        cols = slice(first_t, last_t + 1)
        with self._lock:
            # (candidate site, start) grids: O(sites x hours), never O(jobs in the plan)
            room = self._fits(g, job.gpus, kw, dur)[sites, cols]
            if not room.any():
                return self._unplaced(ReasonCode.INSUFFICIENT_CAPACITY,
                                      "every feasible start is taken by the current plan and "
                                      "its reservations")
            rate = self._rate(kw)
            cost = np.where(room, self._window(rate, dur, frac)[sites, cols], np.inf)
            # each site's cheapest start (ties: the earliest), sites cheapest first
            best_t = cost.argmin(axis=1)
            best_c = cost[np.arange(len(sites)), best_t]
            open_ = np.flatnonzero(np.isfinite(best_c))
            per_site = open_[np.lexsort((open_, best_t[open_], best_c[open_]))]
            bs, bt = int(sites[per_site[0]]), int(best_t[per_site[0]]) + first_t
            best = self._option(bs, bt, dur, kw, rate, frac=frac)
            # carbon-agnostic: earliest start, then the job's own site order
            n_s = len(self.sites)
            site_rank = np.arange(n_s) + n_s
            for i, sid in enumerate(job.allowed_sites):
                if sid in self.spos:
                    site_rank[self.spos[sid]] = i
            early = room.argmax(axis=1)
            a = open_[np.lexsort((open_, site_rank[sites[open_]], early[open_]))[0]]
            agn = self._option(int(sites[a]), int(early[a]) + first_t, dur, kw, rate, frac=frac)
            alts = [self._option(int(sites[k]), int(best_t[k]) + first_t, dur, kw, rate,
                                 frac=frac)
                    for k in per_site[1:1 + alternatives]]
        saving = agn["emissions_kg"] - best["emissions_kg"]
        return {"plan_id": self.plan_id, "placed": True, "reason": str(ReasonCode.PLACED),
                "detail": "", "recommended": best, "carbon_agnostic": agn,
                "saving_kg": round(saving, 6),
                "saving_pct": round(100 * saving / agn["emissions_kg"], 3)
                if agn["emissions_kg"] > 0 else 0.0,
                "alternatives": alts, "signal_quality": self.plan.get("signal_quality")}

    def release(self, job_id: str) -> None:
        """Drop a reservation from this replica's view."""
        with self._lock:
            if self.reservations.pop(job_id, None) is not None:
                self._recompute()

    def place_inference(self, area: str, start: pd.Timestamp, hours: int, gpu_type: str,
                        gpus: int, slo_ms: float, power_per_gpu_kw: float,
                        alternatives: int = 3, now: datetime | None = None) -> dict[str, Any]:
        """Recommend the site that serves an area's inference within its SLO, lowest emissions.

        ``start`` is floored to its hour; hours before ``now``'s hour are refused.

        Raises
        ------
        InputError
            Unknown user area.
        """
        if area not in self.catalog.areas:
            raise UnknownSiteError(area, list(self.catalog.areas))
        start = start.floor("h")
        if now is not None and start < pd.Timestamp(now).floor("h"):
            return self._unplaced(ReasonCode.DEADLINE_PASSED,
                                  f"start {jsonable(start)} is before the service's now "
                                  f"({jsonable(pd.Timestamp(now))})")
        if start not in self.tpos or start + (hours - 1) * HOUR not in self.tpos:
            return self._unplaced(ReasonCode.NO_FEASIBLE_SLOT,
                                  f"hours {jsonable(start)} + {hours} h are outside the current "
                                  f"plan {self.horizon_text()}")
        dem = InferenceDemand(area=area, hour=start, gpu_type=gpu_type, gpus=gpus,
                              slo_ms=slo_ms, power_per_gpu_kw=power_per_gpu_kw)
        if gpu_type not in self.gpos:
            return self._unplaced(ReasonCode.UNKNOWN_GPU_TYPE,
                                  f"no site in the catalog has GPU type {gpu_type!r}")
        sets = compile_sets(PlanningProblem(sites=self.sites, jobs=[], inference=[dem],
                                            slots=self.slots, signals=self.signals))
        elig = np.flatnonzero(sets.inf_sites[0])
        if not len(elig):
            return self._unplaced(ReasonCode.NO_FEASIBLE_SLOT,
                                  f"no site with {gpu_type} is within {slo_ms} ms of {area}")
        t = self.tpos[start]
        kw = gpus * power_per_gpu_kw
        g = self.gpos[gpu_type]
        with self._lock:
            fits = self._fits(g, gpus, kw, hours)[elig, t]
            elig = elig[fits]
            if not len(elig):
                return self._unplaced(ReasonCode.INSUFFICIENT_CAPACITY,
                                      "every site within the SLO is full in those hours")
            rate = self._rate(kw)
            cost = np.array([rate[s, t:t + hours].sum() for s in elig])
            lat = np.array([self.sites[s].latency_ms.get(area, np.inf) for s in elig])
            order = np.argsort(cost, kind="stable")
            opts = [self._option(int(elig[k]), t, hours, kw, rate, float(lat[k]))
                    for k in order]
            agn_k = int(np.argsort(lat, kind="stable")[0])
            agn = self._option(int(elig[agn_k]), t, hours, kw, rate, float(lat[agn_k]))
        best = opts[0]
        saving = agn["emissions_kg"] - best["emissions_kg"]
        return {"plan_id": self.plan_id, "placed": True, "reason": str(ReasonCode.PLACED),
                "detail": "", "recommended": best, "carbon_agnostic": agn,
                "saving_kg": round(saving, 6),
                "saving_pct": round(100 * saving / agn["emissions_kg"], 3)
                if agn["emissions_kg"] > 0 else 0.0,
                "alternatives": opts[1:1 + alternatives],
                "signal_quality": self.plan.get("signal_quality")}

    def forecast(self, site: str, signal: str) -> pd.DataFrame:
        """The plan's forecast rows of one site and API signal name, by time."""
        if site not in self.spos:
            raise UnknownSiteError(site, list(self.spos))
        stored = SIGNALS[signal][0]
        f = self.forecast_rows
        return f[(f["site"] == site) & (f["signal"] == stored)].sort_values("ts")
