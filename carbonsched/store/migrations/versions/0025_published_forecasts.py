"""The providers' published forecasts, kept with their publication times (issue 35).

Revision ID: 0025_published_forecasts
Revises: 0024_forecast_calibration
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.base import UTCDateTime

revision = "0025_published_forecasts"
down_revision = "0024_forecast_calibration"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create published_forecasts (one row per provider, zone, feature, publication, hour)."""
    op.create_table(
        "published_forecasts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("provider", sa.String(60), nullable=False),
        sa.Column("zone", sa.String(100), nullable=False),
        sa.Column("feature", sa.String(60), nullable=False),
        sa.Column("published_at", UTCDateTime(), nullable=False),
        sa.Column("ts", UTCDateTime(), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("provider", "zone", "feature", "published_at", "ts",
                            name="uq_published_forecasts_key"),
    )
    op.create_index("ix_published_forecasts_lookup", "published_forecasts",
                    ["zone", "feature", "ts"])


def downgrade() -> None:
    """Drop published_forecasts (and its index)."""
    op.drop_index("ix_published_forecasts_lookup", table_name="published_forecasts")
    op.drop_table("published_forecasts")
