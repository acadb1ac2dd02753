"""The 16 τ-bench retail tools as pure functions over the benchmark's data dicts.

``data`` is ``{"orders": {order_id: order}, "products": {product_id: product},
"users": {user_id: user}}`` in the shape of the packaged JSON files. Each tool
reproduces ``tau_bench/envs/retail/tools/*.py`` (sierra-research/tau-bench@59a200c):
the same preconditions in the same order, the same ``"Error: ..."`` strings, the same
effects (status strings, added fields, payment_history order, gift-card balances
rounded to 2 decimals) and the same result strings (``json.dumps`` of the touched
dict). The data hash of a run is graded against the benchmark's, so any deviation
here, even a missing ``round``, fails tasks.

Unlike the benchmark, every tool validates everything before it mutates anything, so
an ``"Error: ..."`` result always leaves ``data`` unchanged.
"""

from __future__ import annotations

import ast
import copy
import json
import operator
from typing import Any, Callable

from workflows.actions import CANCEL_REASONS, ToolClass
from workflows.actions import TOOL_CLASS as MODEL_TOOL_CLASS

Data = dict[str, dict[str, Any]]


class UnknownToolError(KeyError):
    """Raised by :func:`run_tool` for a name that is not one of the 16 retail tools."""




def _address(address1, address2, city, state, country, zip) -> dict[str, str]:
    # Key order is the benchmark's; it shows in the json.dumps result strings.
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "state": state,
        "country": country,
        "zip": zip,
    }


# ---------------------------------------------------------------- read tools


def find_user_id_by_email(data: Data, email: str) -> str:
    """First user (in data order) whose email matches case-insensitively, else error."""
    for user_id, profile in data["users"].items():
        if profile["email"].lower() == email.lower():
            return user_id
    return "Error: user not found"


def find_user_id_by_name_zip(data: Data, first_name: str, last_name: str, zip: str) -> str:
    """First user matching first/last name (case-insensitive) and exact zip, else error."""
    for user_id, profile in data["users"].items():
        if (
            profile["name"]["first_name"].lower() == first_name.lower()
            and profile["name"]["last_name"].lower() == last_name.lower()
            and profile["address"]["zip"] == zip
        ):
            return user_id
    return "Error: user not found"


def get_user_details(data: Data, user_id: str) -> str:
    """``json.dumps`` of the user, or ``"Error: user not found"``."""
    if user_id in data["users"]:
        return json.dumps(data["users"][user_id])
    return "Error: user not found"


def get_order_details(data: Data, order_id: str) -> str:
    """``json.dumps`` of the order, or ``"Error: order not found"``."""
    if order_id in data["orders"]:
        return json.dumps(data["orders"][order_id])
    return "Error: order not found"


def get_product_details(data: Data, product_id: str) -> str:
    """``json.dumps`` of the product with all variants, or ``"Error: product not found"``."""
    if product_id in data["products"]:
        return json.dumps(data["products"][product_id])
    return "Error: product not found"


def list_all_product_types(data: Data) -> str:
    """``json.dumps`` of ``{product name: product_id}`` sorted by name."""
    product_dict = {p["name"]: p["product_id"] for p in data["products"].values()}
    return json.dumps(dict(sorted(product_dict.items())))


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARYOPS: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_POW_BITS = 100_000


def _eval(node: ast.AST) -> Any:
    # Same results as the benchmark's eval() over the whitelisted characters, but an
    # exponent tower like 9**9**9 fails fast instead of hanging the worker.
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARYOPS:
        return _UNARYOPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and right * max(abs(left).bit_length() - 1, 0) > _MAX_POW_BITS
        ):
            # float() of that integer is what the benchmark would fail on.
            raise OverflowError("int too large to convert to float")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Call):
        func = _eval(node.func)
        raise TypeError(f"'{type(func).__name__}' object is not callable")
    raise SyntaxError("invalid syntax")


