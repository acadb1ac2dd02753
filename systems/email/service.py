"""The email service (FastAPI, its own database). It has no idempotency keys, as many real
mail APIs: every ``POST /messages`` sends one more email. Sent messages can be searched by
the business reference the sender gave (``GET /messages?reference=``), which is how a caller
finds out whether an ambiguous send went out; ``GET /messages/references`` and
``POST /messages/erase`` (by reference or recipient, case-insensitive) serve erasure. The
routes are ``systems.service_kit.store``'s, shared with the ticketing service.

Faults, deadlines and what is accepted (no NUL, bounded bodies): ``systems.service_kit``.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from fastapi import FastAPI
from pydantic import BaseModel, Field

from systems.service_kit.app import service_app
from systems.service_kit.limits import Text
from systems.service_kit.times import UtcTime
from systems.service_kit.store import Owners, erase_model, reference_store

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

    reference: Text = Field(min_length=1, max_length=300)
    to_email: Text = Field(min_length=1, max_length=320)
    subject: Text = Field(max_length=500)
    body: Text = Field(max_length=20_000)


OWNERS = Owners(field="to_emails", column="to_email", case_insensitive=True)
Erase = erase_model("Erase", OWNERS)
"""Body of ``POST /messages/erase``: delete every message with one of ``references`` or
sent to one of ``to_emails`` (case-insensitive)."""


class Sent(Email):
    """A sent email with the service's own id and time."""

    message_id: int
    created_at: UtcTime


def create_app(database_url: str) -> FastAPI:
    """The email app on ``database_url`` (SQLite file or PostgreSQL)."""
    app, effects = service_app("email", database_url, metadata)
    reference_store(app, effects, "messages", messages, "message_id", Email, Sent, OWNERS, Erase)
    return app
