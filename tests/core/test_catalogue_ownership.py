"""The tool catalogue owns every per-tool fact: no module of statekeeper outside
``workflows/domain/catalogue/`` names a tool in its code, and the tables other modules use
(the payments service's movements, the standalone refund API's operations and fields, the
refund view's amount, approvals, the reads of a document) come from the specs."""

from __future__ import annotations

import ast
import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pytest

from activities.payments_port import money_movements
from systems.retail.tools import TOOL_CLASS as SYSTEM_TOOL_CLASS
from systems.retail.tools import ToolClass as SystemToolClass
from tests.policy_fixtures import CARD, DELIVERED, PENDING, data
from workflows.domain.actions import read_of
from workflows.domain.catalogue import (
    System,
    CATALOGUE,
    READERS,
    REFUND_TOOLS,
    STANDALONE_OPERATIONS,
    Execution,
    Scope,
    ToolClass,
    ToolSpec,
    spec_of,
)
from workflows.refund.standalone import ARGUMENT_FIELDS, RefundRequest, noun_of

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("workflows", "activities", "starter", "settings")
CATALOGUE_DIR = ROOT / "workflows" / "domain" / "catalogue"
NAMES_TOOLS_ON_PURPOSE = {ROOT / "workflows" / "domain" / "prompt.py"}
"""Prompt versions name the tools they withhold from the model (an experiment's definition)."""


def _tool_literals(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every string constant in ``path``'s code that is a tool's name."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CATALOGUE]


def test_no_module_outside_the_catalogue_names_a_tool():
    found = {}
    for folder in PRODUCTION:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if CATALOGUE_DIR in path.parents or path in NAMES_TOOLS_ON_PURPOSE:
                continue
            if literals := _tool_literals(path):
                found[str(path.relative_to(ROOT))] = literals
    assert found == {}, f"per-tool facts outside the catalogue: {found}"


def test_the_catalogue_and_the_system_of_record_agree_on_reads_and_writes():
    # the system keeps its own classes (it imports nothing of ours); where both know a tool
    # they must agree whether it reads or writes; the memory's tools are statekeeper's own
    for name, spec in CATALOGUE.items():
        if spec.system is System.MEMORY:
            assert name not in SYSTEM_TOOL_CLASS, name
            continue
        assert name in SYSTEM_TOOL_CLASS, f"{name} has no function in the system of record"
        assert (SYSTEM_TOOL_CLASS[name] is SystemToolClass.READ) is (spec.tool_class is ToolClass.READ), name


def test_every_refund_type_write_has_a_standalone_operation_and_a_noun():
    assert set(STANDALONE_OPERATIONS.values()) == REFUND_TOOLS
    operations = RefundRequest.model_json_schema()["properties"]["operation"]["enum"]
    assert sorted(operations) == sorted(STANDALONE_OPERATIONS)
    for name in REFUND_TOOLS:
        assert noun_of(name) != "change" and name not in noun_of(name)
    for name in REFUND_TOOLS:  # every argument of each refund-type write is a request field
        assert set(spec_of(name).args.model_fields) - {"order_id"} <= set(ARGUMENT_FIELDS)
    with pytest.raises(ValueError, match="operation name and noun"):
        ToolSpec(name="x", args=CATALOGUE["cancel_pending_order"].args, tool_class=ToolClass.IRREVERSIBLE_WRITE,
                 description="x", scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
                 detail=lambda s, a: "x", approval_amount=lambda o, a, p: Decimal(0), refunds=lambda o, a, p: True)


def test_a_request_digest_holds_only_the_argument_fields_given_beyond_the_first_four():
    request = RefundRequest(request_id="r-1", order_id=PENDING, operation="cancel", reason="no longer needed")
    canonical = {"request_id": "r-1", "order_id": PENDING, "operation": "cancel", "store": "main",
                 "reason": "no longer needed", "item_ids": None, "new_item_ids": None, "payment_method_id": None}
    assert request.digest() == hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()
    assert request.tool_call().name == "cancel_pending_order"


def test_payment_movements_come_from_the_spec():
    order = data()["orders"][PENDING]
    paid = order["payment_history"][0]
    cancelled = {**order, "payment_history": [paid, {**paid, "transaction_type": "refund"}]}
    assert money_movements("cancel_pending_order", json.dumps(cancelled)) == [
        {"transaction_type": "refund", "amount": f"{paid['amount']:.2f}",
         "payment_method_id": paid["payment_method_id"]}]
    assert money_movements("return_delivered_order_items", json.dumps(cancelled)) is None  # moves nothing now
    assert money_movements("cancel_pending_order", "Error: order not found") is None
    assert {n for n, s in CATALOGUE.items() if s.moves_money} == {
        "cancel_pending_order", "modify_pending_order_items", "modify_pending_order_payment", "grant_goodwill_credit"}


def test_documents_are_read_by_the_read_the_catalogue_names():
    assert read_of("order_id", DELIVERED).name == READERS["order_id"]
    assert read_of("user_id", "u").arguments.user_id == "u"
    assert all(spec_of(tool).tool_class is ToolClass.READ for tool in READERS.values())
    with pytest.raises(KeyError):
        read_of("payment_method_id", CARD)
