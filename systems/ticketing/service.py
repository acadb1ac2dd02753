"""The ticketing service (FastAPI, its own database): human hand-offs. ``POST /tickets``
opens one ticket (no idempotency keys); ``GET /tickets?reference=`` finds the tickets opened
for a business reference, which is how a caller learns whether an ambiguous open happened.

Faults and deadlines: ``systems.service_kit``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

import sqlalchemy as sa
from fastapi import FastAPI, Request
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection

from systems.service_kit.app import service_app

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

    reference: str = Field(min_length=1, max_length=300)
    user_id: Optional[str] = Field(default=None, max_length=200)
    summary: str = Field(max_length=20_000)


class Erase(BaseModel):
    """Body of ``POST /tickets/erase``: delete every ticket with one of ``references`` or for
    one of ``user_ids``."""

    references: list[str] = Field(default_factory=list, max_length=10_000)
    user_ids: list[str] = Field(default_factory=list, max_length=100)


class Ticket(TicketIn):
    """An opened ticket with the service's id and time."""

    ticket_id: int
    created_at: datetime


def create_app(database_url: str) -> FastAPI:
    """The ticketing app on ``database_url`` (SQLite file or PostgreSQL)."""
    app, effects = service_app("ticketing", database_url, metadata)

    @app.post("/tickets", status_code=201, response_model=Ticket)
    def open_ticket(ticket: TicketIn, request: Request) -> Ticket:
        """Open ``ticket`` (always a new one)."""

        def work(conn: Connection) -> Ticket:
            now = datetime.now(timezone.utc)
            new_id = conn.execute(tickets.insert().values(**ticket.model_dump(), created_at=now)
                                  .returning(tickets.c.ticket_id)).scalar_one()
            return Ticket(**ticket.model_dump(), ticket_id=new_id, created_at=now)

        return effects.run(request, work)

    @app.get("/tickets", response_model=list[Ticket])
    def search(reference: str) -> list[Ticket]:
        """Every ticket opened for this reference, oldest first (empty: none)."""
        with effects.engine.connect() as conn:
            rows = conn.execute(sa.select(tickets).where(tickets.c.reference == reference)
                                .order_by(tickets.c.ticket_id)).all()
        return [Ticket(**row._mapping) for row in rows]

    @app.get("/tickets/references", response_model=list[str])
    def references() -> list[str]:
        """Every business reference the service holds (the erasure of a conversation's records)."""
        with effects.engine.connect() as conn:
            return list(conn.execute(sa.select(tickets.c.reference).distinct()).scalars())

    @app.post("/tickets/erase")
    def erase(body: Erase) -> dict[str, int]:
        """Delete the tickets ``body`` names (a customer's erasure); returns how many."""
        with effects.engine.begin() as conn:
            deleted = conn.execute(tickets.delete().where(sa.or_(
                tickets.c.reference.in_(body.references), tickets.c.user_id.in_(body.user_ids))))
        return {"deleted": deleted.rowcount}

    return app
