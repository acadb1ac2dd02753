"""Answers to a shown write with hostile or unclear text, on a real Temporal dev server with a
real worker and the retail system of record (the model is a test brain):

- every "yes" with invisible characters (zero-width space, BOM, word joiner, soft hyphen, tag
  characters, a variation selector, no-break spaces, full-width letters) confirms, as the yes a
  person reads, and no invisible character reaches the state or the model's view;
- an answer that looks like a yes without being one (Cyrillic look-alikes, "ok", "yes?",
  "yess") is asked again: the write stays shown and runs only after a plain yes;
- a message of nothing but invisible characters is refused with a clear reason and changes
  nothing.

The pure rule is tests/core/test_confirmation_words.py.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, order_details, running_worker
from workflows.domain import replies
from workflows.domain.user_text import INVISIBLE, visible_text

HIDDEN = re.compile(f"[{INVISIBLE}\u00a0]")


def _brain() -> ListBrain:
    return ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                      call("get_order_details", order_id=PENDING),
                      call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])


async def _shown(client, prefix: str) -> tuple[str, str]:
    """A conversation with the cancel of PENDING shown for confirmation: (its id, the detail)."""
    cid = await client.start_conversation(f"{prefix}-{uuid.uuid4().hex[:6]}")
    shown = await client.send_message(cid, f"my email is {EMAIL}; cancel {PENDING}, I no longer need it")
    assert shown.awaiting_confirmation, shown.text
    return cid, shown.awaiting_confirmation


INVISIBLE_YES = ["yes\u200b", "\ufeffyes", "yes\u2060", "ye\u200bs", "y\u200des", "ye\u00ads",
                 "\u00a0yes\u00a0", "yes\U000e0020\U000e0069", "y\ufe0fes", "ｙｅｓ"]


@pytest.mark.parametrize("answer", INVISIBLE_YES, ids=lambda a: a.encode("unicode_escape").decode())
async def test_a_yes_with_invisible_characters_confirms_and_none_reaches_the_state(temporal_env, settings, answer):
    brain = _brain()
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid, _ = await _shown(client, "invisible-yes")
        done = await client.send_message(cid, answer)
        assert done.awaiting_confirmation is None and order_details(backend, PENDING)["status"] == "cancelled"
        state = await client.state(cid)
        assert state.completed_operations[-1].ok
        assert state.recent_turns[-2].text == visible_text(answer)  # the user's turn, then the reply
        assert not HIDDEN.search(state.model_dump_json()) and not HIDDEN.search(json.dumps(brain.views))


UNCLEAR = ["y\u0435s", "\u0443\u0435\u0455", "ok", "yes?", "yess"]


@pytest.mark.parametrize("answer", UNCLEAR, ids=lambda a: a.encode("unicode_escape").decode())
async def test_an_unclear_answer_is_asked_again_and_only_a_plain_yes_runs_the_write(temporal_env, settings, answer):
    brain = _brain()
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid, detail = await _shown(client, "unclear")
        calls = len(brain.views)
        again = await client.send_message(cid, answer)
        assert again.text == replies.answer_yes_or_no(detail) and again.awaiting_confirmation == detail
        assert order_details(backend, PENDING)["status"] == "pending" and len(brain.views) == calls  # no model call
        state = await client.state(cid)
        assert state.phase.value == "awaiting_confirmation" and state.completed_operations == []
        done = await client.send_message(cid, "yes")
        assert done.awaiting_confirmation is None and order_details(backend, PENDING)["status"] == "cancelled"


@pytest.mark.parametrize("text", ["\u200b", "\ufeff\u2060", "\U000e0041\U000e0042", "\u00ad \u200d"],
                         ids=["zwsp", "bom-wj", "tags", "shy-zwj"])
async def test_a_message_of_only_invisible_characters_is_refused_and_changes_nothing(temporal_env, settings, text):
    async with running_worker(temporal_env, settings, brain=_brain()) as (client, backend):
        cid, detail = await _shown(client, "invisible-only")
        before = await client.state(cid)
        with pytest.raises(ConversationError) as refused:
            await client.send_message(cid, text)
        assert "no visible characters" in str(refused.value)
        after = await client.state(cid)
        assert after.model_dump() == before.model_dump() and after.pending_confirmation.detail == detail
        assert order_details(backend, PENDING)["status"] == "pending"
