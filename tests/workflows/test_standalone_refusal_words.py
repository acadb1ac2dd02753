"""A standalone refund refused by the policy tells its ``POST /refunds`` caller why in the
caller's words: the ``reason`` of ``GET /refunds/{id}`` and of the repeated POST's answer is the
clause's sentence, never the text written for the model (the clause id in parentheses, hints
such as "read the customer's details for their payment method ids", another customer's
payment method id)."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.policy_fixtures import DELIVERED
from tests.workflow_harness import refund_settled, running_worker
from workflows.domain.policy.text import CLAUSE_REFUSALS
from workflows.refund.standalone import RefundRequest

OTHER_CARD = "credit_card_9789590"  # another customer's card
CLAUSE_ID = re.compile(r"\((?:[a-z]+-)+[a-z]+\)")
MODEL_WORDS = ("read the customer", "transfer to a human agent", "the model", "Error")


@pytest.mark.parametrize("operation, order, arguments, sentence", [
    # the fresh read's precondition: a delivered order cannot be cancelled
    ("cancel", DELIVERED, {"reason": "no longer needed"}, CLAUSE_REFUSALS["cancel-pending-only"]),
    # the spec's policy check: the refund would go to another customer's card
    ("return", DELIVERED, {"item_ids": ["3104857380"], "payment_method_id": OTHER_CARD},
     "must belong to the order's owner"),
], ids=["precondition", "policy-check"])
async def test_a_policy_refusal_reaches_the_caller_in_its_words(temporal_env, settings, operation, order,
                                                                 arguments, sentence):
    async with running_worker(temporal_env, settings) as (client, _backend):
        request = RefundRequest(request_id=f"words-{uuid.uuid4().hex[:6]}", order_id=order, operation=operation,
                                **arguments)
        started = await client.request_refund(request)
        settled = await refund_settled(client, started.refund_id)
        again = await client.request_refund(request)  # the POST answer of a repeat: the same run's status
        for status in (settled, again):
            assert status.status == "refused" and status.reason, status
            assert sentence in status.reason and "Nothing was changed" in status.reason, status.reason
            assert not CLAUSE_ID.search(status.reason), status.reason
            assert not any(words in status.reason for words in MODEL_WORDS), status.reason
            assert OTHER_CARD not in status.reason, status.reason
