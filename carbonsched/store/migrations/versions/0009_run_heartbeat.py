"""Run records' lease (owner, heartbeat, expiry) and the service_leases table (cron leader).

Revision ID: 0009_run_heartbeat
Revises: 0007_outbox_leases
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0009_run_heartbeat"
down_revision = "0007_outbox_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add owner, heartbeat_at, lease_expires_at to pipeline_runs; create service_leases."""
    with op.batch_alter_table("pipeline_runs") as b:
        b.add_column(sa.Column("owner", sa.String(200), nullable=True))
        b.add_column(sa.Column("heartbeat_at", UTCDateTime(), nullable=True))
        b.add_column(sa.Column("lease_expires_at", UTCDateTime(), nullable=True))
    op.create_table(
        "service_leases",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("acquired_at", UTCDateTime(), nullable=False),
        sa.Column("renewed_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    """Drop service_leases and the lease columns."""
    op.drop_table("service_leases")
    with op.batch_alter_table("pipeline_runs") as b:
        b.drop_column("lease_expires_at")
        b.drop_column("heartbeat_at")
        b.drop_column("owner")
