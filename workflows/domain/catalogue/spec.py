"""``ToolSpec``: everything statekeeper knows about one tool, declared once.

A spec says what the model may send (``args``), how the tool touches the world
(``tool_class``, ``system``, ``execution``), what the policy demands before it runs
(``scope``, ``status``, ``check``), what the user confirms (``detail``), how the result
changes the state (``fold``), and the room later features need (``compensation``,
``approval_amount``, ``outcome_lookup``, ``locality``, ``personal_data``). Every table
the rest of the code uses is derived from the specs in ``workflows.domain.catalogue``.

Pure and deterministic: imported inside the workflow sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from pydantic import BaseModel, ConfigDict

from workflows.domain.policy.clauses import Rule

if TYPE_CHECKING:
    from workflows.domain.records import OrderFact
    from workflows.domain.state import ConversationState


class ToolClass(str, Enum):
    """How a tool touches the system of record. Reads run at once and retry freely;
    writes need the user's confirmation and an idempotency key. A reversible write can
    be undone by its ``compensation``; an irreversible one moves money or changes a
    status for good."""

    READ = "read"
    REVERSIBLE_WRITE = "reversible_write"
    IRREVERSIBLE_WRITE = "irreversible_write"


class System(str, Enum):
    """The external system that owns a tool's effect (its system of record)."""

    RETAIL = "retail"


class Execution(str, Enum):
    """How a confirmed write runs: an activity of the conversation, or its own
    ``RefundWorkflow`` (fresh read → write → notify) when it moves money."""

    ACTIVITY = "activity"
    REFUND_WORKFLOW = "refund_workflow"


class Scope(str, Enum):
    """What the policy requires before a tool may run (clauses authenticate-first,
    one-customer, check-status)."""

    OPEN = "open"
    """Nothing: the tool touches no customer data."""
    IDENTIFY = "identify"
    """An identity lookup: with facts the user stated, for one customer only."""
    CUSTOMER = "customer"
    """An authenticated customer; a ``user_id`` argument must be theirs."""
    ORDER_LOOKUP = "order_lookup"
    """An authenticated customer; the system of record answers scoped to them, so another
    customer's order and a wrong id both come back as "not found"."""
    ORDER = "order"
    """An order of the customer read in this conversation, payment methods of theirs, and
    the order's status precondition (``status``)."""


class Locality(str, Enum):
    """Where the tool's activity runs (local activities skip the task queue round trip)."""

    REMOTE = "remote"
    LOCAL = "local"


class ToolArgs(BaseModel):
    """Base of every argument model: strict (unknown fields are a schema error, so an
    invented amount never reaches a tool) and frozen. Argument models constrain types
    and sizes only; business formats (an order id's shape) are judged by the system of
    record or the policy, with a reason the model can act on."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class StatusRequirement:
    """An order-state precondition (policy clause ``rule``): the order must be
    ``status``; ``once_status`` means the change was already made once (item-change-once);
    ``single_payment`` refuses orders whose payment was changed (cancel refunds every
    payment transaction). ``verb`` words the refusal ("cancelled", "returned")."""

    status: str
    rule: Rule
    verb: str
    once_status: Optional[str] = None
    single_payment: bool = False


Check = Callable[["ConversationState", dict[str, Any], Optional["OrderFact"]], None]
"""A tool's own policy check: raises ``PolicyViolation``; ``order`` is set for ORDER scope."""
Detail = Callable[["ConversationState", dict[str, Any]], str]
"""The exact detail of a write as shown to the user before they confirm."""
Fold = Callable[["ConversationState", dict[str, Any], str], str]
"""Folds a successful result into the state; returns the result as the model may see it."""
Amount = Callable[["OrderFact", dict[str, Any], Mapping[str, Decimal]], Decimal]
"""The money a write moves, decimal currency (for approval thresholds), from the typed order
as just read, the arguments, and the prices of new variants by item id (item changes);
see ``workflows.domain.catalogue.amounts``."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool, declared once. See the module docstring for the role of each field.

    ``subject`` is the argument naming the business object the tool changes (the order or
    the customer); it enters idempotency keys and search attributes. ``notify`` names the
    email sent after a successful refund-type write ("return", "exchange").
    ``personal_data`` lists argument names holding personal data (kept out of logs).
    ``approval_amount`` (refund-type writes) is the money the write moves, for supervisor
    approvals (``workflows.domain.policy.approvals``); ``refund_destination`` names the argument of the
    payment method that receives refunds, when the caller chooses it.
    """

    name: str
    args: type[ToolArgs]
    tool_class: ToolClass
    description: str
    scope: Scope
    system: System = System.RETAIL
    execution: Execution = Execution.ACTIVITY
    status: Optional[StatusRequirement] = None
    check: Optional[Check] = None
    detail: Optional[Detail] = None
    fold: Optional[Fold] = None
    notify: Optional[str] = None
    compensation: Optional[str] = None
    compensation_from: Optional[str] = None
    """Field of the subject's document (the user or order as read just before the write)
    whose value, with the subject id, makes the compensation's arguments (the before-image)."""
    approval_amount: Optional[Amount] = None
    refund_destination: Optional[str] = None
    outcome_lookup: bool = True
    locality: Locality = Locality.REMOTE
    personal_data: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.tool_class is not ToolClass.READ and self.detail is None:
            raise ValueError(f"{self.name}: a write needs the detail the user confirms")
        if self.execution is Execution.REFUND_WORKFLOW and self.scope is not Scope.ORDER:
            raise ValueError(f"{self.name}: a refund workflow acts on one order")
        if self.tool_class is ToolClass.REVERSIBLE_WRITE and not (self.compensation and self.compensation_from):
            raise ValueError(f"{self.name}: a reversible write names its compensation and its before-image")
        if self.execution is Execution.REFUND_WORKFLOW and self.approval_amount is None:
            raise ValueError(f"{self.name}: a write that moves money needs its approval_amount")

    @property
    def is_write(self) -> bool:
        """True for reversible and irreversible writes."""
        return self.tool_class is not ToolClass.READ

    @property
    def subject(self) -> Optional[str]:
        """``order_id`` or ``user_id`` when the arguments carry one, else None."""
        fields = self.args.model_fields
        return next((name for name in ("order_id", "user_id") if name in fields), None)