def calculate(data: Data, expression: str) -> str:
    """Arithmetic over digits, ``+-*/().`` and spaces; the result rounded to 2 decimals.

    Returns e.g. ``"4.0"``; ``"Error: invalid characters in expression"`` or
    ``"Error: <exception message>"`` on failure.
    """
    if not all(char in "0123456789+-*/(). " for char in expression):
        return "Error: invalid characters in expression"
    try:
        # eval() strips leading blanks; compile() alone would raise "unexpected indent".
        tree = compile(expression.lstrip(" \t"), "<string>", "eval", ast.PyCF_ONLY_AST)
        return str(round(float(_eval(tree)), 2))
    except Exception as e:  # noqa: BLE001 - the benchmark reports any failure as text
        return f"Error: {e}"


def think(data: Data, thought: str) -> str:
    """Records nothing and returns ``""``; the thought lives only in the transcript."""
    return ""


# ---------------------------------------------------------------- write tools


def _pending_order(data: Data, order_id: str, verb: str) -> tuple[dict | None, str | None]:
    if order_id not in data["orders"]:
        return None, "Error: order not found"
    order = data["orders"][order_id]
    if order["status"] != "pending":
        return None, f"Error: non-pending order cannot be {verb}"
    return order, None


def _delivered_order(data: Data, order_id: str, verb: str) -> tuple[dict | None, str | None]:
    if order_id not in data["orders"]:
        return None, "Error: order not found"
    order = data["orders"][order_id]
    if order["status"] != "delivered":
        return None, f"Error: non-delivered order cannot be {verb}"
    return order, None


def _missing_item(order: dict, item_ids: list[str]) -> str | None:
    # Duplicates are allowed, but no more of an id than the order holds.
    all_item_ids = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_item_ids.count(item_id):
            return item_id
    return None


def _price_difference(
    data: Data, order: dict, item_ids: list[str], new_item_ids: list[str]
) -> tuple[float, str | None]:
    """Sum of (new price - old price), unrounded; error if a new item is not a
    currently available variant of the *same* product as the item it replaces."""
    products = data["products"]
    diff_price = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = [item for item in order["items"] if item["item_id"] == item_id][0]
        variants = products[item["product_id"]]["variants"]
        if not (new_item_id in variants and variants[new_item_id]["available"]):
            return 0, f"Error: new item {new_item_id} not found or available"
        diff_price += variants[new_item_id]["price"] - item["price"]
    return diff_price, None


def _item_change_difference(
    data: Data, order: dict, item_ids: list[str], new_item_ids: list[str]
) -> tuple[float, str | None]:
    """The checks modify-items and exchange share, in the benchmark's order: items in the
    order, equal list lengths, then the (unrounded) price difference of the new items."""
    missing = _missing_item(order, item_ids)
    if missing is not None:
        return 0.0, f"Error: {missing} not found"
    if len(item_ids) != len(new_item_ids):
        return 0.0, "Error: the number of items to be exchanged should match"
    return _price_difference(data, order, item_ids, new_item_ids)


def _add_balance(payment_method: dict, amount: float) -> None:
    payment_method["balance"] += amount
    payment_method["balance"] = round(payment_method["balance"], 2)


def cancel_pending_order(data: Data, order_id: str, reason: str) -> str:
    """Cancel a ``pending`` order (policy: cancel only pending, reason must be one of
    :data:`CANCEL_REASONS`).

    Effects: status ``"cancelled"``, ``cancel_reason`` added, one refund entry per
    payment_history entry appended (same amount and method, in order); gift-card
    refunds are credited to the balance immediately (rounded to 2 decimals).
    Returns ``json.dumps`` of the order.
    """
    order, error = _pending_order(data, order_id, "cancelled")
    if error:
        return error
    if reason not in CANCEL_REASONS:
        return "Error: invalid reason"
    methods = data["users"][order["user_id"]]["payment_methods"]
    refunds = [
        {
            "transaction_type": "refund",
            "amount": payment["amount"],
            "payment_method_id": payment["payment_method_id"],
        }
        for payment in order["payment_history"]
    ]
    # Gift cards are refunded at once; other methods "in 5-7 business days", i.e. never here.
    credits = [
        (methods[r["payment_method_id"]], r["amount"]) for r in refunds if "gift_card" in r["payment_method_id"]
    ]
    for payment_method, amount in credits:
        _add_balance(payment_method, amount)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return json.dumps(order)


