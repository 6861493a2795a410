"""Rolling plan: rolling_jobs (one row per job carried between rolling runs).

Revision ID: 0005_rolling
Revises: 0004_signal_cache (the lead re-chains at merge)
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0005_rolling"
down_revision = "0004_signal_cache"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create rolling_jobs."""
    op.create_table(
        "rolling_jobs",
        sa.Column("job_id", sa.String(200), primary_key=True),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("state", sa.String(20), nullable=False, index=True),
        sa.Column("reason", sa.String(40), nullable=False, server_default=""),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("site", sa.String(100), nullable=True),
        sa.Column("gpu_type", sa.String(100), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("start", UTCDateTime(), nullable=True),
        sa.Column("end", UTCDateTime(), nullable=True),
        sa.Column("energy_kwh", sa.Float, nullable=True),
        sa.Column("emissions_kg", sa.Float, nullable=True),
        sa.Column("pieces_json", sa.Text, nullable=True),
        sa.Column("plan_id", sa.String(64), nullable=True),
        sa.Column("issued_at", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    """Drop rolling_jobs."""
    op.drop_table("rolling_jobs")
