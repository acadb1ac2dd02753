"""Typed results of the retail system of record.

A call either ran (:attr:`Outcome.APPLIED`) or the system refused it as a business
error (:attr:`Outcome.REFUSED`: the tool answered ``"Error: ..."``). Infrastructure
failures are not outcomes: they raise, and the caller must treat the effect of a write
as unknown until a retry with the same idempotency key tells it.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict

ERROR_PREFIX = "Error"
"""Every refusal starts with it (the benchmark's ``"Error: <reason>"``)."""


def is_refusal(result: str) -> bool:
    """True if a tool's result text is a business error (starts with ``"Error"``)."""
    return result.startswith(ERROR_PREFIX)


def refusal_reason(result: str) -> str:
    """The reason of a refusal: ``"Error: order not found"`` -> ``"order not found"``.
    Raises ``ValueError`` if ``result`` is not a refusal."""
    if not is_refusal(result):
        raise ValueError(f"not a refusal: {result[:80]!r}")
    return result.removeprefix(ERROR_PREFIX).removeprefix(":").removeprefix(" ")


class WriteOutcome(BaseModel):
    """Result of :meth:`~systems.retail.backend.RetailBackend.write`.

    ``result``: the tool's result string; ``ok``: False when it starts with "Error";
    ``replayed``: True when the key was already in the ledger and the recorded result
    was returned without applying anything.
    """

    model_config = ConfigDict(frozen=True)
    result: str
    ok: bool
    replayed: bool


class Outcome(str, Enum):
    """What the system did with a call."""

    APPLIED = "applied"
    """The tool ran: a read answered, a write took effect (or only recorded, for a transfer)."""
    REFUSED = "refused"
    """A business error: the tool answered ``"Error: ..."`` and changed nothing."""


class InvokeResult(BaseModel):
    """Result of :meth:`~systems.retail.backend.RetailBackend.invoke`.

    ``result``: the tool's full result text (JSON, an id, ``"Error: ..."``);
    ``reason``: for a refusal, the text without the ``"Error: "`` prefix, else None;
    ``replayed``: True for a write whose idempotency key was already recorded (the
    recorded result is returned, nothing is applied again); always False for a read.
    """

    model_config = ConfigDict(frozen=True)
    tool: str
    outcome: Outcome
    result: str
    reason: str | None = None
    replayed: bool = False

    @property
    def applied(self) -> bool:
        """True if the outcome is :attr:`Outcome.APPLIED`."""
        return self.outcome is Outcome.APPLIED

    @property
    def refused(self) -> bool:
        """True if the outcome is :attr:`Outcome.REFUSED`."""
        return self.outcome is Outcome.REFUSED

    @classmethod
    def of(cls, tool: str, result: str, *, replayed: bool = False) -> InvokeResult:
        """Classify ``result`` (see :func:`is_refusal`)."""
        if is_refusal(result):
            return cls(tool=tool, outcome=Outcome.REFUSED, result=result, reason=refusal_reason(result),
                       replayed=replayed)
        return cls(tool=tool, outcome=Outcome.APPLIED, result=result, replayed=replayed)
