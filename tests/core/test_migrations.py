"""The state's migration chain (``workflows.domain.migrations``): every step, values preserved,
and every state it cannot read refused with a typed, readable reason, including saved states
the run could not use: a negative turn (the records built from the state bound it; it would
otherwise fail every workflow task), and money edited by hand into something other than
exact cents.

The version-1 states here are what v0.1.0 wrote: a state built from the real τ-bench data
through the workflow's own transitions, dumped to JSON with money as JSON numbers (floats)
and ``schema_version`` 1.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from systems.model.view import amount
from tests.policy_fixtures import CARD, DELIVERED, EMAIL, GIFT, PENDING, authenticated, data
from workflows.domain.contracts import SupportInput
from workflows.domain.errors import ErrorType
from workflows.domain.migrations import (
    MIGRATIONS,
    OLDEST_VERSION,
    StateIncompatible,
    initial_state,
    load_state,
    migrate,
    v1_to_v2,
    v2_to_v3,
)
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call
from workflows.domain.money import money
from workflows.domain.policy.approvals import Approval
from workflows.domain.state import SCHEMA_VERSION, CompletedOperation, ConversationState, ConversationStatus, OrderFact

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
MONEY_PATHS = ("customer.payment_methods.*.balance", "orders.*.total", "orders.*.items.*.price",
               "orders.*.payment_history.*.amount", "products.*.variants.*.price")


def current_state() -> ConversationState:
    """A populated state: customer with a gift card, three orders, their products, pinned
    facts and one completed operation."""
    state = authenticated()
    state.completed_operations.append(CompletedOperation(
        operation_id="op-1", idempotency_key=f"cancel_pending_order:{PENDING}:policy-test.t1",
        tool="cancel_pending_order", arguments={"order_id": PENDING, "reason": "no longer needed"},
        result='{"status": "cancelled"}', ok=True, turn=1))
    return state


def as_v1(dump: dict[str, Any]) -> dict[str, Any]:
    """A current JSON dump as v0.1.0 wrote it: ``schema_version`` 1, money as floats."""
    v1 = copy.deepcopy(dump)
    v1["schema_version"] = 1
    v1.pop("phase", None)  # version 3's
    for holder, key in money_fields(v1):
        if holder[key] is not None:
            holder[key] = float(holder[key])
    return v1


def money_fields(state: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(holder, key) of every amount of money in a state dump."""
    found: list[tuple[dict[str, Any], str]] = []
    for method in (state.get("customer") or {}).get("payment_methods", {}).values():
        found.append((method, "balance"))
    for order in state.get("orders", {}).values():
        found.append((order, "total"))
        found += [(item, "price") for item in order["items"]]
        found += [(entry, "amount") for entry in order["payment_history"]]
    for product in state.get("products", {}).values():
        found += [(variant, "price") for variant in product["variants"].values()]
    return found


def refusal(raw: Any) -> str:
    with pytest.raises(StateIncompatible) as caught:
        load_state(raw)
    return caught.value.reason


# --- the chain ----------------------------------------------------------------------------


def test_the_chain_has_one_step_per_version_up_to_the_current_one():
    assert OLDEST_VERSION == 1 and SCHEMA_VERSION == 3
    assert sorted(MIGRATIONS) == list(range(OLDEST_VERSION, SCHEMA_VERSION))


def test_step_1_to_2_turns_every_amount_into_cent_text_and_keeps_everything_else():
    v1 = as_v1(current_state().model_dump(mode="json"))
    floats = [holder[key] for holder, key in money_fields(v1)]
    assert len(floats) > 20 and all(isinstance(f, float) for f in floats if f is not None)
    assert any(f is not None and f != round(f, 1) for f in floats)  # real cents, not only round figures
    v2 = v1_to_v2(copy.deepcopy(v1))
    assert v2["schema_version"] == 2
    texts = [holder[key] for holder, key in money_fields(v2)]
    for before, after in zip(floats, texts):
        if before is None:
            assert after is None  # a credit card has no balance
        else:
            assert isinstance(after, str) and after == f"{before:.2f}" and Decimal(after) == Decimal(str(before))
    # nothing but the amounts and the version changed
    strip = lambda s: {k: v for k, v in s.items() if k not in ("schema_version", "customer", "orders", "products")}
    assert strip(v2) == strip(v1)
    assert v2["customer"]["payment_methods"].keys() == v1["customer"]["payment_methods"].keys()


