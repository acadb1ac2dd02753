"""Authentication in a running conversation: a model that looks up a customer the user
never identified as authenticates no one, so it cannot act on that customer's orders.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; only the model
is faked, at its boundary. The rule itself, on the pure policy, is
tests/core/test_authentication.py.
"""

from __future__ import annotations

import uuid

from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, running_worker


async def test_model_cannot_authenticate_an_identity_the_user_never_gave(temporal_env, settings):
    """The user gives no identity at all. The model looks up a customer's email on its own
    (hallucination, prompt injection, 'did you mean ...'): the workflow does not take it as
    the authenticated customer, so the model cannot act on that customer's orders.
    Authenticate-first is satisfied only by what the user typed (pinned facts of kind
    email / name / zip), never by any email the model picks."""
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"auth-invented-{uuid.uuid4().hex[:6]}")
        reply_ = await client.send_message(cid, "hi, I want to cancel my last order, I no longer need it")
        state = await client.state(cid)
        assert state.customer is None, (
            f"authenticated as {state.customer.user_id} from an email the user never typed; "
            f"pinned facts: {[(f.kind, f.value) for f in state.pinned_facts]}; reply: {reply_.text!r}")
