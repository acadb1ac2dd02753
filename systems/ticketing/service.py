"""The ticketing service (FastAPI, its own database): human hand-offs. ``POST /tickets``
opens one ticket (no idempotency keys); ``GET /tickets?reference=`` finds the tickets opened
for a business reference, which is how a caller learns whether an ambiguous open happened;
``GET /tickets/references`` and ``POST /tickets/erase`` (by reference or customer) serve
erasure. The routes are ``systems.service_kit.store``'s, shared with the email service.

Faults, deadlines and what is accepted (no NUL, bounded bodies): ``systems.service_kit``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

import sqlalchemy as sa
from fastapi import FastAPI
from pydantic import BaseModel, Field

from systems.service_kit.app import service_app
from systems.service_kit.limits import Text
from systems.service_kit.times import UtcTime
from systems.service_kit.store import Owners, erase_model, reference_store

metadata = sa.MetaData()
tickets = sa.Table(
    "tickets", metadata,
    sa.Column("ticket_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("reference", sa.String(300), nullable=False, index=True),
    sa.Column("user_id", sa.String(200), nullable=True),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)


class TicketIn(BaseModel):
    """A hand-off: ``reference`` (the caller's business reference), the customer, a summary."""

    reference: Text = Field(min_length=1, max_length=300)
    user_id: Optional[Text] = Field(default=None, max_length=200)
    summary: Text = Field(max_length=20_000)


OWNERS = Owners(field="user_ids", column="user_id")
Erase = erase_model("Erase", OWNERS)
"""Body of ``POST /tickets/erase``: delete every ticket with one of ``references`` or for
one of ``user_ids``."""


class Ticket(TicketIn):
    """An opened ticket with the service's id and time."""

    ticket_id: int
    created_at: UtcTime


def create_app(database_url: str) -> FastAPI:
    """The ticketing app on ``database_url`` (SQLite file or PostgreSQL)."""
    app, effects = service_app("ticketing", database_url, metadata)
    reference_store(app, effects, "tickets", tickets, "ticket_id", TicketIn, Ticket, OWNERS, Erase)
    return app
