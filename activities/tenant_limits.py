"""The tenant's daily token budget as a workflow asks it before a turn's model calls
(``workflows.conversation.budget.TenantCap``): the cap from the worker's settings
(``Settings.limits_of``) and the tokens the tenant's conversations used today (UTC), counted
from the journal's model calls (``activities.store.limits.TenantLedger``). Run as a local
activity: one small read of our own database."""

from __future__ import annotations

import asyncio
from typing import Callable, Optional

from temporalio import activity

from activities.store.limits import TenantLedger
from workflows.activity_api import TenantActivitiesApi
from workflows.domain.contracts import AllowanceRequest, TenantAllowance


class TenantActivities(TenantActivitiesApi):
    """``TenantActivities(ledger, daily_tokens_of, default_tenant)``: ``daily_tokens_of(tenant)``
    is the tenant's cap in tokens a day (None: none); register ``instance.all()``."""

    def __init__(self, ledger: TenantLedger, daily_tokens_of: Callable[[str], Optional[int]],
                 default_tenant: str) -> None:
        self.ledger, self.daily_tokens_of, self.default_tenant = ledger, daily_tokens_of, default_tenant

    @activity.defn
    async def tenant_allowance(self, req: AllowanceRequest) -> TenantAllowance:
        """Records ``req.conversation_id`` as the tenant's (its model calls then count for it) and
        returns the cap with today's use (0 without a cap: nothing to compare). Database
        failures raise (retried, then the turn goes on uncapped)."""
        tenant = req.tenant or self.default_tenant
        await asyncio.to_thread(self.ledger.ready)
        await asyncio.to_thread(self.ledger.known, tenant, req.conversation_id)
        cap = self.daily_tokens_of(tenant)
        used = 0 if cap is None else await asyncio.to_thread(self.ledger.tokens_today, tenant)
        return TenantAllowance(tenant=tenant, daily_tokens=cap, used_today=used)

    def all(self) -> list:
        """The activity functions to register with a worker."""
        return [self.tenant_allowance]
