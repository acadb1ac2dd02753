"""Starting a conversation again under the id of a finished one is refused as ``finished``
and logs nothing: the SDK's update-with-start leaves its start operation's future holding
``WorkflowAlreadyStartedError``, which, left unread, asyncio logs at ERROR, with three chained
tracebacks, as "Future exception was never retrieved" on every such request to the API (in the
log of ``statekeeper dev``)."""

from __future__ import annotations

import gc
import logging
import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.workflow_harness import running_worker


async def test_starting_a_finished_conversation_again_is_refused_without_an_error_log(temporal_env, settings,
                                                                                      caplog):
    async with running_worker(temporal_env, settings) as (client, _backend):
        cid = f"again-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        await client.cancel(cid, "done here")
        await client.outcome(cid)
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for _ in range(2):
                with pytest.raises(ConversationError) as refused:
                    await client.start_conversation(cid)
                assert refused.value.kind == "finished"
            gc.collect()  # asyncio reports an unread exception when its future is collected
        assert "never retrieved" not in caplog.text, caplog.text
