"""``ToolSpec``: everything statekeeper knows about one tool, declared once.

A spec says what the model may send (``args``), how the tool touches the world
(``tool_class``, ``system``, ``execution``), what the policy demands before it runs
(``scope``, ``status``, ``check``), what the user confirms (``detail``), how the result
changes the state (``fold``), the money it moves (``approval_amount``, ``refund_amount``,
``refunds``, ``payment_movements``), how it is named outside (``operation``, ``noun``),
what follows it (``notify``, ``compensation``), when the state alone calls for a read
(``state_driven``), and how it runs (``outcome_lookup``, ``locality``, ``personal_data``). Every per-tool fact the rest of the code uses is a field
of a spec or derived from the specs in ``workflows.domain.catalogue``: no other module
keeps a table keyed by tool name.

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
    MEMORY = "memory"
    """statekeeper's own memory of customers across conversations (``docs/memory.md``)."""


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
Refunds = Callable[["OrderFact", dict[str, Any], Mapping[str, Decimal]], bool]
"""Whether a write sends money back to the customer (same inputs as ``Amount``)."""
Movements = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
"""The money movements a write made, from the ``payment_history`` of the order it returned:
``{transaction_type: "payment" | "refund", amount, payment_method_id}`` each, in order, as
the payments service moves them (``activities.payments_port``)."""
StateDriven = Callable[["ConversationState"], list[dict[str, Any]]]
"""The arguments of the reads of a tool that the state calls for now, before the model is
asked (``workflows.domain.catalogue.state_reads``); empty when none."""


@dataclass(frozen=True)
class Notice:
    """The email a refund-type write sends its customer once applied: ``kind`` names it
    ("return": the subject reads "Your return request for order X"); ``body(order_id, order)``
    is its text, from the order document the write returned."""

    kind: str
    body: Callable[[str, dict[str, Any]], str]


@dataclass(frozen=True)
class ToolSpec:
    """One tool, declared once. See the module docstring for the role of each field.

    ``subject`` is the argument naming the business object the tool changes (the order or
    the customer); it enters idempotency keys and search attributes. ``notify`` is the
    email sent after a successful refund-type write (``Notice``).
    ``personal_data`` lists argument names holding personal data (kept out of logs).
    ``approval_amount`` (refund-type writes) is the money the write moves, for supervisor
    approvals (``workflows.domain.policy.approvals``); ``refunds`` says whether it sends that
    money back to the customer (the approval rules refund-elsewhere and repeat-refund);
    ``refund_destination`` names the argument of the payment method that receives refunds,
    when the caller chooses it. ``refund_amount`` is the money refunded as operators see it
    on the refund's view (``workflows.refund.view``), None where it depends on prices outside
    the order. ``payment_movements`` (writes that move money at once) gives what the
    payments service moves; None for a write that moves nothing now.
    ``operation`` (refund-type writes) is the write's name in a backend's standalone refund
    request (``POST /refunds``: ``"cancel"``); ``noun`` names the change in sentences
    callers read ("cancellation"). ``reads`` (a read) is the id argument whose document the
    read returns (``"order_id"``: the order), so other modules ask for a document, not a tool.
    ``state_driven`` (a read) gives the reads of this tool the state calls for before the model
    is asked (``workflows.domain.catalogue.state_reads``).
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
    notify: Optional[Notice] = None
    compensation: Optional[str] = None
    compensation_from: Optional[str] = None
    """Field of the subject's document (the user or order as read just before the write)
    whose value, with the subject id, makes the compensation's arguments (the before-image)."""
    approval_amount: Optional[Amount] = None
    refunds: Optional[Refunds] = None
    refund_destination: Optional[str] = None
    refund_amount: Optional[Amount] = None
    payment_movements: Optional[Movements] = None
    operation: Optional[str] = None
    noun: Optional[str] = None
    reads: Optional[str] = None
    state_driven: Optional[StateDriven] = None
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
        if self.execution is Execution.REFUND_WORKFLOW and (self.approval_amount is None or self.refunds is None):
            raise ValueError(f"{self.name}: a write that moves money needs its approval_amount and refunds")
        if self.execution is Execution.REFUND_WORKFLOW and not (self.operation and self.noun):
            raise ValueError(f"{self.name}: a refund-type write needs its operation name and noun")
        if self.reads is not None and (self.is_write or self.reads not in self.args.model_fields):
            raise ValueError(f"{self.name}: only a read returns a document, named by one of its arguments")
        if self.state_driven is not None and self.is_write:
            raise ValueError(f"{self.name}: only a read may run without the model proposing it")

    @property
    def is_write(self) -> bool:
        """True for reversible and irreversible writes."""
        return self.tool_class is not ToolClass.READ

    @property
    def moves_money(self) -> bool:
        """True for a write whose money the payments service moves (``payment_movements``)."""
        return self.payment_movements is not None

    @property
    def prices_new_items(self) -> bool:
        """True for an item change (``new_item_ids``): judging it needs the new variants' prices."""
        return "new_item_ids" in self.args.model_fields

    @property
    def subject(self) -> Optional[str]:
        """``order_id`` or ``user_id`` when the arguments carry one, else None."""
        fields = self.args.model_fields
        return next((name for name in ("order_id", "user_id") if name in fields), None)
