"""HTTP adapters of the email and ticketing services behind ``OutboxPort`` and ``TicketPort``.

Neither service takes an idempotency key; each finds what it sent by business reference.
The effect's key (``workflows.domain.keys``: ``email:{write key}``, ``transfer:…``, ``escalate:…``)
is that reference, and the unknown-outcome protocol (``activities.reconcile``) asks by it
before sending again, so a retried or replayed send goes out once.
"""

from __future__ import annotations

from typing import Any, Optional

from activities.http_service import ServiceClient
from activities.reconcile import DispatchLog, reconciled
from workflows.domain.keys import key_ref


class _ByReference:
    def __init__(self, base_url: str, name: str, path: str, timeout_seconds: float,
                 log: Optional[DispatchLog]) -> None:
        self.client = ServiceClient(base_url, name, timeout_seconds)
        self.name, self.path, self.log = name, path, log

    def sent(self, reference: str) -> list[dict[str, Any]]:
        """What the service holds for ``reference``, oldest first."""
        found = self.client.get(self.path, params={"reference": reference})
        return [] if found is None else found.json()

    def erase(self, conversations: set[str], *, user_id: Optional[str] = None,
              emails: frozenset[str] = frozenset()) -> int:
        """Delete what this service holds for ``conversations`` (references whose key names one
        of them), the customer ``user_id`` (tickets; references naming them) and ``emails``
        (messages to them). Returns how many records were deleted."""
        listed = self.client.get(f"{self.path}/references")
        references = [r for r in (listed.json() if listed is not None else [])
                      if (ref := key_ref(r)).conversation in conversations or (user_id and ref.subject == user_id)]
        body: dict[str, Any] = {"references": references}
        if self.name == "email":
            body["to_emails"] = sorted(emails)
        elif user_id:
            body["user_ids"] = [user_id]
        return int(self.client.send("POST", f"{self.path}/erase", json=body).json()["deleted"])

    def _once(self, reference: str, body: dict[str, Any]) -> bool:
        def lookup() -> Optional[dict[str, Any]]:
            found = self.sent(reference)
            return {"count": len(found)} if found else None

        def dispatch() -> dict[str, Any]:
            self.client.send("POST", self.path, json=body)
            return {"count": 1}  # what the dispatch log keeps: no addresses, no text

        _result, replayed = reconciled(self.name, f"{self.name}:{reference}", lookup, dispatch, self.log,
                                       always_ask=True)
        return not replayed


class HttpOutbox(_ByReference):
    """``OutboxPort`` over the email service: ``HttpOutbox(base_url, timeout_seconds, log)``."""

    def __init__(self, base_url: str, timeout_seconds: float = 10.0, log: Optional[DispatchLog] = None) -> None:
        super().__init__(base_url, "email", "/messages", timeout_seconds, log)

    def enqueue_email(self, store: str, message_key: str, to_email: str, subject: str, body: str) -> bool:
        """Send once per ``message_key`` (the reference); True if sent now, False if it had been.
        ``store`` is not the email system's concern: the key already names the operation."""
        return self._once(message_key, {"reference": message_key, "to_email": to_email, "subject": subject,
                                        "body": body})


class HttpTickets(_ByReference):
    """``TicketPort`` over the ticketing service: ``HttpTickets(base_url, timeout_seconds, log)``."""

    def __init__(self, base_url: str, timeout_seconds: float = 10.0, log: Optional[DispatchLog] = None) -> None:
        super().__init__(base_url, "ticketing", "/tickets", timeout_seconds, log)

    def open_ticket(self, store: str, ticket_key: str, user_id: Optional[str], summary: str) -> bool:
        """Open once per ``ticket_key`` (the reference); True if opened now, False if it had been."""
        return self._once(ticket_key, {"reference": ticket_key, "user_id": user_id, "summary": summary})

    def ticket_opened(self, store: str, ticket_key: str) -> bool:
        """True if the ticketing service holds a ticket whose reference is ``ticket_key``."""
        return bool(self.sent(ticket_key))
