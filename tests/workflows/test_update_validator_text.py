"""The update validators are the last edge before the state and the history: a caller of
Temporal itself (``temporal workflow update``, an SDK) skips the client's and the API's
checks, so a resolution's note, step id or actor, and an approval decision's note, with a
control character (NUL, ESC, a bidirectional override) is refused by the workflow too and
changes nothing (never accepted and kept in the state)."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import WorkflowUpdateFailedError

from tests.faults import UnknownWrites
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, running_worker
from workflows.domain.policy.approvals import ApprovalDecision, check_decision_text
from workflows.domain.errors import ErrorType
from workflows.domain.records import OutcomeResolution
from workflows.conversation.resolution import ResolveOutcome

TOOL = "modify_pending_order_address"
ADDRESS = dict(order_id=PENDING, address1="1 Text Road", address2="", city="Austin", state="TX", country="USA",
               zip="78701")


def test_an_approval_note_with_a_control_character_is_refused():
    for note in ("ok \u202eevil", "nul \x00", "esc \x1b[2J"):
        with pytest.raises(Exception) as refused:
            check_decision_text(ApprovalDecision(approval_id="a~1", decision="approve", approver="sup", note=note))
        assert getattr(refused.value, "type", None) == ErrorType.APPROVAL_REFUSED.value
    check_decision_text(ApprovalDecision(approval_id="a~1", decision="approve", approver="sup", note="fine\tnote"))


async def test_a_resolution_sent_straight_to_temporal_with_a_control_character_is_refused(temporal_env, settings):
    faulty: list[UnknownWrites] = []

    def wrap(port):
        faulty.append(UnknownWrites(port))
        return faulty[0]

    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=PENDING), call(TOOL, **ADDRESS)])
    async with running_worker(temporal_env, settings, brain=brain, wrap_port=wrap) as (client, _backend):
        cid = f"validator-text-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        assert (await client.send_message(cid, f"my email is {EMAIL}, ship {PENDING} to Austin")).awaiting_confirmation
        assert (await client.send_message(cid, "yes")).status == "escalated"
        [step] = [s for s in (await client.state(cid)).steps if s.status.value == "unknown"]
        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")
        for n, fields in enumerate(({"note": "checked \u202eno change"}, {"note": "nul \x00 here"},
                                    {"note": "ok", "actor": "x\x1b[2J"})):
            request = ResolveOutcome(step_id=step.step_id, outcome="not_applied", operator="op-1",
                                     **{"note": "ok", **fields})
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update("resolve_outcome", request, id=f"direct-{n}", result_type=OutcomeResolution)
            assert getattr(refused.value.cause, "type", None) == ErrorType.RESOLUTION_REFUSED.value
            assert "U+" in refused.value.cause.message
        intact = await client.state(cid)
        assert intact.resolutions == [] and intact.status.value == "escalated"
        done = await handle.execute_update("resolve_outcome", ResolveOutcome(
            step_id=step.step_id, outcome="applied", operator="op-1", note="checked the order"), id="direct-ok",
            result_type=OutcomeResolution)
        assert done.outcome == "applied"
