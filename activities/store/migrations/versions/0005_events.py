"""The public events of each conversation (``events``; ``workflows.domain.journal``): one row per
event, keyed by (conversation, sequence), its business key unique per conversation.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "events" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "events",
        sa.Column("conversation_id", sa.String(1000), primary_key=True),
        sa.Column("sequence", sa.Integer, primary_key=True),
        sa.Column("event_key", sa.String(1100), nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("customer_id", sa.String(1000), nullable=True),
        sa.Column("type", sa.String(50), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("conversation_id", "event_key", name="uq_events_conversation_key"),
    )
    op.create_index("ix_events_customer_id", "events", ["customer_id"])
    op.create_index("ix_events_at", "events", ["at"])


def downgrade() -> None:
    op.drop_table("events")
