"""Operator commands given a conversation id that itself starts with ``support-`` (the API's
ids allow it): they act on that conversation, not on the one whose workflow id it also
spells. (Adversarial review: ``statekeeper state support-x``, ``replay-check``, ``resume``
and ``resolve`` stripped the prefix and read, reset or resolved conversation ``x``.)"""

from __future__ import annotations

import uuid

from starter.client.conversation_ids import conversation_named
from starter.ops.replay_check import Systems, check
from tests.workflow_harness import running_worker


async def test_a_conversation_named_support_something_is_the_one_operators_reach(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        plain = f"px-{uuid.uuid4().hex[:6]}"
        named = f"support-{plain}"
        await client.start_conversation(plain)
        await client.start_conversation(named)
        # both exist: the id as given is a conversation's id, so it is that conversation
        assert await conversation_named(temporal_env.client, named) == named
        assert await conversation_named(temporal_env.client, plain) == plain
        # the workflow id of a conversation whose id has no such twin still reaches it
        assert await conversation_named(temporal_env.client, f"support-{named}") == named
        alone = f"py-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(alone)
        assert await conversation_named(temporal_env.client, f"support-{alone}") == alone
        assert await conversation_named(temporal_env.client, "support-nothing-here") == "nothing-here"
        systems = Systems(backend=backend)
        try:
            report = await check(temporal_env.client, named, systems)
        finally:
            systems.close()
        assert (report.conversation_id, report.workflow_id) == (named, f"support-{named}")
