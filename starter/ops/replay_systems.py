"""Where ``replay-check`` finds its evidence: the systems of record a worker writes to,
opened for reading (``starter.ops.replay_check``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Systems:
    """Where the evidence is: the retail backend (ledger, side channels), the dispatch log and
    the HTTP adapters of the external services (None: not configured)."""

    backend: Any
    log: Any = None
    payments: Any = None
    outbox: Any = None
    tickets: Any = None

    @classmethod
    def from_settings(cls, settings: Any) -> "Systems":
        """The systems a worker with ``settings`` writes to (``worker.build_tool_activities``),
        opened for reading only (nothing is created or seeded)."""
        from activities.channels_http import HttpOutbox, HttpTickets
        from activities.store.tables import make_engine
        from activities.payments_port import HttpPayments
        from activities.reconcile import DispatchLog
        from systems.retail.backend import RetailBackend, make_engine as retail_engine

        external = settings.payments_url or settings.email_url or settings.ticketing_url
        return cls(backend=RetailBackend(retail_engine(settings.resolved_database_url())),  # read only: no seeding
                   log=DispatchLog(make_engine(settings.resolved_journal_url())) if external else None,
                   payments=HttpPayments(settings.payments_url) if settings.payments_url else None,
                   outbox=HttpOutbox(settings.email_url) if settings.email_url else None,
                   tickets=HttpTickets(settings.ticketing_url) if settings.ticketing_url else None)

    def close(self) -> None:
        """Release the database connections."""
        self.backend.engine.dispose()
        if self.log is not None:
            self.log.engine.dispose()
