"""Run records keyed by issue time: several rolling runs a day, one per issue time.

The key ``run_key`` is the run's issue time in UTC, ``YYYY-MM-DDTHH:MMZ``
(:func:`carbonsched.store.service.run_key`); it replaces ``planning_date`` as the primary key,
which stays as a column (the UTC date of the issue). Existing records get the key of their
``issued_at`` (every record written so far was issued at its planning date's 00:00 UTC, one per
date, so the keys are unique).

Revision ID: 0017_rolling_issue_time
Revises: 0014_front_door
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_rolling_issue_time"
down_revision = "0014_front_door"
branch_labels = None
depends_on = None


def _key(issued_at, planning_date: str) -> str:
    """The issue-time key of a record (its planning date's 00:00 UTC when issued_at is unset)."""
    if issued_at is None:
        return f"{planning_date}T00:00Z"
    if isinstance(issued_at, str):  # SQLite keeps the text the UTC type wrote
        from datetime import datetime

        issued_at = datetime.fromisoformat(issued_at.replace("Z", "+00:00"))
    if issued_at.tzinfo is not None:
        from datetime import UTC

        issued_at = issued_at.astimezone(UTC)
    return issued_at.strftime("%Y-%m-%dT%H:%MZ")


def _sqlite_rekey(conn, key: str) -> None:
    """Copy pipeline_runs into a table whose primary key is ``key`` (SQLite cannot alter one)."""
    old = sa.Table("pipeline_runs", sa.MetaData(), autoload_with=conn)
    cols = [sa.Column(c.name, c.type, primary_key=c.name == key,
                      nullable=False if c.name == key else c.nullable,
                      server_default=c.server_default) for c in old.columns]
    new = sa.Table("_pipeline_runs_rekeyed", sa.MetaData(), *cols)
    new.create(conn)
    names = ", ".join(f'"{c.name}"' for c in old.columns)
    conn.execute(sa.text(f"INSERT INTO _pipeline_runs_rekeyed ({names}) "
                         f"SELECT {names} FROM pipeline_runs"))
    conn.execute(sa.text("DROP TABLE pipeline_runs"))
    conn.execute(sa.text("ALTER TABLE _pipeline_runs_rekeyed RENAME TO pipeline_runs"))


def upgrade() -> None:
    """Add run_key (filled from issued_at) and make it the primary key of pipeline_runs."""
    with op.batch_alter_table("pipeline_runs") as b:
        b.add_column(sa.Column("run_key", sa.String(20), nullable=True))
    conn = op.get_bind()
    runs = sa.table("pipeline_runs", sa.column("planning_date", sa.String),
                    sa.column("issued_at"), sa.column("run_key", sa.String))
    for pdate, issued in conn.execute(sa.select(runs.c.planning_date, runs.c.issued_at)).all():
        conn.execute(runs.update().where(runs.c.planning_date == pdate)
                     .values(run_key=_key(issued, pdate)))
    if conn.dialect.name == "sqlite":
        _sqlite_rekey(conn, "run_key")
    else:
        pk_name = (sa.inspect(conn).get_pk_constraint("pipeline_runs").get("name")
                   or "pipeline_runs_pkey")
        with op.batch_alter_table("pipeline_runs") as b:
            b.drop_constraint(pk_name, type_="primary")
            b.alter_column("run_key", existing_type=sa.String(20), nullable=False)
            b.create_primary_key("pipeline_runs_pkey", ["run_key"])
    op.create_index("ix_pipeline_runs_planning_date", "pipeline_runs", ["planning_date"])


def downgrade() -> None:
    """Back to one record per planning date (a date's later issues are dropped)."""
    conn = op.get_bind()
    conn.execute(sa.text("DELETE FROM pipeline_runs WHERE run_key NOT LIKE '%T00:00Z'"))
    op.drop_index("ix_pipeline_runs_planning_date", "pipeline_runs")
    if conn.dialect.name == "sqlite":
        _sqlite_rekey(conn, "planning_date")
        with op.batch_alter_table("pipeline_runs") as b:
            b.drop_column("run_key")
        return
    pk_name = (sa.inspect(conn).get_pk_constraint("pipeline_runs").get("name")
               or "pipeline_runs_pkey")
    with op.batch_alter_table("pipeline_runs") as b:
        b.drop_constraint(pk_name, type_="primary")
        b.create_primary_key("pipeline_runs_pkey", ["planning_date"])
        b.drop_column("run_key")
