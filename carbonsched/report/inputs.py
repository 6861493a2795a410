"""Inputs of the sustainability report: stored plans, actual runs, power telemetry, GPU footprints.

Power-telemetry export (``carbonsched report --telemetry FILE``), one CSV row per job and hour
(for example Kepler or DCGM power samples, or Slurm's ``ConsumedEnergy``, integrated to the hour)::

    hour_utc,site,job_id,it_energy_kwh,source
    2023-07-03T10:00:00Z,gb-london,20230703-0001,6.41,dcgm

``hour_utc`` is the start of the hour with an explicit UTC offset; ``it_energy_kwh`` is the IT
energy of the job's share of the hardware in that hour [kWh]. A zero counter for an hour the job
ran means the power source was missing (*unknown*, not 0 W): that hour is modelled instead and
counted in the provenance. A row is matched to the report's work by job, hour and site; the
report's rows of one job, site and hour (two pieces of a preemptible job in one hour, an area's
inference on two GPU types) share its energy in proportion to their modelled energy. Rows for
jobs, sites or hours the report does not contain are counted and ignored.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.domain import JobState
from carbonsched.errors import DataFormatError, UnknownSiteError
from carbonsched.pipeline.document import read_plan_document

ACTUAL_RUN_COLUMNS = ["job_id", "piece", "plan_id", "site", "actual_start", "actual_end",
                      "backend"]
TELEMETRY_COLUMNS = ["hour_utc", "site", "job_id", "it_energy_kwh", "source"]


LIVE_STATES = (JobState.PENDING, JobState.DISPATCHED, JobState.RUNNING, JobState.PAUSED)
"""Outbox states of a run that may still be going: without an actual end, it counts up to the
report's end."""


def actual_runs(store: Any, start: pd.Timestamp, end: pd.Timestamp,
                records: pd.DataFrame | None = None) -> pd.DataFrame:
    """The backend's actual start and end of each dispatched job overlapping ``[start, end)``.

    Read from the dispatch outbox of a :class:`carbonsched.store.Store`
    (:func:`carbonsched.dispatch.outbox.dispatch_records`: ``sacct`` for Slurm, Job conditions for
    Kubernetes), or from ``store.actual_runs(start, end)`` where a store provides it, with columns
    :data:`ACTUAL_RUN_COLUMNS` — ``job_id``, ``piece`` (0 for a job run whole; a preemptible
    job's pieces each have their own run), ``plan_id``, ``site``, ``actual_start`` and
    ``actual_end`` (tz-aware UTC; ``actual_end`` NaT while running: the report then counts up to
    ``end``) and ``backend`` (e.g. ``slurm:cluster``). Jobs without an actual start (not
    dispatched, or not started yet) keep their planned hours, labelled ``planned``. From the
    outbox, a run that is over (cancelled, failed, lost: not in :data:`LIVE_STATES`) without a
    recorded end ends at its planned end, and its ``end_assumed`` column is True.

    Parameters
    ----------
    store
        The store (:class:`carbonsched.store.Store`) or ``None``.
    start, end
        Report period, tz-aware UTC.
    records
        The outbox as :func:`carbonsched.dispatch.outbox.dispatch_records` returns it (at
        least its rows ``ran_in`` the period), when the caller has read it already; ``None``
        reads those rows from ``store``.

    Returns
    -------
    DataFrame
        Columns :data:`ACTUAL_RUN_COLUMNS`, and ``end_assumed`` (bool) when read from the
        outbox; empty when nothing is known.
    """
    reader = getattr(store, "actual_runs", None)
    if reader is not None:
        df = pd.DataFrame(reader(start, end))
    elif hasattr(store, "engine"):
        # the dispatch outbox (carbonsched.dispatch.outbox): what each backend reported
        if records is None:
            from carbonsched.dispatch.outbox import dispatch_records

            records = dispatch_records(store, ran_in=(start, end))
        df = records
        df = df[df["actual_start"].notna()].copy()
        if len(df):
            # a run that ended (cancelled, failed, lost) with no end on record: its planned end
            # (never before its start), named in the report's notes; "while running" is only
            # for a run the backend still reports as running
            a_start = pd.to_datetime(df["actual_start"], utc=True)
            a_end = pd.to_datetime(df["actual_end"], utc=True)
            over = ~df["state"].isin([str(s) for s in LIVE_STATES])
            df["end_assumed"] = (over & a_end.isna()).to_numpy()
            planned = pd.to_datetime(df["planned_end"], utc=True)
            a_end = a_end.where(~df["end_assumed"], planned.where(planned > a_start, a_start))
            df["actual_end"] = a_end
            df = df[(a_start < end) & (a_end.isna() | (a_end > start))]
    else:
        return pd.DataFrame(columns=ACTUAL_RUN_COLUMNS)
    if df.empty:
        return pd.DataFrame(columns=ACTUAL_RUN_COLUMNS)
    return normalise_actual_runs(df)


