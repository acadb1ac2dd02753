"""The worker's sandbox (``starter.runtime.sandbox_runner``: source strings compiled once) still runs
workflows to completion and still refuses non-deterministic calls, like the SDK's own."""

from __future__ import annotations

import asyncio
import datetime
import uuid

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker


@workflow.defn(sandboxed=True)
class SandboxProbeWorkflow:
    """Returns its input doubled; ``-1`` reads the wall clock (refused in the sandbox)."""

    @workflow.run
    async def run(self, n: int) -> int:
        if n < 0:
            return datetime.datetime.now().second
        await asyncio.sleep(0.01)  # a second activation (a timer) in the same sandboxed instance
        return 2 * n


async def test_compiled_sandbox_runs_a_workflow_and_refuses_the_wall_clock(temporal_env):
    # imported here: the sandbox re-imports this module, and the worker's settings touch files
    from starter.runtime.sandbox_runner import CompiledSandboxedWorkflowRunner
    from starter.runtime.worker import workflow_runner

    client = temporal_env.client
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    runner = workflow_runner(sandbox_project_modules=False)
    assert isinstance(runner, CompiledSandboxedWorkflowRunner)
    async with Worker(client, task_queue=queue, workflows=[SandboxProbeWorkflow], workflow_runner=runner):
        assert await client.execute_workflow(SandboxProbeWorkflow.run, 21, id=f"ok-{queue}", task_queue=queue) == 42
        handle = await client.start_workflow(SandboxProbeWorkflow.run, -1, id=f"clock-{queue}", task_queue=queue)
        failed = None
        for _ in range(100):
            events = (await handle.fetch_history()).events
            failed = next((e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED), None)
            if failed:
                break
            await asyncio.sleep(0.1)
        await handle.terminate("probe done")
    assert failed is not None, "the sandbox let the workflow read the wall clock"
    assert "RestrictedWorkflowAccessError" in failed.workflow_task_failed_event_attributes.failure.message + \
        failed.workflow_task_failed_event_attributes.failure.application_failure_info.type


def test_a_source_string_is_compiled_once():
    from starter.runtime.sandbox_runner import compiled

    source = "x = 1\n"
    assert compiled(source) is compiled(source)
    scope: dict = {}
    exec(compiled(source), scope)
    assert scope["x"] == 1
