"""Limits per key and per tenant: each API key's own request rate (``api_keys.requests_per_minute``;
NULL: the settings' default), the keys' rate state shared by every API process
(``api_key_rates``) and each tenant's conversations with whether they are still open
(``tenant_conversations``; ``activities.store.limits``).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "requests_per_minute" not in {c["name"] for c in inspector.get_columns("api_keys")}:
        op.add_column("api_keys", sa.Column("requests_per_minute", sa.Integer, nullable=True))
    present = set(inspector.get_table_names())
    if "api_key_rates" not in present:
        op.create_table(
            "api_key_rates",
            sa.Column("key_id", sa.String(12), primary_key=True),
            sa.Column("state", sa.String(200), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        )
    if "tenant_conversations" not in present:
        op.create_table(
            "tenant_conversations",
            sa.Column("conversation_id", sa.String(1000), primary_key=True),
            sa.Column("tenant", sa.String(64), nullable=False),
            sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        )
        op.create_index("ix_tenant_conversations_tenant", "tenant_conversations", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_tenant_conversations_tenant", "tenant_conversations")
    op.drop_table("tenant_conversations")
    op.drop_table("api_key_rates")
    with op.batch_alter_table("api_keys") as batch:  # SQLite drops columns by copying the table
        batch.drop_column("requests_per_minute")