def test_step_1_to_2_keeps_826_70_as_826_70():
    order = {"order_id": "#W1", "user_id": "u", "status": "pending", "total": 826.7,
             "items": [{"item_id": "i", "product_id": "p", "name": "n", "price": 826.7}],
             "payment_history": [{"transaction_type": "payment", "amount": 826.7, "payment_method_id": "pm"}]}
    v2 = v1_to_v2({"schema_version": 1, "conversation_id": "c", "orders": {"#W1": order}})
    assert v2["orders"]["#W1"]["total"] == "826.70"
    assert v2["orders"]["#W1"]["items"][0]["price"] == "826.70"
    assert v2["orders"]["#W1"]["payment_history"][0]["amount"] == "826.70"


def phase_of_v2(raw: dict[str, Any]) -> str:
    """The phase a version-2 state stands in, read as its fields say it (what version 2's
    workflow inferred from them)."""
    if raw.get("status", "active") != "active":
        return "closed"
    if any(a["status"] == "pending" for a in raw.get("approvals", [])):
        return "awaiting_approval"
    return "awaiting_confirmation" if raw.get("pending_confirmation") else "open"


def as_v2(state: ConversationState) -> dict[str, Any]:
    """``state`` as version 2 wrote it: no ``phase``."""
    v2 = state.model_dump(mode="json")
    v2["schema_version"] = 2
    del v2["phase"]
    return v2


def _shown(state: ConversationState) -> None:
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    tr.await_confirmation(state, "policy-test.t1", call, "Cancel it")


def _awaiting_approval(state: ConversationState) -> None:
    _shown(state)
    confirmed = tr.take_pending(state)
    approval = Approval(approval_id="a1", workflow_id="support-policy-test", operation_id=confirmed.operation_id,
                        tool=confirmed.call.name, order_id=PENDING, amount=Decimal("10.00"), digest="d",
                        reasons=[], requested_at=T0, expires_at=T0)
    tr.await_approval(state, confirmed, approval)


@pytest.mark.parametrize("make, expected", [
    (lambda s: None, "open"),
    (_shown, "awaiting_confirmation"),
    (_awaiting_approval, "awaiting_approval"),
    (lambda s: (_awaiting_approval(s), _shown(s)), "awaiting_approval"),  # the supervisor's wait shows first
    (lambda s: tr.close(s, ConversationStatus.ENDED, "done"), "closed"),
    (lambda s: tr.close(s, ConversationStatus.ESCALATED, "unknown"), "closed"),
], ids=["open", "shown", "approval", "approval-and-shown", "ended", "escalated"])
def test_step_2_to_3_sets_the_phase_version_2_inferred_and_keeps_everything_else(make, expected):
    state = current_state()
    make(state)
    v2 = as_v2(state)
    assert phase_of_v2(v2) == expected
    v3 = v2_to_v3(copy.deepcopy(v2))
    assert v3 == dict(v2, schema_version=3, phase=expected)
    loaded = load_state(v2)
    assert loaded.phase.value == expected == state.phase.value  # what the transitions set, too
    assert loaded == state


