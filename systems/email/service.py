"""The email service (FastAPI, its own database). It has no idempotency keys, as many real
mail APIs: every ``POST /messages`` sends one more email. Sent messages can be searched by
the business reference the sender gave (``GET /messages?reference=``), which is how a caller
finds out whether an ambiguous send went out.

Faults and deadlines: ``systems.service_kit``.
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from fastapi import FastAPI, Request
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection

from systems.service_kit.app import service_app

metadata = sa.MetaData()
messages = sa.Table(
    "email_messages", metadata,
    sa.Column("message_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("reference", sa.String(300), nullable=False, index=True),
    sa.Column("to_email", sa.String(320), nullable=False),
    sa.Column("subject", sa.String(500), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)


class Email(BaseModel):
    """An email to send; ``reference`` is the sender's business reference (searchable)."""

    reference: str = Field(min_length=1, max_length=300)
    to_email: str = Field(min_length=1, max_length=320)
    subject: str = Field(max_length=500)
    body: str = Field(max_length=20_000)


class Erase(BaseModel):
    """Body of ``POST /messages/erase``: delete every message with one of ``references`` or
    sent to one of ``to_emails`` (case-insensitive)."""

    references: list[str] = Field(default_factory=list, max_length=10_000)
    to_emails: list[str] = Field(default_factory=list, max_length=100)


class Sent(Email):
    """A sent email with the service's own id and time."""

    message_id: int
    created_at: datetime


def create_app(database_url: str) -> FastAPI:
    """The email app on ``database_url`` (SQLite file or PostgreSQL)."""
    app, effects = service_app("email", database_url, metadata)

    @app.post("/messages", status_code=201, response_model=Sent)
    def send(email: Email, request: Request) -> Sent:
        """Send ``email`` (always a new message)."""

        def work(conn: Connection) -> Sent:
            now = datetime.now(timezone.utc)
            new_id = conn.execute(messages.insert().values(**email.model_dump(), created_at=now)
                                  .returning(messages.c.message_id)).scalar_one()
            return Sent(**email.model_dump(), message_id=new_id, created_at=now)

        return effects.run(request, work)

    @app.get("/messages", response_model=list[Sent])
    def search(reference: str) -> list[Sent]:
        """Every sent email with this business reference, oldest first (empty: none sent)."""
        with effects.engine.connect() as conn:
            rows = conn.execute(sa.select(messages).where(messages.c.reference == reference)
                                .order_by(messages.c.message_id)).all()
        return [Sent(**row._mapping) for row in rows]

    @app.get("/messages/references", response_model=list[str])
    def references() -> list[str]:
        """Every business reference the service holds (the erasure of a conversation's records)."""
        with effects.engine.connect() as conn:
            return list(conn.execute(sa.select(messages.c.reference).distinct()).scalars())

    @app.post("/messages/erase")
    def erase(body: Erase) -> dict[str, int]:
        """Delete the messages ``body`` names (a customer's erasure); returns how many."""
        lowered = [e.lower() for e in body.to_emails]
        with effects.engine.begin() as conn:
            deleted = conn.execute(messages.delete().where(sa.or_(
                messages.c.reference.in_(body.references), sa.func.lower(messages.c.to_email).in_(lowered))))
        return {"deleted": deleted.rowcount}

    return app
