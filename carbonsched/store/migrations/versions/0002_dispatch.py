"""Dispatch outbox: one row per dispatch unit (job id, piece) with its backend's lifecycle.

Revision ID: 0002_dispatch
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0002_dispatch"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``dispatch_intents``."""
    op.create_table(
        "dispatch_intents",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(220), nullable=False, unique=True),
        sa.Column("job_id", sa.String(200), nullable=False, index=True),
        sa.Column("piece", sa.Integer, nullable=False),
        sa.Column("plan_id", sa.String(64), nullable=False, index=True),
        sa.Column("site", sa.String(100), nullable=False),
        sa.Column("backend", sa.String(200), nullable=False),
        sa.Column("state", sa.String(20), nullable=False, index=True),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("backend_id", sa.String(300), nullable=True),
        sa.Column("request_json", sa.Text, nullable=False),
        sa.Column("planned_start", UTCDateTime(), nullable=False),
        sa.Column("planned_end", UTCDateTime(), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("submitted_at", UTCDateTime(), nullable=True),
        sa.Column("actual_start", UTCDateTime(), nullable=True),
        sa.Column("actual_end", UTCDateTime(), nullable=True),
        sa.Column("times_source", sa.String(40), nullable=True),
    )


def downgrade() -> None:
    """Drop ``dispatch_intents``."""
    op.drop_table("dispatch_intents")