def test_a_v1_state_loads_with_its_values_preserved():
    state = current_state()
    v1 = as_v1(state.model_dump(mode="json"))
    loaded = load_state(v1)
    assert loaded.schema_version == SCHEMA_VERSION
    assert loaded == state  # every value, money included, equal to what was saved
    assert len(loaded.completed_operations) == 1 and loaded.completed_operations[0].ok
    assert len(loaded.pinned_facts) == len(v1["pinned_facts"]) > 0
    assert loaded.customer is not None and loaded.customer.email == EMAIL
    assert loaded.customer.payment_methods[GIFT].balance == money(data()["users"][loaded.customer.user_id]
                                                                  ["payment_methods"][GIFT]["balance"])
    assert loaded.customer.payment_methods[CARD].balance is None
    raw_order = data()["orders"][DELIVERED]
    order = loaded.orders[DELIVERED]
    assert [item.price for item in order.items] == [money(item["price"]) for item in raw_order["items"]]
    assert order.total == money(sum(Decimal(str(item["price"])) for item in raw_order["items"]))
    assert [e.amount for e in order.payment_history] == [money(e["amount"]) for e in raw_order["payment_history"]]


def test_loading_does_not_change_the_saved_dict():
    v1 = as_v1(current_state().model_dump(mode="json"))
    saved = copy.deepcopy(v1)
    load_state(v1)
    migrate(v1)
    assert v1 == saved


def test_a_current_state_round_trips_through_json():
    state = current_state()
    dump = json.loads(state.model_dump_json())
    assert dump["orders"][PENDING]["total"] == str(state.orders[PENDING].total)  # money is text in JSON
    assert load_state(dump) == state


# --- what it refuses ------------------------------------------------------------------------


def test_a_newer_version_is_refused_naming_both_versions():
    reason = refusal(dict(current_state().model_dump(mode="json"), schema_version=99))
    assert reason.startswith(f"saved by a newer version (99) than this worker understands ({SCHEMA_VERSION})")


def test_a_version_older_than_the_chain_is_refused():
    # a state "from an older schema" (version 0, a field renamed) must not lose data silently
    v0 = as_v1(current_state().model_dump(mode="json"))
    v0["schema_version"] = 0
    v0["operations_completed"] = v0.pop("completed_operations")
    assert refusal(v0) == "saved with schema version 0, older than the oldest this worker can migrate (1)"


@pytest.mark.parametrize("version, expected", [
    (None, "it has no schema_version"),
    ("1", "its schema_version must be a whole number, not str"),
    (1.0, "its schema_version must be a whole number, not float"),
    (True, "its schema_version must be a whole number, not bool"),
])
def test_a_missing_or_invalid_version_is_refused(version, expected):
    raw = as_v1(current_state().model_dump(mode="json"))
    if version is None:
        del raw["schema_version"]
    else:
        raw["schema_version"] = version
    assert refusal(raw).startswith(expected)


def test_a_state_that_is_not_an_object_is_refused():
    assert refusal([1, 2]) == "it is not a JSON object (got list)"


def test_a_renamed_field_is_refused_not_dropped():
    v1 = as_v1(current_state().model_dump(mode="json"))
    v1["operations_completed"] = v1.pop("completed_operations")
    v1["facts"] = v1.pop("pinned_facts")
    reason = refusal(v1)
    assert "field operations_completed: not a field of schema version 3" in reason
    assert "field facts: not a field of schema version 3" in reason


def test_an_unknown_nested_field_is_refused_with_its_path():
    dump = current_state().model_dump(mode="json")
    dump["orders"][PENDING]["items"][0]["colour"] = "red"
    assert refusal(dump) == (f"saved with schema version 3, it does not validate: field orders.{PENDING}.items.0."
                             "colour: not a field of schema version 3")


def test_a_wrongly_typed_field_is_named_without_its_value():
    v1 = as_v1(current_state().model_dump(mode="json"))
    v1["turn"] = "three"
    v1["orders"][DELIVERED]["items"][1]["price"] = "a lot"
    v1["customer"]["email"] = 4155550123  # a value that must not reach a log or the Web UI
    reason = refusal(v1)
    assert reason.startswith("saved with schema version 1 and migrated to 3, it does not validate: ")
    assert "field turn: Input should be a valid integer" in reason
    assert f"field orders.{DELIVERED}.items.1.price: an amount of money given as text must be a plain decimal" in reason
    assert "field customer.email: Input should be a valid string" in reason
    assert "4155550123" not in reason and "three" not in reason and "a lot" not in reason


