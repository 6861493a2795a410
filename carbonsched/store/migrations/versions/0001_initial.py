"""Initial schema: plans, placements, inference placements, forecasts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.String(64), primary_key=True),
        sa.Column("date", sa.String(10), index=True),
        sa.Column("catalog", sa.String(200)),
        sa.Column("created_at", UTCDateTime()),
        sa.Column("signal_quality", sa.String(20)),
        sa.Column("solver_name", sa.String(20)),
        sa.Column("solver_status", sa.String(20)),
        sa.Column("mip_gap", sa.Float, nullable=True),
        sa.Column("solve_seconds", sa.Float),
        sa.Column("energy_kwh", sa.Float),
        sa.Column("emissions_kg", sa.Float),
        sa.Column("baseline_emissions_kg", sa.Float),
        sa.Column("plan_json", sa.Text),
    )
    op.create_table(
        "placements",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.String(64),
                  sa.ForeignKey("plans.plan_id", ondelete="CASCADE"), index=True),
        sa.Column("job_id", sa.String(200), index=True),
        sa.Column("state", sa.String(20)),
        sa.Column("reason", sa.String(40)),
        sa.Column("site", sa.String(100), nullable=True),
        sa.Column("start", UTCDateTime(), nullable=True),
        sa.Column("end", UTCDateTime(), nullable=True),
        sa.Column("gpu_type", sa.String(40), nullable=True),
        sa.Column("gpus", sa.Integer, nullable=True),
        sa.Column("energy_kwh", sa.Float, nullable=True),
        sa.Column("emissions_kg", sa.Float, nullable=True),
    )
    op.create_table(
        "inference_placements",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.String(64),
                  sa.ForeignKey("plans.plan_id", ondelete="CASCADE"), index=True),
        sa.Column("area", sa.String(100)),
        sa.Column("hour", UTCDateTime()),
        sa.Column("site", sa.String(100)),
        sa.Column("gpu_type", sa.String(40)),
        sa.Column("gpus", sa.Integer),
        sa.Column("energy_kwh", sa.Float),
        sa.Column("emissions_kg", sa.Float),
    )
    op.create_table(
        "forecasts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.String(64),
                  sa.ForeignKey("plans.plan_id", ondelete="CASCADE"), index=True),
        sa.Column("site", sa.String(100)),
        sa.Column("signal", sa.String(60)),
        sa.Column("model", sa.String(200)),
        sa.Column("issued_at", UTCDateTime()),
        sa.Column("ts", UTCDateTime()),
        sa.Column("mean", sa.Float),
        sa.Column("lo_80", sa.Float),
        sa.Column("hi_80", sa.Float),
        sa.Column("lo_95", sa.Float),
        sa.Column("hi_95", sa.Float),
    )


def downgrade() -> None:
    """Drop the four tables."""
    for name in ("forecasts", "inference_placements", "placements", "plans"):
        op.drop_table(name)
