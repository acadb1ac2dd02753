"""Facts remembered about customers across conversations (``memory_facts``;
``activities.store.memory``): one row per fact, keyed by its fact id, scoped to tenant, store
and customer pseudonym; and the ledger of the conversations' memory writes (``memory_writes``),
one row per idempotency key.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    existing = sa.inspect(op.get_bind()).get_table_names()
    if "memory_writes" not in existing:
        op.create_table(
            "memory_writes",
            sa.Column("key_digest", sa.String(64), primary_key=True),
            sa.Column("tool", sa.String(40), nullable=False),
            sa.Column("digest", sa.String(64), nullable=False),
            sa.Column("customer", sa.String(64), nullable=False),
            sa.Column("outcome", sa.String(20), nullable=False),
            sa.Column("result", sa.String(2000), nullable=False),
            sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        )
        op.create_index("ix_memory_writes_customer", "memory_writes", ["customer"])
        op.create_index("ix_memory_writes_at", "memory_writes", ["at"])
    if "memory_facts" in existing:
        return
    op.create_table(
        "memory_facts",
        sa.Column("fact_id", sa.String(40), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("store", sa.String(100), nullable=False),
        sa.Column("customer", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("value", sa.String(200), nullable=False),
        sa.Column("order_id", sa.String(100), nullable=True),
        sa.Column("source_conversation", sa.String(1000), nullable=False),
        sa.Column("source_turn", sa.Integer, nullable=False),
        sa.Column("source_words", sa.String(500), nullable=False),
        sa.Column("learnt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_memory_facts_owner", "memory_facts", ["tenant", "customer"])
    op.create_index("ix_memory_facts_expires_at", "memory_facts", ["expires_at"])


def downgrade() -> None:
    op.drop_table("memory_writes")
    op.drop_table("memory_facts")