def test_a_missing_required_field_is_named():
    dump = current_state().model_dump(mode="json")
    del dump["conversation_id"]
    assert refusal(dump).endswith("field conversation_id: required, but missing")


def test_many_errors_are_counted_not_listed():
    dump = current_state().model_dump(mode="json")
    for index in range(6):
        dump[f"unknown_{index}"] = index
    reason = refusal(dump)
    assert reason.count("field unknown_") == 3 and reason.endswith("and 3 more")


def test_the_workflow_failure_is_typed_and_non_retryable():
    err = StateIncompatible("saved by a newer version (99) than this worker understands (3)")
    failure = err.failure()
    assert isinstance(failure, ApplicationError) and failure.non_retryable
    assert failure.type == ErrorType.STATE_INCOMPATIBLE.value
    assert failure.message == ("the conversation's saved state cannot be loaded: saved by a newer version (99) "
                               "than this worker understands (3)")


def test_initial_state_is_fresh_loaded_or_a_placeholder_with_the_error():
    fresh, err = initial_state("c-1", "main", None)
    assert err is None and fresh == ConversationState(conversation_id="c-1")
    loaded, err = initial_state("c-1", "main", as_v1(current_state().model_dump(mode="json")))
    assert err is None and loaded == current_state().model_copy(update={"conversation_id": "c-1"})  # rebound
    _, err = initial_state("c-1", "store-2", as_v1(current_state().model_dump(mode="json")))
    assert isinstance(err, StateIncompatible) and "saved for store 'main'" in err.reason
    placeholder, err = initial_state("c-1", "store-2", {"schema_version": 99})
    assert isinstance(err, StateIncompatible) and "newer version (99)" in err.reason
    assert placeholder == ConversationState(conversation_id="c-1", store="store-2")


# --- money and the run input -------------------------------------------------------------------


@pytest.mark.parametrize("value, cents", [(826.7, "826.70"), (500.01, "500.01"), ("826.70", "826.70"),
                                          (3, "3.00"), (Decimal("0.005"), "0.01"), (" 12.5 ", "12.50")])
def test_money_fields_hold_cent_decimals(value, cents):
    order = OrderFact(order_id="#W1", user_id="u", status="pending", total=value)
    assert order.total == Decimal(cents) and str(order.total) == cents
    assert json.loads(order.model_dump_json())["total"] == cents


@pytest.mark.parametrize("value", ["lots", float("nan"), float("inf"), True, [1], 1e30])
def test_money_fields_refuse_what_is_not_an_amount(value):
    with pytest.raises(ValueError):
        OrderFact(order_id="#W1", user_id="u", status="pending", total=value)


def test_the_run_input_carries_the_state_as_json():
    state = current_state()
    inp = SupportInput(conversation_id="c", state=state)
    assert inp.state == state.model_dump(mode="json")
    assert SupportInput.model_validate_json(inp.model_dump_json()).state == inp.state
    # a broken state still decodes as an input: the workflow, not the decoder, refuses it
    assert SupportInput.model_validate({"conversation_id": "c", "state": {"turn": "x"}}).state == {"turn": "x"}


@pytest.mark.parametrize("given, expected", [("826.70", Decimal("826.70")), (826.7, Decimal("826.7")),
                                             (None, Decimal(0)), ("n/a", Decimal(0)), ("NaN", Decimal(0))])
def test_the_offline_model_reads_money_as_text_or_number(given, expected):
    assert amount(given) == expected


# --- the stored states of every release ---------------------------------------------------------

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
STORED = sorted(HISTORIES.glob("v*/states/*.json"))
SCHEMA_2 = sorted((Path(__file__).resolve().parent / "saved_states" / "schema2").glob("*.json"))
"""States a real conversation saved with schema version 2 (the recording scenarios' states:
awaiting confirmation, awaiting approval, ended, cancelled, rolled back, ...), kept loading."""


