"""Limits of the HTTP API per key and per tenant, and the tenant's usage route.

- **Request rate per key** (``ApiLimits.admit``, from the ``Authenticate`` middleware): each key
  may send its own ``requests_per_minute`` or the settings' ``api_requests_per_minute``; past it
  the answer is 429 with ``Retry-After`` (whole seconds, rounded up) and the request is not
  served. The count is shared by every API process on the same journal database
  (``activities.store.limits.KeyRates``). The keyless loopback API is one local operator and is
  not limited.
- **Open conversations per tenant** (``ApiLimits.open_conversation``, from
  ``POST /conversations``): a new conversation id takes one of the tenant's places
  (``TenantLedger.reserve``, atomic across processes); at the limit, the places of
  conversations Temporal no longer lists as running are given back first, and if none is, the
  answer is 429 saying so. A repeat of a start already counted is never refused.
- ``GET /usage``: the caller's tenant's open conversations, tokens used today (UTC) and limits,
  and the calling key's request rate limit.

The tenant's daily token budget is enforced by the conversation itself before each model call
(``workflows.conversation.budget.TenantCap``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from activities.store.limits import KeyRates, TenantLedger, day_start
from starter.api.auth import LOCAL_ACTOR, Principal
from starter.api.guard import Guard, guard_dep
from starter.api.models import client_dep
from starter.api.responses import responses_for
from starter.client.conversations import StatekeeperClient
from starter.client.errors import ConversationError

log = logging.getLogger("statekeeper.api")

MAX_LISTED = 10_000
"""At most this many running conversations are listed to give places back (far above any limit)."""


class RateLimited(ConversationError):
    """429: the key sent more requests than its rate limit; ``retry_after`` seconds (whole, ≥ 1)."""

    def __init__(self, reason: str, retry_after: int) -> None:
        super().__init__(reason, "rate_limited")
        self.retry_after = retry_after


class TenantUsage(BaseModel):
    """``GET /usage``: the caller's tenant's use and limits. ``day`` is the UTC day the tokens
    count for; a limit None is no limit; ``requests_per_minute`` is the calling key's (None:
    the keyless loopback API, not limited)."""

    tenant: str
    day: str
    open_conversations: int
    open_conversations_limit: Optional[int]
    tokens_today: int
    daily_tokens_limit: Optional[int]
    requests_per_minute: Optional[int]


class ApiLimits:
    """``ApiLimits(engine, requests_per_minute, limits_of)``: the API's limits over statekeeper's
    database ``engine``; ``requests_per_minute`` is the default of keys without their own,
    ``limits_of(tenant)`` a ``settings.TenantLimits``."""

    def __init__(self, engine: Any, requests_per_minute: int, limits_of: Callable[[str], Any]) -> None:
        self.rates, self.ledger = KeyRates(engine), TenantLedger(engine)
        self.requests_per_minute, self.limits_of = requests_per_minute, limits_of

    @classmethod
    def from_settings(cls, settings: Any, engine: Any) -> "ApiLimits":
        """The limits ``settings`` describe, over ``engine``."""
        return cls(engine, settings.api_requests_per_minute, settings.limits_of)

    def rate_of(self, principal: Principal) -> Optional[int]:
        """The caller's request rate limit a minute (None: not limited)."""
        if principal.actor == LOCAL_ACTOR:
            return None
        return principal.requests_per_minute or self.requests_per_minute

    async def admit(self, principal: Principal) -> None:
        """Count one request of ``principal``; raises ``RateLimited`` (429) past its limit."""
        per_minute = self.rate_of(principal)
        if per_minute is None:
            return
        wait = await asyncio.to_thread(self.rates.admit, principal.actor.removeprefix("key:"), per_minute)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise RateLimited(f"too many requests: this API key may send {per_minute} a minute; "
                              f"retry in {seconds} s", seconds)

    async def open_conversation(self, guard: Guard, client: StatekeeperClient,
                                conversation_id: Optional[str]) -> tuple[Optional[str], bool]:
        """Take one of the tenant's open-conversation places for ``conversation_id`` (None: a new
        id is chosen here). Returns the id to start and whether a place was newly taken (give it
        back with ``release`` if the start fails); ``(conversation_id, False)`` when the tenant
        has no limit. Raises ``ConversationError`` ``rate_limited`` (429) at the limit."""
        tenant = guard.principal.tenant
        limit = self.limits_of(tenant).open_conversations
        if limit is None:
            return conversation_id, False
        conversation_id = conversation_id or uuid.uuid4().hex
        taken = await asyncio.to_thread(self.ledger.take, tenant, conversation_id, limit)
        if taken is None and await self.give_back(guard, client):
            taken = await asyncio.to_thread(self.ledger.take, tenant, conversation_id, limit)
        if taken is not None:
            return conversation_id, taken
        raise ConversationError(f"this tenant is at its limit of {limit} open conversations: end or cancel one, "
                                "or wait for one to finish, before starting another", "rate_limited")

    async def release(self, conversation_id: str) -> None:
        """Give back the place of a conversation whose start failed (nothing runs for it)."""
        try:
            await asyncio.to_thread(self.ledger.release, conversation_id)
        except Exception as err:  # noqa: BLE001 (the place comes back at the next give-back)
            log.warning("open-conversation place not given back (%s)", type(err).__name__)

    async def give_back(self, guard: Guard, client: StatekeeperClient) -> int:
        """Give back the places of the tenant's conversations that Temporal no longer lists as
        running; returns how many."""
        query = " AND ".join(['WorkflowType = "SupportWorkflow"', 'ExecutionStatus = "Running"', *guard.scope()])
        running: list[str] = []
        try:
            async for execution in client._client.list_workflows(query, limit=MAX_LISTED):  # noqa: SLF001
                running.append(execution.id.removeprefix("support-"))
        except Exception as err:  # noqa: BLE001 (unknown: nothing is given back on a guess)
            log.warning("running conversations not listed (%s)", type(err).__name__)
            return 0
        return await asyncio.to_thread(self.ledger.close_finished, guard.principal.tenant, running)

    async def usage(self, guard: Guard, client: StatekeeperClient) -> TenantUsage:
        """The caller's tenant's ``TenantUsage``."""
        tenant = guard.principal.tenant
        limits = self.limits_of(tenant)
        await self.give_back(guard, client)
        now = datetime.now(timezone.utc)
        opened = await asyncio.to_thread(self.ledger.open_ids, tenant)
        tokens = await asyncio.to_thread(self.ledger.tokens_today, tenant, now)
        return TenantUsage(tenant=tenant, day=day_start(now).date().isoformat(), open_conversations=len(opened),
                           open_conversations_limit=limits.open_conversations, tokens_today=tokens,
                           daily_tokens_limit=limits.daily_tokens, requests_per_minute=self.rate_of(guard.principal))


router = APIRouter()


async def _limits(request: Request) -> ApiLimits:
    access = await request.app.state.ensure_access()
    if access.limits is None:  # an app built without limits (tests' own Access): the settings' defaults
        from settings import Settings
        from activities.store.tables import make_engine

        access.limits = ApiLimits.from_settings(Settings(), make_engine(access.audit.engine.url.render_as_string(
            hide_password=False)))
    return access.limits


@router.get("/usage", response_model=TenantUsage, responses=responses_for("GET", "/usage"))
async def usage(request: Request, guard: Guard = Depends(guard_dep),
                client: StatekeeperClient = Depends(client_dep)) -> TenantUsage:
    """The caller's tenant's open conversations, tokens used today (UTC) and limits, and the
    calling key's request rate limit. Any key of the tenant may read it."""
    return await (await _limits(request)).usage(guard, client)
