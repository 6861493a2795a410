"""Indexes for the reads that must not grow with history (issue 73).

``ix_dispatch_intents_actual_end``: the report reads the runs that overlap its period
(:func:`carbonsched.dispatch.outbox.dispatch_records` ``ran_in``), not every run ever ended.
``ix_rolling_jobs_state_end``: a rolling run reads the pending jobs and the committed work
that ends after its issue time (:meth:`carbonsched.store.rolling_state.RollingStore.load`),
not every job the state ever held. ``ix_rolling_jobs_issued_at``: the latest run's issue time
(a ``max``) from the index, not a scan of every row.

Revision ID: 0026_history_read_indexes
Revises: 0025_published_forecasts
"""

from alembic import op

revision = "0026_history_read_indexes"
down_revision = "0025_published_forecasts"
branch_labels = None
depends_on = None

INDEXES = (
    ("ix_dispatch_intents_actual_end", "dispatch_intents", ["actual_end"]),
    ("ix_rolling_jobs_state_end", "rolling_jobs", ["state", "end"]),
    ("ix_rolling_jobs_issued_at", "rolling_jobs", ["issued_at"]),
)


def upgrade() -> None:
    """Create the three indexes."""
    for name, table, cols in INDEXES:
        op.create_index(name, table, cols)


def downgrade() -> None:
    """Drop them."""
    for name, table, _cols in reversed(INDEXES):
        op.drop_index(name, table_name=table)
