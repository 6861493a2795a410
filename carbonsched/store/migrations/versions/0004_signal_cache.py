"""Provider signal cache: signal_cache (one row per provider, zone, signal, hour), signal_fetches.

Revision ID: 0004_signal_cache
Revises: 0001 (the lead re-chains at merge)
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0004_signal_cache"
down_revision = "0003_service"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create signal_cache and signal_fetches."""
    op.create_table(
        "signal_cache",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("provider", sa.String(60), nullable=False),
        sa.Column("zone", sa.String(100), nullable=False),
        sa.Column("signal", sa.String(60), nullable=False),
        sa.Column("ts", UTCDateTime(), nullable=False),
        sa.Column("value", sa.Float, nullable=True),
        sa.Column("is_estimated", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("emission_factor_type", sa.String(20), nullable=True),
        sa.Column("signal_type", sa.String(40), nullable=True),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("provider", "zone", "signal", "ts", name="uq_signal_cache_key"),
    )
    op.create_table(
        "signal_fetches",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("provider", sa.String(60), nullable=False, index=True),
        sa.Column("zone", sa.String(100), nullable=False),
        sa.Column("signal", sa.String(60), nullable=False),
        sa.Column("start", UTCDateTime(), nullable=False),
        sa.Column("end", UTCDateTime(), nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("requests", sa.Integer, nullable=False, server_default="0"),
        sa.Column("hours_stored", sa.Integer, nullable=False, server_default="0"),
        sa.Column("newest_value_at", UTCDateTime(), nullable=True),
        sa.Column("age_hours", sa.Float, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("signal_fetches")
    op.drop_table("signal_cache")
