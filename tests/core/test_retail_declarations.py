"""The retail system's pure parts: the reason a refusal result carries, and the checks
its ``read_tool``/``write_tool`` decorators make when a tool is declared.

The system's interface on real databases is tests/activities/test_retail_system.py, which
borrows ``scratch_registry`` from here.
"""

from __future__ import annotations

import pytest

from systems.retail.outcome import refusal_reason
from systems.retail.rows import ById, Rows, Section
from systems.retail.tools import TOOL_SPECS, ToolClass, read_tool, registry, write_tool


def test_refusal_reason():
    assert refusal_reason("Error: order not found") == "order not found"
    assert refusal_reason("Error: x: y") == "x: y"
    with pytest.raises(ValueError):
        refusal_reason('{"order_id": "#W1"}')


@pytest.fixture
def scratch_registry(monkeypatch):
    """Tools registered in a test vanish afterwards (TOOLS/TOOL_CLASS keep the 16)."""
    for name in ("_SPECS", "_FUNCTIONS", "_CLASSES"):
        monkeypatch.setattr(registry, name, dict(getattr(registry, name)))


def test_declarations_are_checked_at_registration(scratch_registry):
    with pytest.raises(ValueError, match="read-only"):
        write_tool(locks=Rows.ALL_PRODUCTS)(lambda data: "")
    with pytest.raises(TypeError, match="product_id"):
        @read_tool(loads=Rows.PRODUCT)
        def item_details(data: dict, item_id: str) -> str:
            return ""
    with pytest.raises(TypeError, match="data"):
        @read_tool
        def no_data(orders: dict) -> str:
            return ""
    with pytest.raises(ValueError, match="already registered"):
        @read_tool
        def calculate(data: dict, expression: str) -> str:
            return ""
    with pytest.raises(TypeError):
        read_tool(loads=ById(Section.ORDERS, "order_id"))(lambda data, order_id: "")
    assert TOOL_SPECS["calculate"].tool_class is ToolClass.READ