def normalise_actual_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Check and convert an actual-runs frame (see :func:`actual_runs`).

    Raises
    ------
    DataFormatError
        Missing columns, naive times, or an end before its start.
    """
    missing = {"job_id", "actual_start", "actual_end"} - set(df.columns)
    if missing:
        raise DataFormatError("actual runs", f"missing column(s) {', '.join(sorted(missing))}")
    out = df.copy()
    for c in ("actual_start", "actual_end"):
        known = out[c][out[c].notna()]
        t = pd.to_datetime(known)
        if len(t) and t.dt.tz is None:
            raise DataFormatError("actual runs", f"{c} has naive times; give them in UTC")
        # an empty actual_end means still running; every time, when given, in UTC
        out[c] = pd.Series(pd.NaT, index=out.index, dtype="datetime64[ns, UTC]")
        if len(t):
            out.loc[t.index, c] = t.dt.tz_convert("UTC")
    no_start = out["actual_start"].isna()
    if no_start.any():
        raise DataFormatError("actual runs", f"job {out.loc[no_start, 'job_id'].iloc[0]!r}: no "
                                             "actual_start; give the backend's start time (UTC) "
                                             "or leave the job out to report its planned hours")
    bad = out["actual_end"].notna() & (out["actual_end"] < out["actual_start"])
    if bad.any():
        raise DataFormatError("actual runs", f"job {out.loc[bad, 'job_id'].iloc[0]!r}: "
                                             "actual_end before actual_start")
    for c in ACTUAL_RUN_COLUMNS:
        if c not in out:
            out[c] = None
    piece = pd.to_numeric(out["piece"], errors="coerce")
    bad = out["piece"].notna() & (piece.isna() | (piece < 0) | (piece % 1 != 0))
    if bad.any():
        raise DataFormatError("actual runs", f"job {out.loc[bad, 'job_id'].iloc[0]!r}: piece "
                                             f"{out.loc[bad, 'piece'].iloc[0]} is not a "
                                             "whole number >= 0 (0 for a job run whole)")
    out["piece"] = piece.fillna(0).astype(int)
    return out[ACTUAL_RUN_COLUMNS + (["end_assumed"] if "end_assumed" in out else [])]


def read_telemetry(path: str | Path, site_ids: set[str]) -> pd.DataFrame:
    """Read a power-telemetry export (module docstring).

    Returns
    -------
    DataFrame
        Columns :data:`TELEMETRY_COLUMNS`; ``hour_utc`` tz-aware UTC.

    Raises
    ------
    DataFormatError
        Missing file or column, naive or off-the-hour time, negative or unreadable energy,
        one job, site and hour given twice (file, line, reason).
    UnknownSiteError
        A site the catalog does not define.
    """
    p = Path(path)
    if not p.exists():
        raise DataFormatError(p, "telemetry file not found")
    df = pd.read_csv(p, dtype=str, keep_default_na=False)
    missing = set(TELEMETRY_COLUMNS) - set(df.columns)
    if missing:
        raise DataFormatError(p, f"missing column(s) {', '.join(sorted(missing))}; the header "
                                 f"is {','.join(TELEMETRY_COLUMNS)}")
    hours = []
    for i, v in enumerate(df["hour_utc"]):
        try:
            t = pd.Timestamp(v)
        except ValueError:
            raise DataFormatError(p, f"cannot read hour_utc {v!r}", row=i + 2) from None
        if t.tzinfo is None:
            raise DataFormatError(p, f"hour_utc {v!r} has no UTC offset; write "
                                     "2023-07-03T10:00:00Z", row=i + 2)
        t = t.tz_convert("UTC")
        if t != t.floor("h"):
            raise DataFormatError(p, f"hour_utc {v!r} is not on the hour", row=i + 2)
        hours.append(t)
    energy = pd.to_numeric(df["it_energy_kwh"], errors="coerce")
    if energy.isna().any():
        i = int(energy.isna().to_numpy().nonzero()[0][0])
        raise DataFormatError(p, f"cannot read it_energy_kwh {df['it_energy_kwh'].iloc[i]!r}",
                              row=i + 2)
    if (energy < 0).any():
        i = int((energy < 0).to_numpy().nonzero()[0][0])
        raise DataFormatError(p, "negative it_energy_kwh", row=i + 2)
    unknown = sorted(set(df["site"]) - site_ids)
    if unknown:
        raise UnknownSiteError(f"{p}: telemetry for site(s) {', '.join(unknown)}, which the "
                               f"catalog does not define")
    out = pd.DataFrame({"hour_utc": pd.DatetimeIndex(hours), "site": df["site"],
                        "job_id": df["job_id"], "it_energy_kwh": energy.astype(float),
                        "source": df["source"]})
    dup = out.duplicated(["hour_utc", "job_id", "site"])
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0])
        raise DataFormatError(p, f"job {out['job_id'].iloc[i]!r} at {out['site'].iloc[i]} hour "
                                 f"{out['hour_utc'].iloc[i].isoformat()} given twice", row=i + 2)
    return out


@dataclass(frozen=True)
class Embodied:
    """Embodied emissions per GPU type and the lifetime they are amortised over."""

    kg_per_gpu: dict[str, tuple[float, str]]
    lifetime_years: float
    lifetime_source: str

    def per_gpu_hour_g(self, gpu_type: str) -> tuple[float, str]:
        """Amortised embodied emissions per GPU-hour [g CO2e/GPU·h] and the source."""
        kg, src = self.kg_per_gpu.get(gpu_type, self.kg_per_gpu["default"])
        return kg * 1000.0 / (self.lifetime_years * 8760.0), src


def load_embodied() -> Embodied:
    """The shipped table ``data/embodied_gpu.toml``."""
    raw = tomllib.loads(resources.files("carbonsched.data").joinpath(
        "embodied_gpu.toml").read_text())
    table = {k: (float(v["embodied_kg_co2e"]["value"]), v["embodied_kg_co2e"]["source"])
             for k, v in raw["gpu_types"].items()}
    table["default"] = (float(raw["default"]["embodied_kg_co2e"]["value"]),
                        raw["default"]["embodied_kg_co2e"]["source"])
    return Embodied(table, float(raw["lifetime_years"]["value"]),
                    raw["lifetime_years"]["source"])


USABLE_PLAN_STATUSES = ("optimal", "feasible", "heuristic")
"""Solver statuses of a plan whose placements are work that was planned to run."""


def stored_plans(store: Any, dates: list[str], catalog: str | None,
                 skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Every usable stored plan of each date (optionally of one catalog), oldest stored first.

    A day may hold several plans: a rolling service's runs (one per issue time) or a re-run of
    the day's plan. The report counts each hour and each job from the plan in force then
    (:class:`carbonsched.report.build.PlansInForce`), so all are read. A plan whose solver
    status is not one of :data:`USABLE_PLAN_STATUSES` (``infeasible``, ``no_solution``,
    ``error``: recorded before the command exited 4) places nothing: it is passed over, and
    named in ``skipped`` when it is newer than the day's newest usable plan.
    """
    docs = []
    for d in dates:
        rows = [r for r in store.list_plans(d) if catalog is None or r["catalog"] == catalog]
        usable = [r for r in rows if r["solver_status"] in USABLE_PLAN_STATUSES]
        if skipped is not None:
            newest_usable = usable[0]["created_at"] if usable else None
            skipped.extend(f"plan {r['plan_id'][:12]} of {d} ({r['solver_status']})"
                           for r in rows if r["solver_status"] not in USABLE_PLAN_STATUSES
                           and (newest_usable is None or r["created_at"] > newest_usable))
        for r in reversed(usable):   # list_plans is newest first
            pid = r["plan_id"]
            doc = store.get_plan(pid)
            read_plan_document(doc, f"plan {pid}")  # the report reads the documented shape
            docs.append(doc)
    return docs


def stored_forecasts(store: Any, plan_id: str) -> pd.DataFrame:
    """A plan's stored forecasts (empty frame when the store has none)."""
    try:
        return store.forecasts(plan_id)
    except AttributeError:
        return pd.DataFrame()
