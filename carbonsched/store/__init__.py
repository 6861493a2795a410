"""The store: plans, placements and forecasts in any SQLAlchemy database, migrated by Alembic.

The embedded default is a SQLite file in the user's data directory; ``CARBONSCHED_DATABASE_URL``
(any SQLAlchemy URL, e.g. ``postgresql+psycopg2://user@127.0.0.1:5432/carbonsched``) overrides it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, delete, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from carbonsched.errors import BackendError, BackendUnavailableError, InputError
from carbonsched.store.models import ForecastRow, InferenceRow, PlacementRow, PlanRow

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _ts(value: str | None) -> datetime | None:
    return None if value is None else pd.Timestamp(value).to_pydatetime()


class Store:
    """Plans and forecasts in a database.

    Parameters
    ----------
    url
        SQLAlchemy URL. SQLite parent folders are created.

    Raises
    ------
    BackendUnavailableError
        The database cannot be reached (the message names the URL without its password).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine: Engine = create_engine(url, future=True)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise InputError(f"database URL {url!r} is not usable: {exc}") from exc
        if self.engine.dialect.name == "sqlite":
            from carbonsched.store.service import enable_sqlite_wal

            enable_sqlite_wal(self.engine)
        self.migrate()

    def _safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        try:
            with self.engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except OperationalError as exc:
            raise BackendUnavailableError(
                f"database {self._safe_url()} is unreachable: "
                f"{' '.join(str(exc.orig).split())}; check "
                "CARBONSCHED_DATABASE_URL and that the server is running") from exc

    def save_plan(self, plan: dict[str, Any], forecasts: pd.DataFrame | None = None) -> None:
        """Store a plan document (the ``--out`` JSON) and the forecasts it used.

        Parameters
        ----------
        plan
            The plan document (keys as written by ``carbonsched plan --out``).
        forecasts
            Long frame with columns site, signal, model, issued_at, ts, mean, lo_80, hi_80,
            lo_95, hi_95; optional.
        """
        try:
            self._save_plan(plan, forecasts)
        except OperationalError as exc:
            raise BackendUnavailableError(
                f"database {self._safe_url()} failed while recording plan {plan['plan_id']}: "
                f"{' '.join(str(exc.orig).split())}; the plan itself is intact (write it with "
                "--out) — check that the server is running, then plan again") from exc
        except SQLAlchemyError as exc:
            raise BackendError(
                f"database {self._safe_url()} refused plan {plan['plan_id']}: "
                f"{' '.join(str(exc).split())[:300]}") from exc

    def _save_plan(self, plan: dict[str, Any], forecasts: pd.DataFrame | None) -> None:
        pid = plan["plan_id"]
        with Session(self.engine) as s, s.begin():
            # children first: SQLite enforces no ON DELETE CASCADE without a PRAGMA
            for table in (ForecastRow, InferenceRow, PlacementRow, PlanRow):
                s.execute(delete(table).where(table.plan_id == pid))
            s.add(PlanRow(
                plan_id=pid, date=plan["date"], catalog=plan["catalog"],
                created_at=datetime.now(UTC), signal_quality=plan["signal_quality"],
                solver_name=plan["solver"]["name"], solver_status=plan["solver"]["status"],
                mip_gap=plan["solver"].get("mip_gap"), solve_seconds=plan["solver"]["seconds"],
                energy_kwh=plan["totals"]["energy_kwh"],
                emissions_kg=plan["totals"]["emissions_kg"],
                baseline_emissions_kg=plan["totals"]["baseline_emissions_kg"],
                plan_json=json.dumps(plan)))
            s.flush()
            for p in plan["placements"]:
                s.add(PlacementRow(plan_id=pid, job_id=p["job_id"], state="Planned",
                                   reason="Placed", site=p["site"], start=_ts(p["start"]),
                                   end=_ts(p["end"]), gpu_type=p["gpu_type"], gpus=p["gpus"],
                                   energy_kwh=p["energy_kwh"], emissions_kg=p["emissions_kg"]))
            for u in plan["unplaced"]:
                s.add(PlacementRow(plan_id=pid, job_id=u["job_id"], state="Pending",
                                   reason=u["reason"]))
            for i in plan["inference"]:
                s.add(InferenceRow(plan_id=pid, area=i["area"], hour=_ts(i["hour"]),
                                   site=i["site"], gpu_type=i.get("gpu_type", ""),
                                   gpus=i["gpus"], energy_kwh=i.get("energy_kwh", 0.0),
                                   emissions_kg=i.get("emissions_kg", 0.0)))
            if forecasts is not None and len(forecasts):
                s.add_all(ForecastRow(
                    plan_id=pid, site=r.site, signal=r.signal, model=r.model,
                    issued_at=pd.Timestamp(r.issued_at).to_pydatetime(),
                    ts=pd.Timestamp(r.ts).to_pydatetime(), mean=float(r.mean),
                    lo_80=float(r.lo_80), hi_80=float(r.hi_80), lo_95=float(r.lo_95),
                    hi_95=float(r.hi_95)) for r in forecasts.itertuples(index=False))

    def get_plan(self, plan_id: str) -> dict[str, Any]:
        """The stored plan document.

        Raises
        ------
        InputError
            No plan with that id.
        """
        with Session(self.engine) as s:
            row = s.get(PlanRow, plan_id)
            if row is None:
                raise InputError(f"no plan {plan_id!r} in {self._safe_url()}")
            return json.loads(row.plan_json)

    def list_plans(self, date: str | None = None) -> list[dict[str, Any]]:
        """Summaries of stored plans, newest first (optionally for one date)."""
        q = select(PlanRow).order_by(PlanRow.created_at.desc())
        if date:
            q = q.where(PlanRow.date == date)
        with Session(self.engine) as s:
            return [dict(plan_id=r.plan_id, date=r.date, catalog=r.catalog,
                         solver_status=r.solver_status, emissions_kg=r.emissions_kg,
                         baseline_emissions_kg=r.baseline_emissions_kg,
                         created_at=r.created_at.isoformat())
                    for r in s.scalars(q)]

    def placements(self, plan_id: str) -> pd.DataFrame:
        """Job rows (state, reason, site, start, end, ...) of one plan."""
        with Session(self.engine) as s:
            rows = s.scalars(select(PlacementRow).where(PlacementRow.plan_id == plan_id)).all()
            return pd.DataFrame([{c: getattr(r, c) for c in
                                  ("job_id", "state", "reason", "site", "start", "end",
                                   "gpu_type", "gpus", "energy_kwh", "emissions_kg")}
                                 for r in rows])

    def forecasts(self, plan_id: str) -> pd.DataFrame:
        """Forecast rows of one plan."""
        with Session(self.engine) as s:
            rows = s.scalars(select(ForecastRow).where(ForecastRow.plan_id == plan_id)).all()
            return pd.DataFrame([{c: getattr(r, c) for c in
                                  ("site", "signal", "model", "issued_at", "ts", "mean",
                                   "lo_80", "hi_80", "lo_95", "hi_95")} for r in rows])
