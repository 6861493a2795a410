"""Tombstones of pruned jobs: a job id stays final once retention deletes its rows.

``pruned_jobs``: one row per job id whose outbox units, API record or rolling row
:func:`carbonsched.store.retention.prune` deleted (final state and reason, when), read by
the runs, the API and dispatch (:mod:`carbonsched.store.pruned_jobs`).

Revision ID: 0027_pruned_jobs
Revises: 0026_history_read_indexes
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.base import UTCDateTime

revision = "0027_pruned_jobs"
down_revision = "0026_history_read_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create pruned_jobs (and the index prune expires tombstones by)."""
    op.create_table(
        "pruned_jobs",
        sa.Column("job_id", sa.String(200), primary_key=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("pruned_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_pruned_jobs_pruned_at", "pruned_jobs", ["pruned_at"])


def downgrade() -> None:
    """Drop pruned_jobs (and its index)."""
    op.drop_index("ix_pruned_jobs_pruned_at", table_name="pruned_jobs")
    op.drop_table("pruned_jobs")
