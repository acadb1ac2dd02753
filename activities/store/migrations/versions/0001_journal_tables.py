"""The journal's tables as of v0.2: model_calls, verdicts, transcript, audit_log, api_keys.

Databases made before migrations existed (``metadata.create_all``) may hold some of these
tables already: they are kept as they are (their shape is this revision's), and only the
missing ones are created.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(1000)
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())

    def table(name: str, *columns: sa.Column, indexes: tuple[str, ...] = ()) -> None:
        if name in existing:
            return
        op.create_table(name, *columns)
        for column in indexes:
            op.create_index(f"ix_{name}_{column}", name, [column])

    table("model_calls",
          sa.Column("conversation_id", ID, primary_key=True),
          sa.Column("turn", sa.Integer, primary_key=True),
          sa.Column("call_seq", sa.Integer, primary_key=True),
          sa.Column("customer_id", ID, nullable=True),
          sa.Column("prompt_version", sa.String(100), nullable=False),
          sa.Column("model", sa.String(200), nullable=False),
          sa.Column("view", sa.JSON, nullable=False),
          sa.Column("proposal", sa.JSON, nullable=True),
          sa.Column("stop_reason", sa.String(50), nullable=True),
          sa.Column("input_tokens", sa.Integer, nullable=False),
          sa.Column("output_tokens", sa.Integer, nullable=False),
          sa.Column("recorded_at", TIME, nullable=False),
          indexes=("customer_id", "recorded_at"))
    table("verdicts",
          sa.Column("conversation_id", ID, primary_key=True),
          sa.Column("turn", sa.Integer, primary_key=True),
          sa.Column("call_seq", sa.Integer, primary_key=True),
          sa.Column("customer_id", ID, nullable=True),
          sa.Column("verdict", sa.String(30), nullable=False),
          sa.Column("rule", sa.String(200), nullable=True),
          sa.Column("reason", sa.Text, nullable=True),
          sa.Column("outcome", sa.String(20), nullable=True),
          sa.Column("recorded_at", TIME, nullable=False),
          indexes=("customer_id", "rule"))
    table("transcript",
          sa.Column("conversation_id", ID, primary_key=True),
          sa.Column("turn", sa.Integer, primary_key=True),
          sa.Column("seq", sa.Integer, primary_key=True),
          sa.Column("customer_id", ID, nullable=True),
          sa.Column("role", sa.String(20), nullable=False),
          sa.Column("kind", sa.String(20), nullable=False),
          sa.Column("text", sa.Text, nullable=False),
          sa.Column("message_id", sa.String(1000), nullable=True),
          sa.Column("at", TIME, nullable=False),
          indexes=("customer_id", "at"))
    table("audit_log",
          sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
          sa.Column("at", TIME, nullable=False),
          sa.Column("actor", sa.String(200), nullable=False),
          sa.Column("action", sa.String(100), nullable=False),
          sa.Column("subject", sa.String(1000), nullable=False),
          sa.Column("detail", sa.Text, nullable=False),
          indexes=("at", "actor", "subject"))
    table("api_keys",
          sa.Column("key_id", sa.String(12), primary_key=True),
          sa.Column("digest", sa.String(64), nullable=False),
          sa.Column("tenant", sa.String(64), nullable=False),
          sa.Column("role", sa.String(20), nullable=False),
          sa.Column("customer", sa.String(64), nullable=True),
          sa.Column("label", sa.String(200), nullable=False),
          sa.Column("created_at", TIME, nullable=False),
          sa.Column("revoked_at", TIME, nullable=True),
          indexes=("tenant",))


def downgrade() -> None:
    for name in ("api_keys", "audit_log", "transcript", "verdicts", "model_calls"):
        op.drop_table(name)
