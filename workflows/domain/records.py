"""The typed records the conversation state is made of: customers, orders, products,
steps, turns, pinned facts, operations, rejections and usage.

Split from ``workflows.domain.state`` so that the tool catalogue (whose folds build these
records) and the state (whose pending confirmation holds a typed tool call) do not
import each other. Pure and deterministic: imported inside the workflow sandbox.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from workflows.domain.money import Money

RECENT_TURNS_KEPT = 12
"""Turns stored in state (the prompt shows fewer); older turns live on only as pinned facts."""
REJECTIONS_KEPT = 50
STEPS_KEPT = 100
OBSERVATIONS_KEPT = 12
OPERATIONS_KEPT = 200
"""Windows kept in the state itself (the workflow history keeps everything): the state is
carried through continue-as-new, so it must stay small whatever a model or user does."""
ORDERS_KEPT = 100
PRODUCTS_KEPT = 50
"""Orders and products kept in the state: the ones read last (an order a shown or confirmed
write names always stays)."""

RECORD_TEXT_CHARS = 200
"""Longest string read from a system of record (a value or a key), in characters."""
RECORD_FREE_TEXT_CHARS = 2000
"""Longest plain-text result of a tool (not a JSON document), in characters."""
RECORD_LIST_ITEMS = 100
RECORD_OBJECT_KEYS = 100
RECORD_DEPTH = 8
RECORD_RESULT_BYTES = 32 * 1024
"""The limits every tool result is cut to inside its activity, before it enters history
(``activities.record_limits``, which applies them); the records below declare the same
bounds, so a value kept in the state never exceeds them."""
CUT_PATHS_KEPT = 21
CUT_PATH_CHARS = 300
"""A record's ``cut`` list: at most 20 paths and a count of the rest, each this long at most."""


def cut_on_load(limit: int) -> BeforeValidator:
    """A validator cutting a string, list or dict longer than ``limit`` to its first ``limit``
    characters, items or keys, so a bound (``Field(max_length=limit)`` beside it) accepts
    every value a state may already hold (a state saved before the bound, carried through
    continue-as-new): cut, never refused."""
    def cut(value: Any) -> Any:
        if isinstance(value, (str, list)) and len(value) > limit:
            return value[:limit]
        if isinstance(value, dict) and len(value) > limit:
            return dict(list(value.items())[:limit])
        return value

    return BeforeValidator(cut)


RecordText = Annotated[str, cut_on_load(RECORD_TEXT_CHARS), Field(max_length=RECORD_TEXT_CHARS)]
"""A string read from a system of record (ids, names, statuses)."""
RecordOptions = Annotated[dict[str, Any], cut_on_load(RECORD_OBJECT_KEYS), Field(max_length=RECORD_OBJECT_KEYS)]
"""An item's options as read: at most 100 keys, each value within the record limits
(strings of 200 characters, 100 items, 8 levels: ``activities.record_limits``)."""
CutPaths = Annotated[list[Annotated[str, cut_on_load(CUT_PATH_CHARS), Field(max_length=CUT_PATH_CHARS)]],
                     cut_on_load(CUT_PATHS_KEPT), Field(max_length=CUT_PATHS_KEPT)]
"""What ``activities.record_limits`` cut from a document read (its ``"cut"`` list: JSON paths
with what was kept); empty when the document was read whole. Left out of dumps when empty."""


def _no_cut(value: list[str]) -> bool:
    return not value



TurnNumber = Annotated[int, Field(ge=0)]
"""A conversation turn (0 before the first message): bounded here as in every record built
from the state (``ModelRequest``, the journal's records), so a saved state with a negative
turn is refused when it is loaded instead of failing the run's workflow tasks later."""

class Record(BaseModel):
    """Base of every record of the state: a field this schema does not know is refused, not
    silently dropped (a state saved by another schema version must be migrated, never
    half-read; ``workflows.domain.migrations``)."""

    model_config = ConfigDict(extra="forbid")


class StepStatus(str, Enum):
    """Status of a business step: pending (awaiting confirmation), awaiting_approval
    (confirmed, waiting for a supervisor), running, done, cancelled, failed, compensated
    (done, then undone by its compensation after a rollback cancel), or unknown (escalated)."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"
    COMPENSATED = "compensated"
    AWAITING_APPROVAL = "awaiting_approval"
    UNKNOWN = "unknown"
    """Ran, but whether it took effect could not be shown: escalated to a human, never replayed."""


class ConversationStatus(str, Enum):
    """Whether the conversation still accepts messages (active) and how it finished. The
    workflow writes the first five; the last three are never stored: the client reports them
    for a run Temporal ended without the workflow's say (``starter.client.run_status``)."""

    ACTIVE = "active"
    ENDED = "ended"
    TRANSFERRED = "transferred"
    CANCELLED = "cancelled"
    ESCALATED = "escalated"
    TERMINATED = "terminated"
    TIMED_OUT = "timed_out"
    FAILED = "failed"


