"""Tenants as Temporal fairness keys, on a real dev server with statekeeper's dynamic config
(fairness on) and a real worker: a conversation and a refund a tenant starts carry the tenant as
their fairness key, a run without a tenant (CLI) the default key, and a worker with
``tenant_activities_per_second`` caps each tenant's activity dispatch on its task queue. The
latency a burst costs another tenant is bench/tenant_fairness.py's."""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from settings import Settings
from starter.client.tenancy import start_attributes
from starter.ops.bootstrap import client_for
from starter.runtime.worker import build_backend, build_worker, preflight


def _settings(tmp_path, **more) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'sor.sqlite'}", data_dir=tmp_path, anthropic_api_key=None,
                    task_queue=f"fair-{uuid.uuid4().hex[:8]}", **more)


async def _fairness_key(temporal, workflow_id: str) -> str:
    described = await temporal.get_workflow_handle(workflow_id).describe()
    return described.raw_description.workflow_execution_info.priority.fairness_key


async def test_a_tenants_conversation_carries_the_tenant_as_its_fairness_key(temporal_env, tmp_path):
    settings = _settings(tmp_path, store_tenants={"acme-store": "acme"})
    backend = build_backend(settings)
    backend.seed_store("acme-store")
    client = client_for(temporal_env.client, settings)
    async with build_worker(temporal_env.client, settings, backend):
        tenant_cid = await client.start_conversation(f"fair-{uuid.uuid4().hex[:8]}", store="acme-store",
                                                     search_attributes=start_attributes("acme", None))
        reply = await client.send_message(tenant_cid, "hello", message_id="m-1")
        assert reply.text
        cli_cid = await client.start_conversation(f"fair-{uuid.uuid4().hex[:8]}")
    assert await _fairness_key(temporal_env.client, f"support-{tenant_cid}") == "acme"
    assert await _fairness_key(temporal_env.client, f"support-{cli_cid}") == ""  # the default key


async def test_a_worker_caps_each_tenants_activity_dispatch_on_its_task_queue(temporal_env, tmp_path):
    settings = _settings(tmp_path, tenant_activities_per_second=3.5)
    await preflight(temporal_env.client, settings)
    described = await temporal_env.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=temporal_env.client.namespace, task_queue=TaskQueue(name=settings.task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, report_config=True))
    assert described.config.fairness_keys_rate_limit_default.rate_limit.requests_per_second == 3.5
