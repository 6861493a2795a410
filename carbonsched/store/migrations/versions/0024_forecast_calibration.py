"""The probability of a green-surplus hour on the stored forecasts (issue 35 item 5).

Revision ID: 0024_forecast_calibration
Revises: 0021_grid_events
"""

import sqlalchemy as sa
from alembic import op

revision = "0024_forecast_calibration"
down_revision = "0021_grid_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add forecasts.p_surplus (nullable: only the green-surplus rows of plans made since)."""
    with op.batch_alter_table("forecasts") as batch:
        batch.add_column(sa.Column("p_surplus", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop forecasts.p_surplus."""
    with op.batch_alter_table("forecasts") as batch:
        batch.drop_column("p_surplus")
