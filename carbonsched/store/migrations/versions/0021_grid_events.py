"""Grid events and the actions taken on each, one row per (event, dispatch unit, action).

Revision ID: 0021_grid_events
Revises: 0017_rolling_issue_time
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0021_grid_events"
down_revision = "0017_rolling_issue_time"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create grid_events and grid_event_actions (unique on event_id, key, action)."""
    op.create_table(
        "grid_events",
        sa.Column("event_id", sa.String(40), primary_key=True),
        sa.Column("site", sa.String(100), nullable=False, index=True),
        sa.Column("start", UTCDateTime(), nullable=False),
        sa.Column("end", UTCDateTime(), nullable=False),
        sa.Column("target_kw", sa.Float(), nullable=True),
        sa.Column("target_fraction", sa.Float(), nullable=True),
        sa.Column("notice_s", sa.Float(), nullable=False, server_default="0"),
        sa.Column("source", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("planned_at", UTCDateTime(), nullable=True),
        sa.Column("baseline_kw", sa.Float(), nullable=True),
        sa.Column("target_reduction_kw", sa.Float(), nullable=True),
        sa.Column("planned_reduction_kw", sa.Float(), nullable=True),
        sa.Column("shortfall_kw", sa.Float(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
    )
    op.create_table(
        "grid_event_actions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(40),
                  sa.ForeignKey("grid_events.event_id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("key", sa.String(220), nullable=False, index=True),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("site", sa.String(100), nullable=False),
        sa.Column("backend_id", sa.String(300), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("power_kw", sa.Float(), nullable=False, server_default="0"),
        sa.Column("state", sa.String(20), nullable=False, index=True),
        sa.Column("owner", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("done_at", UTCDateTime(), nullable=True),
        sa.UniqueConstraint("event_id", "key", "action",
                            name="uq_grid_event_actions_event_key_action"),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("grid_event_actions")
    op.drop_table("grid_events")
