"""HTTP routes of the webhooks (mounted by ``starter.api.application``; ``starter.client.webhooks``)::

    POST   /webhooks                {url, events, description?}  -> 201 {webhook_id, secret, url, events, ...}
    GET    /webhooks                                              -> 200 {items: [webhook]}  (no secrets)
    DELETE /webhooks/{webhook_id}                                 -> 204
    GET    /webhooks/{webhook_id}/deliveries?status=&limit=       -> 200 {items: [delivery]}
    POST   /webhooks/{webhook_id}/deliveries/{delivery_id}/retry  -> 202 delivery

An operator's key manages its tenant's webhooks (``Permission.MANAGE_WEBHOOKS``); another
tenant's webhook is the same 404 as one that does not exist. Creating, deleting and retrying
are audited. docs/webhooks.md says how a receiver verifies what it gets.
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import BaseModel, Field

from activities.store.webhooks import ALL_EVENTS, MAX_DESCRIPTION, MAX_EVENT_TYPES, Delivery, DeliveryStatus, Webhook
from starter.api.auth import Permission
from starter.api.guard import Guard, guard_dep
from starter.api.journal import journal_dep
from starter.api.models import PathId, client_dep
from starter.api.responses import responses_for
from starter.client.conversations import StatekeeperClient
from starter.client.webhooks.service import EVENT_TYPES, CreatedWebhook, Webhooks

router = APIRouter()

WebhookId = PathId("webhook id", max_length=40)
DeliveryId = PathId("delivery id (the event's id)", max_length=40)
URL_FIELD_LIMIT = 4096
"""The body field's own bound: longer URLs are refused by the field; from 2049 characters to this
by the webhook's rule (``activities.webhooks.addresses.check_shape``), which says why."""


class WebhookIn(BaseModel):
    """A subscription: ``url`` (http or https, at most 2048 characters, resolving to addresses
    webhooks may reach), ``events`` (event types, or ``"*"`` for all), ``description`` (optional)."""

    url: str = Field(min_length=1, max_length=URL_FIELD_LIMIT, json_schema_extra={"pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"})
    events: list[Annotated[str, Field(min_length=1, max_length=60,
                                      json_schema_extra={"enum": [*EVENT_TYPES, ALL_EVENTS]})]] = Field(
        min_length=1, max_length=MAX_EVENT_TYPES)
    description: str = Field(default="", max_length=MAX_DESCRIPTION)


class WebhookList(BaseModel):
    """The tenant's webhooks, oldest first (their secrets are never listed)."""

    items: list[Webhook]


class DeliveryList(BaseModel):
    """A webhook's deliveries, newest first."""

    items: list[Delivery]


async def webhooks_dep(request: Request, client: StatekeeperClient = Depends(client_dep)) -> Webhooks:
    """The app's ``Webhooks``: its client's (``StatekeeperClient.webhooks``); for a client made
    without them, on the app's journal and the client's task queue, with the environment's
    settings (``Settings()``) for the rest."""
    if client.webhooks_source is None:
        journal = await journal_dep(request)
        url = journal.engine.url.render_as_string(hide_password=False)

        def made() -> Webhooks:
            from settings import Settings
            from starter.dev import state as devstate
            from starter.ops.bootstrap import webhooks_for

            settings = devstate.adopt(Settings()).model_copy(update={"journal_url": url,
                                                                     "task_queue": client.task_queue})
            return webhooks_for(client._client, settings)  # noqa: SLF001 (the client's own connection)
        client.webhooks_source = made
    return client.webhooks


@router.post("/webhooks", status_code=status.HTTP_201_CREATED, response_model=CreatedWebhook,
             responses=responses_for("POST", "/webhooks"))
async def create_webhook(body: WebhookIn, guard: Guard = Depends(guard_dep),
                         hooks: Webhooks = Depends(webhooks_dep)) -> CreatedWebhook:
    """Subscribe a URL to event types of the caller's tenant; the answer carries the signing
    secret (`whsec_...`), shown this once. A URL that is not http(s), longer than 2048
    characters, carries a user or password, does not resolve, or resolves to a loopback,
    link-local, private, reserved, multicast or unspecified address (unless the deployment
    allows loopback or private receivers) is a 422, and nothing is stored."""
    guard.require(Permission.MANAGE_WEBHOOKS)
    created = await hooks.create(body.url, body.events, body.description, tenant=guard.principal.tenant)
    await guard.audit("create_webhook", created.webhook_id, f"events={len(created.events)}")
    return created


@router.get("/webhooks", response_model=WebhookList, responses=responses_for("GET", "/webhooks"))
async def list_webhooks(guard: Guard = Depends(guard_dep), hooks: Webhooks = Depends(webhooks_dep)) -> WebhookList:
    """The caller's tenant's webhooks (without secrets)."""
    guard.require(Permission.MANAGE_WEBHOOKS)
    return WebhookList(items=await hooks.list(tenant=guard.principal.tenant))


@router.delete("/webhooks/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response,
               responses=responses_for("DELETE", "/webhooks/{webhook_id}"))
async def delete_webhook(webhook_id: WebhookId, guard: Guard = Depends(guard_dep),
                         hooks: Webhooks = Depends(webhooks_dep)) -> Response:
    """Delete a webhook and its deliveries: nothing more is sent to it (a delivery waiting
    between attempts stops at its next one)."""
    guard.require(Permission.MANAGE_WEBHOOKS)
    await hooks.delete(webhook_id, tenant=guard.principal.tenant)
    await guard.audit("delete_webhook", webhook_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/webhooks/{webhook_id}/deliveries", response_model=DeliveryList,
            responses=responses_for("GET", "/webhooks/{webhook_id}/deliveries"))
async def list_deliveries(webhook_id: WebhookId, status_filter: Optional[DeliveryStatus] = Query(
                              None, alias="status", description="Only deliveries in this status."),
                          limit: int = Query(100, ge=1, le=1000, description="At most this many, newest first."),
                          guard: Guard = Depends(guard_dep), hooks: Webhooks = Depends(webhooks_dep)) -> DeliveryList:
    """A webhook's deliveries, newest first: each event's id (`delivery_id`, also the
    `webhook-id` header), type, conversation and sequence, `status` (pending, delivered,
    failed), `attempts`, the receiver's `last_status_code` and `last_error`, and its times."""
    guard.require(Permission.MANAGE_WEBHOOKS)
    return DeliveryList(items=await hooks.deliveries(webhook_id, tenant=guard.principal.tenant, status=status_filter,
                                                     limit=limit))


@router.post("/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", status_code=status.HTTP_202_ACCEPTED,
             response_model=Delivery, responses=responses_for("POST", "/webhooks/{webhook_id}/deliveries/{delivery_id}/retry"))
async def retry_delivery(webhook_id: WebhookId, delivery_id: DeliveryId, guard: Guard = Depends(guard_dep),
                         hooks: Webhooks = Depends(webhooks_dep)) -> Delivery:
    """Send a delivery again now (a failed one, or one waiting between attempts), with the
    same `webhook-id`, on a fresh retry schedule; accepted, not yet done: read its status in
    the deliveries."""
    guard.require(Permission.MANAGE_WEBHOOKS)
    delivery = await hooks.retry(webhook_id, delivery_id, tenant=guard.principal.tenant)
    await guard.audit("retry_webhook_delivery", webhook_id, f"delivery={delivery_id}")
    return delivery
