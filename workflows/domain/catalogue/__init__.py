"""The tool catalogue: one ``ToolSpec`` per tool, and every table derived from them.

A tool is declared once, in the family module it belongs to (``customers``, ``orders``,
``delivered``, ``products``, ``utility``), and appears here by being in that module's
``SPECS``. Nothing else names it: the argument union the model fills, the classes, the
refund-type set, the status preconditions, the prompt's descriptions, policy routing,
the confirmation detail, state folding and execution all read the spec.

``transfer_to_human_agents`` is not a tool here: escalation is its own action
(``TransferAction``) so that it is never confused with a write.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from workflows.domain.catalogue import customers, delivered, orders, products, utility
from workflows.domain.catalogue.spec import (
    Execution,
    Locality,
    Scope,
    StatusRequirement,
    System,
    ToolArgs,
    ToolClass,
    ToolSpec,
)

_FAMILIES = (customers, orders, delivered, products, utility)

CATALOGUE: Mapping[str, ToolSpec] = MappingProxyType(
    {spec.name: spec for family in _FAMILIES for spec in family.SPECS}
)
"""Every tool the model may call, by τ-bench name, in declaration order."""

TOOL_ARGS: Mapping[str, type[ToolArgs]] = MappingProxyType({n: s.args for n, s in CATALOGUE.items()})
TOOL_CLASS: Mapping[str, ToolClass] = MappingProxyType({n: s.tool_class for n, s in CATALOGUE.items()})
REFUND_TOOLS = frozenset(n for n, s in CATALOGUE.items() if s.execution is Execution.REFUND_WORKFLOW)
"""Writes that move money; they run as their own ``RefundWorkflow``."""
REQUIRED_STATUS: Mapping[str, StatusRequirement] = MappingProxyType(
    {n: s.status for n, s in CATALOGUE.items() if s.status is not None}
)
ORDER_TOOLS = frozenset(n for n, s in CATALOGUE.items() if s.scope in (Scope.ORDER, Scope.ORDER_LOOKUP))


def spec_of(name: str) -> ToolSpec:
    """The spec of tool ``name``; raises ``KeyError`` for an unknown tool."""
    return CATALOGUE[name]


__all__ = [
    "CATALOGUE", "ORDER_TOOLS", "REFUND_TOOLS", "REQUIRED_STATUS", "TOOL_ARGS", "TOOL_CLASS",
    "Execution", "Locality", "Scope", "StatusRequirement", "System", "ToolArgs", "ToolClass", "ToolSpec",
    "spec_of",
]
