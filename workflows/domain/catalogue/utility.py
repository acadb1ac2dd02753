"""Tools that touch no customer data: arithmetic and a scratchpad."""

from __future__ import annotations

from pydantic import Field

from workflows.domain.catalogue.spec import Scope, ToolArgs, ToolClass, ToolSpec


class CalculateArgs(ToolArgs):
    expression: str = Field(min_length=1, max_length=500)


class ThinkArgs(ToolArgs):
    thought: str = Field(max_length=4000)


POSITION = 50
"""Where these tools come in the catalogue (``workflows.domain.catalogue``), which is the order
the model reads them in."""

SPECS = (
    ToolSpec(
        name="calculate", args=CalculateArgs, tool_class=ToolClass.READ,
        description="Evaluate an arithmetic expression (numbers, + - * /, parentheses).",
        scope=Scope.OPEN,
    ),
    ToolSpec(
        name="think", args=ThinkArgs, tool_class=ToolClass.READ,
        description="Note a thought; changes nothing.",
        scope=Scope.OPEN,
    ),
)
