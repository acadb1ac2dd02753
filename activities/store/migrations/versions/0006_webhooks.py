"""Webhook subscriptions (``webhooks``) and their deliveries (``webhook_deliveries``, the
outbox of the delivery workflows): ``activities.store.webhooks``.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = set(sa.inspect(op.get_bind()).get_table_names())
    if "webhooks" not in present:
        op.create_table(
            "webhooks",
            sa.Column("webhook_id", sa.String(40), primary_key=True),
            sa.Column("tenant", sa.String(64), nullable=False),
            sa.Column("url", sa.String(2048), nullable=False),
            sa.Column("event_types", sa.JSON, nullable=False),
            sa.Column("description", sa.String(500), nullable=False),
            sa.Column("secret", sa.String(300), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        )
        op.create_index("ix_webhooks_tenant", "webhooks", ["tenant"])
    if "webhook_deliveries" not in present:
        op.create_table(
            "webhook_deliveries",
            sa.Column("webhook_id", sa.String(40), primary_key=True),
            sa.Column("event_id", sa.String(40), primary_key=True),
            sa.Column("tenant", sa.String(64), nullable=False),
            sa.Column("conversation_id", sa.String(1000), nullable=True),
            sa.Column("refund_id", sa.String(1000), nullable=True),
            sa.Column("sequence", sa.Integer, nullable=False),
            sa.Column("event_type", sa.String(50), nullable=False),
            sa.Column("status", sa.String(20), nullable=False),
            sa.Column("attempts", sa.Integer, nullable=False),
            sa.Column("last_status_code", sa.Integer, nullable=True),
            sa.Column("last_error", sa.String(200), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        )
        op.create_index("ix_webhook_deliveries_conversation_id", "webhook_deliveries", ["conversation_id"])
        op.create_index("ix_webhook_deliveries_refund_id", "webhook_deliveries", ["refund_id"])
        op.create_index("ix_webhook_deliveries_started_at", "webhook_deliveries", ["started_at"])


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