def modify_pending_order_address(
    data: Data, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Replace a ``pending`` order's shipping address; returns ``json.dumps`` of the order."""
    order, error = _pending_order(data, order_id, "modified")
    if error:
        return error
    order["address"] = _address(address1, address2, city, state, country, zip)
    return json.dumps(order)


def modify_pending_order_items(
    data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Swap items of a ``pending`` order for available variants of the same products.

    The price difference (new - old, summed, NOT rounded - as the benchmark) is charged
    (``"payment"`` if > 0, else ``"refund"`` of its absolute value) to
    ``payment_method_id``; a gift card needs balance >= the difference and its balance
    is debited and rounded to 2 decimals. Status becomes ``"pending (item modified)"``,
    so the order can no longer be modified or cancelled. Returns ``json.dumps`` of the order.
    """
    order, error = _pending_order(data, order_id, "modified")
    if error:
        return error
    diff_price, error = _item_change_difference(data, order, item_ids, new_item_ids)
    if error:
        return error
    payment_method = data["users"][order["user_id"]]["payment_methods"].get(payment_method_id)
    if payment_method is None:
        return "Error: payment method not found"
    if payment_method["source"] == "gift_card" and payment_method["balance"] < diff_price:
        return "Error: insufficient gift card balance to pay for the new item"

    order["payment_history"].append(
        {
            "transaction_type": "payment" if diff_price > 0 else "refund",
            "amount": abs(diff_price),
            "payment_method_id": payment_method_id,
        }
    )
    if payment_method["source"] == "gift_card":
        _add_balance(payment_method, -diff_price)
    variants_of = data["products"]
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        # Re-looked-up after each swap, as the benchmark does, so duplicates (and a new
        # id equal to a later old id) resolve to the same line items it picks.
        item = [item for item in order["items"] if item["item_id"] == item_id][0]
        variant = variants_of[item["product_id"]]["variants"][new_item_id]
        item["item_id"] = new_item_id
        item["price"] = variant["price"]
        item["options"] = copy.deepcopy(variant["options"])
    order["status"] = "pending (item modified)"
    return json.dumps(order)


def modify_pending_order_payment(data: Data, order_id: str, payment_method_id: str) -> str:
    """Move a ``pending`` order's single payment to another of the user's methods.

    Appends a ``"payment"`` of the full amount on the new method, then a ``"refund"``
    to the original one. A gift card paying needs balance >= amount and is debited;
    a gift card refunded is credited; balances rounded to 2 decimals. Returns
    ``json.dumps`` of the order.
    """
    order, error = _pending_order(data, order_id, "modified")
    if error:
        return error
    methods = data["users"][order["user_id"]]["payment_methods"]
    if payment_method_id not in methods:
        return "Error: payment method not found"
    history = order["payment_history"]
    if len(history) > 1 or history[0]["transaction_type"] != "payment":
        return "Error: there should be exactly one payment for a pending order"
    old_method_id = history[0]["payment_method_id"]
    if old_method_id == payment_method_id:
        return "Error: the new payment method should be different from the current one"
    amount = history[0]["amount"]
    payment_method = methods[payment_method_id]
    if payment_method["source"] == "gift_card" and payment_method["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the order"
    old_method = methods[old_method_id] if "gift_card" in old_method_id else None

    history.extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_method_id},
        ]
    )
    if payment_method["source"] == "gift_card":
        _add_balance(payment_method, -amount)
    if old_method is not None:
        _add_balance(old_method, amount)
    return json.dumps(order)


def modify_user_address(
    data: Data, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Replace a user's default address; returns ``json.dumps`` of the user."""
    if user_id not in data["users"]:
        return "Error: user not found"
    user = data["users"][user_id]
    user["address"] = _address(address1, address2, city, state, country, zip)
    return json.dumps(user)


def return_delivered_order_items(
    data: Data, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    """Request a return of items of a ``delivered`` order (policy: refund to the
    original payment method or an existing gift card).

    Moves no money now: status ``"return requested"``, ``return_items`` (sorted ids)
    and ``return_payment_method_id`` are added. Returns ``json.dumps`` of the order.
    """
    order, error = _delivered_order(data, order_id, "returned")
    if error:
        return error
    if payment_method_id not in data["users"][order["user_id"]]["payment_methods"]:
        return "Error: payment method not found"
    if (
        "gift_card" not in payment_method_id
        and payment_method_id != order["payment_history"][0]["payment_method_id"]
    ):
        return "Error: payment method should be either the original payment method or a gift card"
    if _missing_item(order, item_ids) is not None:
        return "Error: some item not found"
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return json.dumps(order)


def exchange_delivered_order_items(
    data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Request an exchange of items of a ``delivered`` order for available variants
    of the same products.

    Moves no money now: status ``"exchange requested"``, ``exchange_items`` and
    ``exchange_new_items`` (each sorted), ``exchange_payment_method_id`` and
    ``exchange_price_difference`` (rounded to 2 decimals) are added; a gift card
    needs balance >= the difference. Returns ``json.dumps`` of the order.
    """
    order, error = _delivered_order(data, order_id, "exchanged")
    if error:
        return error
    diff_price, error = _item_change_difference(data, order, item_ids, new_item_ids)
    if error:
        return error
    diff_price = round(diff_price, 2)
    payment_method = data["users"][order["user_id"]]["payment_methods"].get(payment_method_id)
    if payment_method is None:
        return "Error: payment method not found"
    if payment_method["source"] == "gift_card" and payment_method["balance"] < diff_price:
        return "Error: insufficient gift card balance to pay for the price difference"
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff_price
    return json.dumps(order)


def transfer_to_human_agents(data: Data, summary: str) -> str:
    """Hand the conversation to a human; changes no data (statekeeper opens a ticket)."""
    return "Transfer successful"


# ---------------------------------------------------------------- registry

TOOLS: dict[str, Callable[..., str]] = {
    f.__name__: f
    for f in (
        find_user_id_by_email,
        find_user_id_by_name_zip,
        get_user_details,
        get_order_details,
        get_product_details,
        list_all_product_types,
        calculate,
        think,
        modify_pending_order_address,
        modify_user_address,
        cancel_pending_order,
        modify_pending_order_items,
        modify_pending_order_payment,
        return_delivered_order_items,
        exchange_delivered_order_items,
        transfer_to_human_agents,
    )
}

TOOL_CLASS: dict[str, ToolClass] = {**MODEL_TOOL_CLASS, "transfer_to_human_agents": ToolClass.IRREVERSIBLE_WRITE}
"""Every tool's class. A reversible write can be undone by another call of the same
tool; irreversible ones move money, change status for good, or hand off to a human."""


def run_tool(data: Data, name: str, kwargs: dict[str, Any]) -> str:
    """Run tool ``name`` with ``kwargs`` against ``data`` (mutated in place on success).

    Returns the benchmark's result string. As the benchmark's environment does, an
    exception inside a tool (e.g. a missing or unexpected argument) becomes
    ``"Error: <message>"``. Raises :class:`UnknownToolError` for an unknown name.
    """
    tool = TOOLS.get(name)
    if tool is None:
        raise UnknownToolError(name)
    try:
        return tool(data, **kwargs)
    except Exception as e:  # noqa: BLE001 - mirrors tau_bench Env.step
        return f"Error: {e}"
