"""Prompt caching: each recorded model call keeps its cache-read and cache-write input tokens
(``input_tokens`` is then the uncached rest, as the Messages API reports it). Rows recorded
before hold 0 in both.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = ("cache_read_input_tokens", "cache_creation_input_tokens")


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("model_calls")}
    for name in COLUMNS:
        if name not in present:  # a database made by create_all at this revision has them
            op.add_column("model_calls", sa.Column(name, sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:  # SQLite drops columns by copying the table
        for name in COLUMNS:
            batch.drop_column(name)
