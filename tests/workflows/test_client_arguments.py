"""The Python client refuses an argument its models do not take with ``ConversationError``
``invalid`` (docs/api.md: refusals raise ``ConversationError``), before anything is sent: a
store that is empty or over 64 characters and a cancel reason over 1000 never raise pydantic's
``ValidationError`` (whose text quotes the value) out of ``start_conversation`` and ``cancel``.
Real Temporal dev server, real worker.
"""

from __future__ import annotations

import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.workflow_harness import running_worker
from workflows.conversation.workflow import support_workflow_id


async def test_a_bad_store_or_cancel_reason_is_an_invalid_refusal(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        for store in ("", "s" * 65):
            cid = f"args-{uuid.uuid4().hex[:8]}"
            with pytest.raises(ConversationError) as refused:
                await client.start_conversation(cid, store=store)
            assert refused.value.kind == "invalid" and str(refused.value) == "the store is an id of 1 to 64 characters"
            count = await temporal_env.client.count_workflows(f'WorkflowId = "{support_workflow_id(cid)}"')
            assert count.count == 0  # nothing started

        cid = await client.start_conversation(f"args-{uuid.uuid4().hex[:8]}")
        with pytest.raises(ConversationError) as refused:
            await client.cancel(cid, "r" * 1001)
        assert refused.value.kind == "invalid" and "r" * 20 not in str(refused.value)
        assert (await client.state(cid)).status.value == "active"  # not cancelled
        await client.cancel(cid, "r" * 1000)  # at the bound: taken
