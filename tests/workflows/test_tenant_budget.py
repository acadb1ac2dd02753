"""The tenant's daily token budget inside the conversation (``workflows.conversation.budget.TenantCap``),
on a real dev server and worker with a fresh journal database: the allowance activity makes its
tables on first use, a tenant at its cap is answered without a model call (also on a CLI-started
run, the default tenant's), and when the allowance cannot be read the turn goes on uncapped
instead of failing the conversation. The same over HTTP: tests/e2e/test_api_limits.py."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from activities.store.limits import TenantLedger
from settings import Settings, TenantLimits
from starter.ops.bootstrap import client_for
from starter.runtime.worker import build_backend, build_worker
from workflows.conversation.budget import TENANT_BUDGET_REPLY


def _settings(tmp_path, **more) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'sor.sqlite'}", data_dir=tmp_path, anthropic_api_key=None,
                    task_queue=f"budget-{uuid.uuid4().hex[:8]}", sandbox_project_modules=True, **more)


async def test_the_default_tenant_at_its_cap_gets_the_reply_without_a_model_call(temporal_env, tmp_path):
    settings = _settings(tmp_path, tenant_limits={"default": TenantLimits(daily_tokens=1)})
    client = client_for(temporal_env.client, settings)
    async with build_worker(temporal_env.client, settings, build_backend(settings)):
        cid = await client.start_conversation(f"b-{uuid.uuid4().hex[:8]}")  # no Tenant: the default tenant
        first = await client.send_message(cid, "hello", message_id="m-1")
        assert first.text != TENANT_BUDGET_REPLY
        calls = (await client.state(cid)).usage.model_calls
        second = await client.send_message(cid, "what can you do?", message_id="m-2")
        assert second.text == TENANT_BUDGET_REPLY
        assert (await client.state(cid)).usage.model_calls == calls


async def test_an_unreadable_allowance_leaves_the_turn_uncapped(temporal_env, tmp_path, monkeypatch):
    def down(self, *args):
        raise sa.exc.OperationalError("INSERT", {}, Exception("the database is down"))
    monkeypatch.setattr(TenantLedger, "known", down)
    settings = _settings(tmp_path, tenant_limits={"default": TenantLimits(daily_tokens=1)})
    client = client_for(temporal_env.client, settings)
    async with build_worker(temporal_env.client, settings, build_backend(settings)):
        cid = await client.start_conversation(f"b-{uuid.uuid4().hex[:8]}")
        for i in range(2):
            reply = await client.send_message(cid, "hello", message_id=f"m-{i}")
            assert reply.text and reply.text != TENANT_BUDGET_REPLY
        state = await client.state(cid)
        assert state.status.value == "active" and state.usage.model_calls >= 2