class Phase(str, Enum):
    """Where the conversation stands: the one value the main loop, the handlers' validators,
    the operators' view and the replies read. Set by ``workflows.domain.transitions`` only.

    - ``open``: serving messages, nothing awaits the user or a supervisor;
    - ``awaiting_confirmation``: a write is shown; the user's next message answers it;
    - ``awaiting_approval``: a confirmed write waits for a supervisor (messages are still
      served, and another write may be shown meanwhile: the approval is what operators see);
    - ``closing``: a cancel arrived; nothing new starts, the cancel path closes the conversation;
    - ``awaiting_resolution``: escalated, waiting for an operator to resolve an unknown outcome;
    - ``closed``: finished (``ConversationStatus`` says how).

    The status is ``active`` exactly in the first four (``active``)."""

    OPEN = "open"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    AWAITING_APPROVAL = "awaiting_approval"
    CLOSING = "closing"
    AWAITING_RESOLUTION = "awaiting_resolution"
    CLOSED = "closed"

    @property
    def serving(self) -> bool:
        """True while messages and supervisors' decisions are taken."""
        return self in (Phase.OPEN, Phase.AWAITING_CONFIRMATION, Phase.AWAITING_APPROVAL)

    @property
    def active(self) -> bool:
        """True while the conversation is not finished (its status is ``active``)."""
        return self.serving or self is Phase.CLOSING


class Role(str, Enum):
    """Who said a turn."""

    USER = "user"
    ASSISTANT = "assistant"


class Turn(Record):
    """One message; ``turn`` is the user-turn number it belongs to (1-based)."""

    turn: TurnNumber
    role: Role
    text: str


class PinnedFact(Record):
    """Something the user stated that the process depends on, kept verbatim forever.

    ``kind`` is one of: email, order_id, item_id, payment_method_id, user_id, zip,
    name, cancel_reason. ``value`` is the normalised value, ``verbatim`` the
    exact text span the user typed, ``turn`` the user turn it came from.
    """

    kind: str
    value: str
    verbatim: str
    turn: TurnNumber


class PaymentMethod(Record):
    """A customer's payment method as read from the system of record.
    ``balance`` is the gift-card balance, cent ``Decimal`` currency (None for other sources)."""

    id: RecordText
    source: RecordText
    balance: Optional[Money] = None
    display: Annotated[str, cut_on_load(2 * RECORD_TEXT_CHARS + 20), Field(max_length=2 * RECORD_TEXT_CHARS + 20)] = ""
    """"<brand> ending <last four>" from two record strings."""


MEMORY_FACTS_KEPT = 8
"""Remembered facts kept on the customer (one per kind: ``workflows.domain.memory.FactKind``)."""


def _is_none(value: object) -> bool:
    return value is None


def _is_false(value: bool) -> bool:
    return not value


class RememberedFact(Record):
    """A fact remembered about the customer in an earlier conversation (``docs/memory.md``), as
    read after authentication: ``kind`` and ``value`` (``order_id`` for a complaint), its source
    (``conversation``, user ``turn`` and the user's ``words``) and ``age_days`` (whole days since
    it was last confirmed). ``contradicted`` is True when the system of record says otherwise (a
    refund method that is not among the customer's payment methods): such a fact is shown, never used.
    Left out of dumps at their defaults: ``order_id`` None, ``contradicted`` False."""

    kind: Annotated[str, Field(max_length=40)]
    value: Annotated[str, cut_on_load(RECORD_TEXT_CHARS), Field(max_length=RECORD_TEXT_CHARS)]
    order_id: Annotated[Optional[str], Field(max_length=RECORD_TEXT_CHARS)] = Field(default=None,
                                                                                    exclude_if=_is_none)
    conversation: RecordText = ""
    turn: TurnNumber = 0
    words: Annotated[str, cut_on_load(500), Field(max_length=500)] = ""
    age_days: int = Field(default=0, ge=0)
    contradicted: bool = Field(default=False, exclude_if=_is_false)


def _not_read(value: Optional[list[RememberedFact]]) -> bool:
    return value is None


class Customer(Record):
    """The one customer this conversation serves (policy: one user per conversation)."""

    user_id: RecordText
    authenticated_via: Annotated[str, Field(max_length=20)]  # "email" or "name_zip"
    authenticated_turn: TurnNumber
    first_name: RecordText = ""
    last_name: RecordText = ""
    email: Annotated[str, cut_on_load(320), Field(max_length=320)] = ""
    """From the lookup's arguments (at most 320) or the record (at most 200)."""
    zip: RecordText = ""
    payment_methods: Annotated[dict[str, PaymentMethod], cut_on_load(RECORD_OBJECT_KEYS),
                               Field(max_length=RECORD_OBJECT_KEYS)] = Field(default_factory=dict)
    order_ids: Annotated[list[RecordText], cut_on_load(RECORD_LIST_ITEMS),
                         Field(max_length=RECORD_LIST_ITEMS)] = Field(default_factory=list)
    details_loaded: bool = False
    cut: CutPaths = Field(default_factory=list, exclude_if=_no_cut)
    memory: Annotated[Optional[list[RememberedFact]], Field(max_length=MEMORY_FACTS_KEPT)] = Field(
        default=None, exclude_if=_not_read)
    """The facts remembered about the customer, read once after their profile
    (``get_remembered_facts``); None: not read (and left out of dumps), empty: none kept."""


