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

Layout: :mod:`.registry` (the ``@read_tool``/``@write_tool`` decorators and the
registry they fill), :mod:`.read` and :mod:`.write` (the tools, one decorated function
each), :mod:`.orders` (checks the write tools share). Importing this package imports
both tool modules, so the registry is complete whenever it is visible.
"""

from __future__ import annotations

from systems.retail.errors import UnknownToolError
from systems.retail.tools import read as _read
from systems.retail.tools import write as _write
from systems.retail.tools.registry import (
    TOOL_CLASS,
    TOOL_SPECS,
    TOOLS,
    Data,
    ToolClass,
    ToolSpec,
    has_tool,
    is_read_tool,
    is_write_tool,
    read_tool,
    run_tool,
    tool_spec,
    write_tool,
)
from systems.retail.tools.write import CANCEL_REASONS

del _read, _write

__all__ = [
    "CANCEL_REASONS",
    "TOOL_CLASS",
    "TOOL_SPECS",
    "TOOLS",
    "Data",
    "ToolClass",
    "ToolSpec",
    "UnknownToolError",
    "has_tool",
    "is_read_tool",
    "is_write_tool",
    "read_tool",
    "run_tool",
    "tool_spec",
    "write_tool",
]
