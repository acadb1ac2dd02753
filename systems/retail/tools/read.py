"""The τ-bench retail read tools: pure functions over the benchmark's data dicts.

Each reproduces ``tau_bench/envs/retail/tools/*.py`` (sierra-research/tau-bench@59a200c)
with the same result strings (see :mod:`systems.retail.tools`). A new read tool is one
function here with ``@read_tool(loads=...)`` naming the rows it looks at
(:class:`~systems.retail.rows.Rows`); nothing else needs editing.
"""

from __future__ import annotations

import ast
import json
import operator
from typing import Any, Callable

from systems.retail.rows import Rows
from systems.retail.tools.registry import Data, read_tool


@read_tool(loads=Rows.USERS_BY_EMAIL)
def find_user_id_by_email(data: Data, email: str) -> str:
    """First user (in data order) whose email matches case-insensitively, else error."""
    for user_id, profile in data["users"].items():
        if profile["email"].lower() == email.lower():
            return user_id
    return "Error: user not found"


@read_tool(loads=Rows.USERS_BY_NAME)
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


@read_tool(loads=Rows.USER)
def get_user_details(data: Data, user_id: str) -> str:
    """``json.dumps`` of the user, or ``"Error: user not found"``."""
    if user_id in data["users"]:
        return json.dumps(data["users"][user_id])
    return "Error: user not found"


@read_tool(loads=Rows.ORDER)
def get_order_details(data: Data, order_id: str) -> str:
    """``json.dumps`` of the order, or ``"Error: order not found"``."""
    if order_id in data["orders"]:
        return json.dumps(data["orders"][order_id])
    return "Error: order not found"


@read_tool(loads=Rows.PRODUCT)
def get_product_details(data: Data, product_id: str) -> str:
    """``json.dumps`` of the product with all variants, or ``"Error: product not found"``."""
    if product_id in data["products"]:
        return json.dumps(data["products"][product_id])
    return "Error: product not found"


@read_tool(loads=Rows.ALL_PRODUCTS)
def list_all_product_types(data: Data) -> str:
    """``json.dumps`` of ``{product name: product_id}`` sorted by name."""
    product_dict = {p["name"]: p["product_id"] for p in data["products"].values()}
    return json.dumps(dict(sorted(product_dict.items())))


@read_tool(loads=Rows.ALL_PRODUCTS)
def get_item_details(data: Data, item_id: str) -> str:
    """τ²-bench's item lookup: ``json.dumps`` of ``{item_id, product_id, options,
    available, price}`` for the variant with that item id, or ``"Error: item not found"``."""
    for product_id, product in data["products"].items():
        variant = product["variants"].get(item_id)
        if variant is not None:
            return json.dumps({"item_id": item_id, "product_id": product_id, "options": variant["options"],
                               "available": variant["available"], "price": variant["price"]})
    return "Error: item not found"


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


def _eval(root: ast.AST) -> Any:
    # Same results as the benchmark's eval() over the whitelisted characters, but an
    # exponent tower like 9**9**9 fails fast instead of hanging the worker, and the tree is
    # walked with an explicit stack: "-----1" nests one level per sign, and evaluating must
    # not recurse as deep as the text is long.
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    values: list[Any] = []
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, ast.Expression):
            stack.append((node.body, False))
        elif isinstance(node, ast.Constant):
            values.append(node.value)
        elif not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(_operands(node)))
        else:
            values.append(_combine(node, values))
    return values[-1]


def _operands(node: ast.AST) -> list[ast.AST]:
    """The sub-expressions evaluated before ``node`` itself, in evaluation order."""
    if isinstance(node, ast.Tuple):
        return list(node.elts)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARYOPS:
        return [node.operand]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return [node.left, node.right]
    if isinstance(node, ast.Call):
        return [node.func]
    raise SyntaxError("invalid syntax")


def _combine(node: ast.AST, values: list[Any]) -> Any:
    """``node``'s value from its operands' values, popped off the end of ``values``."""
    if isinstance(node, ast.Tuple):
        count = len(node.elts)
        operands = values[len(values) - count:]
        del values[len(values) - count:]
        return tuple(operands)
    if isinstance(node, ast.UnaryOp):
        return _UNARYOPS[type(node.op)](values.pop())
    if isinstance(node, ast.BinOp):
        right, left = values.pop(), values.pop()
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
    func = values.pop()  # a Call: "(2)(3)"
    raise TypeError(f"'{type(func).__name__}' object is not callable")


@read_tool
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


@read_tool
def think(data: Data, thought: str) -> str:
    """Records nothing and returns ``""``; the thought lives only in the transcript."""
    return ""
