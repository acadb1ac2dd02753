"""Every table statekeeper owns in the journal's database, in one ``MetaData``: what the Alembic
revisions of ``activities.store.migrate`` must produce (``alembic`` and the schema tests compare
a migrated database against it). Each table is defined beside the store that uses it."""

from __future__ import annotations

import sqlalchemy as sa

from activities.store.api_keys import api_keys
from activities.store.audit import audit_log
from activities.store.dispatch import dispatches
from activities.store.limits import api_key_rates, tenant_conversations
from activities.store.memory import memory_facts, memory_writes
from activities.store.tables import TABLES, refund_events
from activities.store.webhooks import webhook_deliveries, webhooks


def owned_metadata() -> sa.MetaData:
    """A fresh ``MetaData`` holding every table statekeeper owns in the journal's database."""
    combined = sa.MetaData()
    for table in (*TABLES, refund_events, audit_log, api_keys, dispatches, api_key_rates, tenant_conversations,
                  webhooks, webhook_deliveries, memory_facts, memory_writes):
        table.to_metadata(combined)
    return combined
