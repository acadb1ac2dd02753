"""The tool catalogue: one ``ToolSpec`` per tool, and every table derived from them.

A tool is declared once, in the family module it belongs to (``customers``, ``orders``,
``delivered``, ``products``, ``utility``, ...), and appears here by being in that module's
``SPECS``: every module of this package that declares ``SPECS`` is a family, placed by its
``POSITION`` (the order the model reads the tools in), so a new family is one new module.
Nothing else names a tool: the argument union the model fills, the classes, the refund-type
set, the status preconditions, the prompt's descriptions, policy routing, the confirmation
detail, state folding, execution, the money a write moves (approvals, the payments service,
the refund's view), the standalone refund API's operations and fields, and the reads of a
document all read the spec.

``transfer_to_human_agents`` is not a tool here: escalation is its own action
(``TransferAction``) so that it is never confused with a write.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import MappingProxyType, ModuleType
from typing import Mapping

from workflows.domain.catalogue.spec import (
    Execution,
    Locality,
    Notice,
    Scope,
    StatusRequirement,
    System,
    ToolArgs,
    ToolClass,
    ToolSpec,
)



def _families() -> list[ModuleType]:
    """The modules of this package that declare ``SPECS``, by ``POSITION`` (then name).
    Raises ``ValueError`` for a family without a ``POSITION``."""
    found = []
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        if hasattr(module, "SPECS"):
            if not isinstance(getattr(module, "POSITION", None), int):
                raise ValueError(f"{module.__name__} declares SPECS without its POSITION in the catalogue")
            found.append(module)
    return sorted(found, key=lambda module: (module.POSITION, module.__name__))


_FAMILIES = tuple(_families())

CATALOGUE: Mapping[str, ToolSpec] = MappingProxyType(
    {spec.name: spec for family in _FAMILIES for spec in family.SPECS}
)
if len(CATALOGUE) != sum(len(family.SPECS) for family in _FAMILIES):
    raise ValueError("two tools of the catalogue have the same name")
"""Every tool the model may call, by τ-bench name, in declaration order."""

TOOL_ARGS: Mapping[str, type[ToolArgs]] = MappingProxyType({n: s.args for n, s in CATALOGUE.items()})
TOOL_CLASS: Mapping[str, ToolClass] = MappingProxyType({n: s.tool_class for n, s in CATALOGUE.items()})
REFUND_TOOLS = frozenset(n for n, s in CATALOGUE.items() if s.execution is Execution.REFUND_WORKFLOW)
"""Writes that move money; they run as their own ``RefundWorkflow``."""
REQUIRED_STATUS: Mapping[str, StatusRequirement] = MappingProxyType(
    {n: s.status for n, s in CATALOGUE.items() if s.status is not None}
)
ORDER_TOOLS = frozenset(n for n, s in CATALOGUE.items() if s.scope in (Scope.ORDER, Scope.ORDER_LOOKUP))
STANDALONE_OPERATIONS: Mapping[str, str] = MappingProxyType(
    {s.operation: n for n, s in CATALOGUE.items() if s.execution is Execution.REFUND_WORKFLOW and s.operation}
)
"""A standalone refund request's ``operation`` → the refund-type write that performs it."""
READERS: Mapping[str, str] = MappingProxyType({s.reads: n for n, s in CATALOGUE.items() if s.reads})
"""An id argument (``order_id``, ``user_id``, ``product_id``) → the read returning its document."""
STATE_DRIVEN: tuple[ToolSpec, ...] = tuple(s for s in CATALOGUE.values() if s.state_driven is not None)
"""Reads the state may call for before the model is asked, in catalogue order (identity
lookups before the profile before orders): ``workflows.conversation.state_reads`` runs them."""
if len(STANDALONE_OPERATIONS) != len(REFUND_TOOLS) or len(READERS) != sum(1 for s in CATALOGUE.values() if s.reads):
    raise ValueError("two tools declare the same standalone operation or read the same document")


def spec_of(name: str) -> ToolSpec:
    """The spec of tool ``name``; raises ``KeyError`` for an unknown tool."""
    return CATALOGUE[name]


__all__ = [
    "CATALOGUE", "ORDER_TOOLS", "READERS", "REFUND_TOOLS", "REQUIRED_STATUS", "STANDALONE_OPERATIONS", "STATE_DRIVEN",
    "TOOL_ARGS",
    "TOOL_CLASS", "Execution", "Locality", "Notice", "Scope", "StatusRequirement", "System", "ToolArgs", "ToolClass",
    "ToolSpec",
    "spec_of",
]
