"""Outbox leases: a dispatcher claims an intent before any side effect.

Adds to ``dispatch_intents``: ``lease_owner`` and ``lease_expires_at`` (the claim: who holds the
row and until when; both NULL when free), ``submit_attempted_at`` (written, under the lease, just
before each submission: a pending row with it set may already exist on its backend and is looked
up by key before any resubmission), ``backend_submitted_at`` (the submit time the backend itself
reports, in its clock: bounds ``sacct``) and ``duplicates`` (other backend ids found carrying the
same key, comma-separated; shown by ``carbonsched status``).

Revision ID: 0007_outbox_leases
Revises: 0006_bookings_tokens
"""

import sqlalchemy as sa
from alembic import op

from carbonsched.store.models import UTCDateTime

revision = "0007_outbox_leases"
down_revision = "0006_bookings_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the lease, submit-attempt, backend-submit-time and duplicates columns."""
    with op.batch_alter_table("dispatch_intents") as t:
        t.add_column(sa.Column("lease_owner", sa.String(200), nullable=True))
        t.add_column(sa.Column("lease_expires_at", UTCDateTime(), nullable=True))
        t.add_column(sa.Column("submit_attempted_at", UTCDateTime(), nullable=True))
        t.add_column(sa.Column("backend_submitted_at", UTCDateTime(), nullable=True))
        t.add_column(sa.Column("duplicates", sa.Text, nullable=False, server_default=""))
    op.create_index("ix_dispatch_intents_lease_owner", "dispatch_intents", ["lease_owner"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_dispatch_intents_lease_owner", "dispatch_intents")
    with op.batch_alter_table("dispatch_intents") as t:
        for c in ("duplicates", "backend_submitted_at", "submit_attempted_at",
                  "lease_expires_at", "lease_owner"):
            t.drop_column(c)
