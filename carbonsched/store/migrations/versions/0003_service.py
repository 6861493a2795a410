"""Service tables: API tokens (hashed), submitted jobs, pipeline run records.

Revision ID: 0003_service
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0003_service"
down_revision = "0002_dispatch"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create api_tokens, service_jobs and pipeline_runs."""
    op.create_table(
        "api_tokens",
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True, index=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
    )
    op.create_table(
        "service_jobs",
        sa.Column("job_id", sa.String(200), primary_key=True),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("plan_id", sa.String(64), nullable=True, index=True),
        sa.Column("site", sa.String(100), nullable=True),
        sa.Column("start", UTCDateTime(), nullable=True),
        sa.Column("end", UTCDateTime(), nullable=True),
        sa.Column("energy_kwh", sa.Float, nullable=True),
        sa.Column("emissions_kg", sa.Float, nullable=True),
        sa.Column("reserved", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("submitted_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "pipeline_runs",
        sa.Column("planning_date", sa.String(10), primary_key=True),
        sa.Column("local_day", sa.String(10), nullable=False),
        sa.Column("issued_at", UTCDateTime(), nullable=False),
        sa.Column("trigger", sa.String(20), nullable=False),
        sa.Column("replica", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("plan_id", sa.String(64), nullable=True),
        sa.Column("solver_status", sa.String(20), nullable=True),
        sa.Column("dispatch", sa.Text, nullable=False, server_default=""),
        sa.Column("error", sa.Text, nullable=False, server_default=""),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="1"),
    )


def downgrade() -> None:
    """Drop the service tables."""
    for name in ("pipeline_runs", "service_jobs", "api_tokens"):
        op.drop_table(name)
