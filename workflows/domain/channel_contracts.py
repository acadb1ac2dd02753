"""Input models of the side-channel activities: the customer-email outbox and human
hand-off tickets, each written at most once per caller-chosen key, and the ticket look-up.

Pure pydantic, imported by workflows (inside the sandbox) and by activities; re-exported by
``workflows.domain.contracts``.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel


class EmailRequest(BaseModel):
    """Input of ``send_customer_email``: one outbox message, exactly once per ``message_key``."""

    store: str
    message_key: str
    to_email: str
    subject: str
    body: str


class TicketLookup(BaseModel):
    """Input of ``find_ticket``: is a hand-off ticket open under ``ticket_key`` in ``store``?"""

    store: str
    ticket_key: str


class TicketRequest(TicketLookup):
    """Input of ``open_ticket``: a hand-off to a human agent, exactly once per ``ticket_key``."""

    user_id: Optional[str] = None
    summary: str
