"""The dispatch log of effects sent to external systems (``activities.reconcile``): one row
per effect key (its SHA-256) with its status (dispatched, committed, absent) and the brief
result. Kept only if a database already made it before it came under migrations.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "effect_dispatches" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "effect_dispatches",
        sa.Column("effect_key", sa.String(64), primary_key=True),
        sa.Column("system", sa.String(50), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("effect_dispatches")
