"""Run records say their catalog and carry notes (a plan the run replaced, a start-up run).

Revision ID: 0014_front_door
Revises: 0009_run_heartbeat
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_front_door"
down_revision = "0009_run_heartbeat"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add catalog (nullable: records made before it name none) and notes to pipeline_runs."""
    with op.batch_alter_table("pipeline_runs") as b:
        b.add_column(sa.Column("catalog", sa.String(200), nullable=True))
        b.add_column(sa.Column("notes", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    """Drop the columns."""
    with op.batch_alter_table("pipeline_runs") as b:
        b.drop_column("notes")
        b.drop_column("catalog")
