"""Webhook subscriptions from the Python client, the HTTP API and the CLI: ``Webhooks``.

A subscription belongs to one tenant and receives the events of that tenant's processes whose
types it names (``workflows.domain.journal.EventType`` values, or ``*`` for every type). Its
URL is checked when it is made (``activities.webhooks.addresses``: http(s), at most 2 KB, no
credentials, a host that resolves to addresses webhooks may reach) and again before every
attempt. Its signing secret is returned once, by ``create``; lists never carry it.

Every method is tenant-scoped: another tenant's webhook is the same ``not_found`` as one that
does not exist. Refusals are ``ConversationError`` (``invalid`` 422, ``not_found`` 404,
``unavailable`` 503), worded for the caller.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional, TypeVar

from activities.store.webhooks import (ALL_EVENTS, MAX_DESCRIPTION, MAX_EVENT_TYPES, Delivery, DeliveryStatus,
                                       Webhook, WebhookStore)
from activities.webhooks.addresses import Allowance, Refused, resolve
from activities.webhooks.starts import DeliveryStarter
from starter.client.errors import ConversationError, unreachable
from workflows.domain.journal import EventType
from workflows.domain.user_text import control_problem

T = TypeVar("T")
EVENT_TYPES = tuple(t.value for t in EventType)
"""The event types a webhook may name (besides ``*``)."""


class CreatedWebhook(Webhook):
    """A webhook as ``create`` returns it: with its signing secret (``whsec_...``), shown this once."""

    secret: str


def check_events(events: list[str]) -> list[str]:
    """``events`` without repeats if each is an event type or ``*``. Raises ``ConversationError``
    ``invalid`` naming the unknown ones, or when there are none or too many."""
    if not events:
        raise ConversationError(f"name at least one event type (or {ALL_EVENTS!r} for all)", "invalid")
    if len(events) > MAX_EVENT_TYPES:
        raise ConversationError(f"at most {MAX_EVENT_TYPES} event types", "invalid")
    unknown = [e for e in events if e != ALL_EVENTS and e not in EVENT_TYPES]
    if unknown:
        shown = ", ".join(repr(e[:60]) for e in unknown[:5])
        raise ConversationError(f"unknown event type(s) {shown}; the types are {', '.join(EVENT_TYPES)}, "
                                f"or {ALL_EVENTS!r} for all", "invalid")
    return list(dict.fromkeys(events))


class Webhooks:
    """Webhooks over ``store`` (the journal's database), restarting deliveries with ``starter``,
    URLs checked against ``allow``; ``default_tenant`` when a call names none. Without ``starter``
    (commands that only read and write the database) ``retry`` is ``unavailable``."""

    def __init__(self, store: WebhookStore, starter: Optional[DeliveryStarter], allow: Allowance,
                 default_tenant: str = "default") -> None:
        self.store, self.starter, self.allow, self.default_tenant = store, starter, allow, default_tenant

    async def _db(self, call: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(call, *args)
        except ConversationError:
            raise
        except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
            raise ConversationError("the journal's database is not reachable; retry later", "unavailable") from err

    async def create(self, url: str, events: list[str], description: str = "",
                     tenant: Optional[str] = None) -> CreatedWebhook:
        """Subscribe ``url`` to ``events`` for ``tenant``; returns the webhook with its secret.
        Raises ``invalid`` for a refused URL (not http(s), over 2 KB, credentials, unresolvable,
        an address webhooks may not reach), an unknown event type, or a description over 500
        characters or with control characters; nothing is stored then."""
        events = check_events(events)
        if len(description) > MAX_DESCRIPTION:
            raise ConversationError(f"a description is at most {MAX_DESCRIPTION} characters", "invalid")
        problem = control_problem(description, "the description")
        if problem is not None:
            raise ConversationError(problem, "invalid")
        try:
            await resolve(url, self.allow)
        except Refused as err:
            raise ConversationError(str(err), "invalid") from None
        record, secret = await self._db(self.store.create, tenant or self.default_tenant, url, events, description)
        return CreatedWebhook(**record.model_dump(), secret=secret)

    async def list(self, tenant: Optional[str] = None) -> list[Webhook]:
        """The tenant's webhooks, oldest first (without secrets)."""
        return await self._db(self.store.list, tenant or self.default_tenant)

    async def get(self, webhook_id: str, tenant: Optional[str] = None) -> Webhook:
        """The tenant's webhook ``webhook_id``. Raises ``not_found``."""
        found = await self._db(self.store.get, tenant or self.default_tenant, webhook_id)
        if found is None:
            raise missing(webhook_id)
        return found

    async def delete(self, webhook_id: str, tenant: Optional[str] = None) -> None:
        """Delete the tenant's webhook and its deliveries (pending ones stop at their next
        attempt). Raises ``not_found``."""
        if not await self._db(self.store.delete, tenant or self.default_tenant, webhook_id):
            raise missing(webhook_id)

    async def deliveries(self, webhook_id: str, tenant: Optional[str] = None,
                         status: Optional[DeliveryStatus] = None, limit: int = 100) -> list[Delivery]:
        """The newest ``limit`` deliveries of the tenant's webhook (only ``status`` if given).
        Raises ``not_found`` for no such webhook."""
        await self.get(webhook_id, tenant)
        return await self._db(self.store.deliveries, tenant or self.default_tenant, webhook_id, status, limit)

    async def retry(self, webhook_id: str, delivery_id: str, tenant: Optional[str] = None) -> Delivery:
        """Send delivery ``delivery_id`` (its event's id) of the tenant's webhook again now, as a
        new run of its workflow with the same ``webhook-id`` (one waiting between attempts is
        replaced by it). Raises ``not_found`` or ``unavailable`` (Temporal did not answer: the
        delivery stays as it was, pending)."""
        tenant = tenant or self.default_tenant
        await self.get(webhook_id, tenant)
        before = await self._db(self.store.delivery, tenant, webhook_id, delivery_id)
        if before is None:
            raise ConversationError(f"webhook {webhook_id} has no delivery {delivery_id}", "not_found")
        if self.starter is None:
            raise ConversationError("retrying a delivery needs a connection to Temporal", "unavailable")
        delivery = await self._db(self.store.reopen, tenant, webhook_id, delivery_id)
        try:
            await self.starter.restart(webhook_id, delivery_id)
        except Exception as err:  # noqa: BLE001 (nothing restarted it: it stands as it was, and the caller retries)
            await self._db(self.store.set_status, webhook_id, delivery_id, before.status, before.finished_at)
            raise unreachable() from err
        return delivery or before


def missing(webhook_id: str) -> ConversationError:
    """The 404 of a webhook that does not exist (or is another tenant's)."""
    return ConversationError(f"webhook {webhook_id} does not exist", "not_found")
