"""The tool registry, filled by the ``@read_tool`` / ``@write_tool`` decorators.

A tool is one decorated pure function ``f(data, **arguments) -> str`` whose name is the
tool's name; the decorator records which rows the backend must load (and, for a
write, lock) before calling it (see :mod:`systems.retail.rows`). Nothing else lists
tools: the registry, :data:`TOOLS`, :data:`TOOL_CLASS` and the backend's row loading
all come from the declarations. Declarations are checked when the module defining
the tool is imported (``ValueError``/``TypeError``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, Callable, Mapping, TypeVar, overload

from systems.retail.errors import UnknownToolError
from systems.retail.rows import Rows, RowSet, Section

Data = dict[str, dict[str, Any]]
"""``{"orders": {order_id: order}, "products": {product_id: product}, "users": {user_id: user}}``."""

ToolFunction = Callable[..., str]
F = TypeVar("F", bound=ToolFunction)


class ToolClass(str, Enum):
    """How a tool touches the data: a read, a write another call of the same tool can
    undo, or one that cannot be undone (it moves money, changes an order's status for
    good, or hands off to a human)."""

    READ = "read"
    REVERSIBLE_WRITE = "reversible_write"
    IRREVERSIBLE_WRITE = "irreversible_write"


@dataclass(frozen=True)
class ToolSpec:
    """A registered tool: ``function`` and its declaration. ``locks`` (writes only) are
    loaded first, locked, in their order; ``loads`` after them, read-only."""

    name: str
    function: ToolFunction
    tool_class: ToolClass
    loads: RowSet
    locks: RowSet

    @property
    def is_read(self) -> bool:
        """True for a read tool (no idempotency key, nothing locked or saved)."""
        return self.tool_class is ToolClass.READ


_SPECS: dict[str, ToolSpec] = {}
_FUNCTIONS: dict[str, ToolFunction] = {}
_CLASSES: dict[str, ToolClass] = {}

TOOL_SPECS: Mapping[str, ToolSpec] = MappingProxyType(_SPECS)
"""Every registered tool's :class:`ToolSpec`, by name, in registration order (read-only view)."""
TOOLS: Mapping[str, ToolFunction] = MappingProxyType(_FUNCTIONS)
"""Every registered tool's pure function, by name (read-only view)."""
TOOL_CLASS: Mapping[str, ToolClass] = MappingProxyType(_CLASSES)
"""Every registered tool's :class:`ToolClass`, by name (read-only view)."""


def _register(function: ToolFunction, tool_class: ToolClass, loads: RowSet, locks: RowSet) -> None:
    name = function.__name__
    if name in _SPECS:
        raise ValueError(f"tool {name!r} is already registered")
    for declared in (loads, locks):
        if not isinstance(declared, RowSet):
            raise TypeError(f"tool {name!r}: declare rows with Rows.* / rows(...), not {declared!r}")
    if Section.PRODUCTS in locks.sections:
        raise ValueError(f"tool {name!r}: product rows are read-only; load them, do not lock them")
    parameters = list(inspect.signature(function).parameters)
    if not parameters or parameters[0] != "data":
        raise TypeError(f"tool {name!r}: the first parameter must be 'data'")
    missing = sorted((loads.arguments | locks.arguments) - set(parameters[1:]))
    if missing:
        raise TypeError(f"tool {name!r}: its rows are selected by {missing}, which it has no parameter for")
    _SPECS[name] = ToolSpec(name, function, tool_class, loads, locks)
    _FUNCTIONS[name] = function
    _CLASSES[name] = tool_class


@overload
def read_tool(function: F, /) -> F: ...
@overload
def read_tool(*, loads: RowSet = ...) -> Callable[[F], F]: ...


def read_tool(function: F | None = None, /, *, loads: RowSet = Rows.NOTHING) -> Any:
    """Register a read tool: ``@read_tool`` (no rows) or ``@read_tool(loads=Rows.X)``.

    ``loads`` must select every row the function may look at. Returns the function
    unchanged. Raises ``ValueError``/``TypeError`` for a bad declaration.
    """

    def register(f: F) -> F:
        _register(f, ToolClass.READ, loads, Rows.NOTHING)
        return f

    return register(function) if function is not None else register


@overload
def write_tool(function: F, /) -> F: ...
@overload
def write_tool(*, locks: RowSet = ..., loads: RowSet = ..., reversible: bool = ...) -> Callable[[F], F]: ...


def write_tool(function: F | None = None, /, *, locks: RowSet = Rows.NOTHING, loads: RowSet = Rows.NOTHING,
               reversible: bool = False) -> Any:
    """Register a write tool: ``@write_tool`` (no rows) or
    ``@write_tool(locks=Rows.X, loads=Rows.Y, reversible=False)``.

    ``locks``: the rows the function may change, locked (in order) for the transaction;
    only those are saved, and changing any other row is a bug the backend refuses
    (``RuntimeError``). ``loads``: rows it only reads (never products in ``locks``).
    ``reversible``: another call of the same tool can undo the effect. Returns the
    function unchanged. Raises ``ValueError``/``TypeError`` for a bad declaration.
    """

    def register(f: F) -> F:
        tool_class = ToolClass.REVERSIBLE_WRITE if reversible else ToolClass.IRREVERSIBLE_WRITE
        _register(f, tool_class, loads, locks)
        return f

    return register(function) if function is not None else register


def has_tool(name: str) -> bool:
    """True if ``name`` is a registered tool."""
    return name in _SPECS


def tool_spec(name: str) -> ToolSpec:
    """The :class:`ToolSpec` of ``name``. Raises :class:`UnknownToolError`."""
    spec = _SPECS.get(name)
    if spec is None:
        raise UnknownToolError(name)
    return spec


def is_read_tool(name: str) -> bool:
    """True for a read tool, False for a write. Raises :class:`UnknownToolError`."""
    return tool_spec(name).is_read


def is_write_tool(name: str) -> bool:
    """True for a write tool (reversible or not). Raises :class:`UnknownToolError`."""
    return not tool_spec(name).is_read


def run_tool(data: Data, name: str, kwargs: dict[str, Any]) -> str:
    """Run tool ``name`` with ``kwargs`` against ``data`` (mutated in place on success).

    Returns the benchmark's result string. As the benchmark's environment does, an
    exception inside a tool (e.g. a missing or unexpected argument) becomes
    ``"Error: <message>"``. Raises :class:`UnknownToolError` for an unknown name.
    """
    function = tool_spec(name).function
    try:
        return function(data, **kwargs)
    except Exception as e:  # noqa: BLE001 - mirrors tau_bench Env.step
        return f"Error: {e}"
