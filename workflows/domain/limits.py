"""What a conversation asks about its tenant's daily token budget (the spend cap across all the
tenant's conversations, ``Settings.tenant_daily_tokens``) before a turn's model calls: the
input and result of ``TenantActivitiesApi.tenant_allowance``. Pure models."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, Field


class AllowanceRequest(BaseModel):
    """Input of ``tenant_allowance``: the conversation and its ``Tenant`` search attribute
    (None: the default tenant, which the worker's settings name)."""

    conversation_id: str = Field(max_length=1000)
    tenant: Optional[str] = Field(default=None, max_length=64)


class TenantAllowance(BaseModel):
    """The tenant's daily token budget and what its conversations used of it today (UTC):
    ``daily_tokens`` None is no cap (``used_today`` is then not counted: 0)."""

    tenant: str = Field(max_length=64)
    daily_tokens: Optional[int] = Field(default=None, ge=1)
    used_today: int = Field(default=0, ge=0)

    def spent(self, more: int = 0) -> bool:
        """True when the cap is reached, counting ``more`` tokens used since it was asked."""
        return self.daily_tokens is not None and self.used_today + more >= self.daily_tokens