def test_every_release_has_stored_states():
    assert {path.parent.parent.name for path in STORED} >= {"v1.0.0"}
    states = [json.loads(path.read_text()) for path in STORED]
    # what the per-file test checks is there to check (the stored states read no products:
    # variant prices are covered by the v1 state built above)
    assert {key for state in states for _, key in money_fields(state)} >= {"balance", "total", "price", "amount"}
    assert sum(len(state["completed_operations"]) for state in states) > 0


ADDED_USAGE_FIELDS = {"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "budget_tokens": None}
"""``Usage`` fields a stored state may lack (added with a default, no schema bump), with the value
such a state reads with."""


def test_schema_2_states_are_kept_and_cover_every_phase_version_2_inferred():
    states = [json.loads(path.read_text()) for path in SCHEMA_2]
    assert states and {state["schema_version"] for state in states} == {2}
    assert {phase_of_v2(state) for state in states} == {"open", "awaiting_confirmation", "awaiting_approval",
                                                        "closed"}


@pytest.mark.parametrize("path", STORED + SCHEMA_2, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.stem}")
def test_a_stored_state_of_a_release_loads_with_its_values_preserved(path: Path):
    raw = json.loads(path.read_text())
    loaded = load_state(raw)
    assert loaded.schema_version == SCHEMA_VERSION
    dumped = loaded.model_dump(mode="json")
    # money equal as cents, everything else exactly as saved
    saved_money = [holder[key] for holder, key in money_fields(raw)]
    loaded_money = [holder[key] for holder, key in money_fields(dumped)]
    assert [None if v is None else money(v) for v in saved_money] == [
        None if v is None else Decimal(v) for v in loaded_money]
    for holder, key in money_fields(raw):
        if holder[key] is not None:
            holder[key] = str(money(holder[key]))
    # fields added since with a default (no schema bump: an older state reads as "none yet")
    added = {key: dumped["usage"].pop(key) for key in ADDED_USAGE_FIELDS if key not in raw.get("usage", {})}
    assert added == {k: v for k, v in ADDED_USAGE_FIELDS.items() if k in added}
    if "resolutions" not in raw:  # operators' resolutions of unknown outcomes: none in an older state
        assert dumped.pop("resolutions") == []
    if "model_trouble_turns" not in raw:  # turns in a row of model trouble: none in an older state
        assert dumped.pop("model_trouble_turns") == 0
    if "reset_epoch" not in raw:  # the reset epoch of its events' keys: no reset in an older state
        assert dumped.pop("reset_epoch") is None
    if raw["schema_version"] < 3:  # the phase, inferred from what a version-2 state holds
        assert dumped.pop("phase") == phase_of_v2(raw)
    assert dumped == dict(raw, schema_version=SCHEMA_VERSION)
    assert len(loaded.completed_operations) == len(raw["completed_operations"])
    assert len(loaded.pinned_facts) == len(raw["pinned_facts"])
    assert loaded.orders.keys() == raw["orders"].keys() and loaded.products.keys() == raw["products"].keys()


# --- Saved states the run could not use ---

FIXTURE = Path(__file__).resolve().parents[1] / "histories" / "v1.0.0" / "states" / "returns_and_cancels-two_writes_done.json"


def saved() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("turn", [-5, -1])
def test_a_negative_turn_is_refused_at_load(turn):
    # a turn the state's own fields take; the next ModelRequest / TranscriptRecord (turn >= 0)
    # would raise inside the workflow
    state = saved()
    state["turn"] = turn
    with pytest.raises(StateIncompatible):
        load_state(state)


@pytest.mark.parametrize("text", ["12.345", "0.005", "1_000", "١٢٣"])
def test_hand_edited_money_is_not_silently_changed(text):
    # "nothing is silently dropped or guessed" (workflows.domain.migrations): sub-cent amounts are
    # rounded, digit separators and non-ASCII digits are read as numbers
    state = dict(saved(), schema_version=2)
    state["customer"]["payment_methods"][GIFT]["balance"] = text
    with pytest.raises(StateIncompatible):
        load_state(state)
