"""The public events of each refund (``refund_events``; ``workflows.domain.journal``): one row per
event, keyed by (refund, sequence), its business key unique per refund; the conversation that
started it (none for a backend's request) and the order's owner, for erasure and retention.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "refund_events" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "refund_events",
        sa.Column("refund_id", sa.String(1000), primary_key=True),
        sa.Column("sequence", sa.Integer, primary_key=True),
        sa.Column("event_key", sa.String(1100), nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("conversation_id", sa.String(1000), nullable=True),
        sa.Column("customer_id", sa.String(1000), nullable=True),
        sa.Column("type", sa.String(50), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("refund_id", "event_key", name="uq_refund_events_refund_key"),
    )
    op.create_index("ix_refund_events_conversation_id", "refund_events", ["conversation_id"])
    op.create_index("ix_refund_events_customer_id", "refund_events", ["customer_id"])
    op.create_index("ix_refund_events_at", "refund_events", ["at"])


def downgrade() -> None:
    op.drop_table("refund_events")
