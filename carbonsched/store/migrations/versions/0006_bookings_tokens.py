"""Booking ledger (one lock row per plan and site) and token expiry.

Revision ID: 0006_bookings_tokens
Revises: 0005_rolling
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0006_bookings_tokens"
down_revision = "0005_rolling"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create booking_ledger; add api_tokens.expires_at."""
    op.create_table(
        "booking_ledger",
        sa.Column("plan_id", sa.String(64), primary_key=True),
        sa.Column("site", sa.String(100), primary_key=True),
        sa.Column("bookings", sa.Integer, nullable=False, server_default="0"),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    with op.batch_alter_table("api_tokens") as b:
        b.add_column(sa.Column("expires_at", UTCDateTime(), nullable=True))
    op.create_index("ix_service_jobs_plan_site", "service_jobs", ["plan_id", "site"])


def downgrade() -> None:
    """Drop booking_ledger and api_tokens.expires_at."""
    op.drop_index("ix_service_jobs_plan_site", "service_jobs")
    with op.batch_alter_table("api_tokens") as b:
        b.drop_column("expires_at")
    op.drop_table("booking_ledger")