class OrderItem(Record):
    item_id: RecordText
    product_id: RecordText
    name: RecordText
    price: Money
    options: RecordOptions = Field(default_factory=dict)


class PaymentEntry(Record):
    """One ``payment_history`` entry; ``amount`` in cent ``Decimal`` currency."""

    transaction_type: RecordText
    amount: Money
    payment_method_id: RecordText


class OrderFact(Record):
    """An order as last read from (or written to) the system of record. ``cut`` names what the
    read's limits cut from it (``activities.record_limits``): an order read cut is shown, never
    changed here (its items, payments or total may be incomplete)."""

    order_id: RecordText
    user_id: RecordText
    status: RecordText
    items: Annotated[list[OrderItem], cut_on_load(RECORD_LIST_ITEMS),
                     Field(max_length=RECORD_LIST_ITEMS)] = Field(default_factory=list)
    payment_history: Annotated[list[PaymentEntry], cut_on_load(RECORD_LIST_ITEMS),
                               Field(max_length=RECORD_LIST_ITEMS)] = Field(default_factory=list)
    payment_method_ids: Annotated[list[RecordText], cut_on_load(RECORD_LIST_ITEMS),
                                  Field(max_length=RECORD_LIST_ITEMS)] = Field(default_factory=list)
    """Payment methods of the order's ``payment`` transactions, in order."""
    total: Money = Decimal("0.00")
    """Sum of the items' prices, cent ``Decimal`` currency."""
    read_turn: TurnNumber = 0
    cut: CutPaths = Field(default_factory=list, exclude_if=_no_cut)


class Variant(Record):
    item_id: RecordText
    options: RecordOptions = Field(default_factory=dict)
    available: bool
    price: Money


class ProductFact(Record):
    """A product as last read; ``cut`` as in ``OrderFact``."""

    product_id: RecordText
    name: RecordText
    variants: Annotated[dict[str, Variant], cut_on_load(RECORD_OBJECT_KEYS),
                        Field(max_length=RECORD_OBJECT_KEYS)] = Field(default_factory=dict)
    cut: CutPaths = Field(default_factory=list, exclude_if=_no_cut)


class Step(Record):
    """One business step of the process (e.g. "cancel #W123"), with explicit status."""

    step_id: str
    name: str
    status: StepStatus
    turn: TurnNumber
    operation_id: Optional[str] = None
    detail: str = ""
    error: Optional[str] = None


class Confirmation(Record):
    """The user's explicit yes, bound to the proposal that was awaiting confirmation when
    their message was accepted: its ``operation_id`` and the ``digest`` of its detail."""

    operation_id: str
    digest: str
    turn: TurnNumber
    verbatim: str


class CompletedOperation(Record):
    """A write that reached the system of record, with its idempotency key and result."""

    operation_id: str
    idempotency_key: str
    tool: str
    arguments: dict[str, Any]
    result: str
    ok: bool
    turn: TurnNumber
    child_workflow_id: Optional[str] = None
    undo_arguments: Optional[dict[str, Any]] = None
    """A reversible write's compensation arguments (its before-image), read from the system
    of record right before it ran; None for irreversible writes or when that read failed."""
    compensated: bool = False


class Observation(Record):
    """The result of a read tool, kept in a bounded window for the model."""

    tool: str
    arguments: dict[str, Any]
    result: str
    turn: TurnNumber


class Rejection(Record):
    """A proposal the workflow refused, with the policy rule and the reason."""

    turn: TurnNumber
    rule: str
    reason: str
    proposal: Optional[dict[str, Any]] = None


class Usage(Record):
    """Model calls made by the conversation, their token counts, and the last model id.

    ``input_tokens`` are the uncached input tokens (the provider's ``usage.input_tokens``),
    ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` the input read from / written
    to the prompt cache, ``output_tokens`` the output: summed over every model call.
    ``budget_tokens`` is the conversation's token budget (None: none), set from the run's input;
    past it the conversation is handed to a human (``workflows.conversation.budget``)."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    budget_tokens: Optional[int] = Field(default=None, ge=1)

    def total_tokens(self) -> int:
        """Every token the conversation's model calls processed: uncached input, cache reads,
        cache writes and output (what a token budget counts)."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens + self.output_tokens


class OutcomeResolution(Record):
    """An operator's resolution of a step whose outcome was unknown (escalated): after
    checking the system, ``applied`` or ``not_applied``. ``operator`` is the name the operator
    gave, ``actor`` the authenticated caller that sent it (``key:<id>``, ``local``, ``cli``);
    ``resolved_at`` the workflow's clock (UTC); ``told`` what the user was told."""

    step_id: str
    operation_id: Optional[str] = None
    outcome: str
    operator: str
    actor: Optional[str] = None
    note: str
    resolved_at: datetime
    told: str
