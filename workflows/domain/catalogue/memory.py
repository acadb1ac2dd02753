"""Memory tools: what statekeeper remembers about the customer across conversations
(``docs/memory.md``), kept by statekeeper itself (``System.MEMORY``), never by the retail system.

- ``get_remembered_facts``: read once, right after the profile (state-driven); its facts land
  on the customer (``Customer.memory``) with their source and age. A refund method the profile
  does not list is flagged ``contradicted`` and is never used.
- ``remember_fact``: a write the user confirms. Its check is the memory rule
  (``workflows.domain.memory.fact_problem``) against the profile as read in this conversation,
  plus the user's own words: ``quote`` must be verbatim in the user's message of the turn that
  proposed it (nothing from a summary or the model's own text).
- ``forget_fact``: a write the user confirms; one kind, or ``all``. Forgetting what is not
  kept applies with nothing removed.

Both writes are ``IRREVERSIBLE_WRITE`` in this code base's sense: a reversible write names a
compensation built from the subject's document as the system of record returns it (its
before-image); a fact's before-image is not in the customer's document, and the customer
corrects a fact by remembering another value or forgetting it, so a rollback cancel leaves
what they confirmed in place.

The source conversation and turn of a remembered fact come from the write's idempotency key
(``remember_fact:<user_id>:<conversation>.t<turn>``, ``workflows.domain.keys``).

Pure and deterministic: imported inside the workflow sandbox.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import Field

from workflows.domain.catalogue.spec import Scope, System, ToolArgs, ToolClass, ToolSpec
from workflows.domain.memory import MAX_VALUE_CHARS, FactKind, fact_problem, instruction_problem, sensitive_problem
from workflows.domain.policy.clauses import PolicyViolation, Rule, require
from workflows.domain.records import MEMORY_FACTS_KEPT, OrderFact, Phase, RememberedFact, Role, StepStatus

if TYPE_CHECKING:
    from workflows.domain.state import ConversationState

USER_ID = Field(min_length=1, max_length=100)
KINDS = tuple(kind.value for kind in FactKind)
KindName = Literal["refund_method", "delivery_instructions", "preferred_language", "open_complaint"]
if set(KINDS) != set(KindName.__args__):  # type: ignore[attr-defined]
    raise ValueError("the memory tools' kinds differ from FactKind")

MIN_QUOTE_WORDS = 3
"""A quote shorter than this many words must be the user's whole message: a letter or a word
taken out of a message proves nothing about what the user asked to be remembered."""
READ_TOOL = "get_remembered_facts"
REMEMBER_TOOL = "remember_fact"
FORGET_TOOL = "forget_fact"
MEMORY_TOOLS = frozenset({READ_TOOL, REMEMBER_TOOL, FORGET_TOOL})
"""The memory tools' names (prompt versions before memory withhold them)."""
KIND_WORDS = {
    "refund_method": "refunds go to {value}",
    "delivery_instructions": "your delivery instructions are: {value}",
    "preferred_language": "your preferred language is {value}",
    "open_complaint": "you have an open complaint: {value}",
}


class GetRememberedFactsArgs(ToolArgs):
    user_id: str = USER_ID


class RememberFactArgs(ToolArgs):
    """``quote``: the user's words asking for it, verbatim from their message."""

    user_id: str = USER_ID
    kind: KindName
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    complaint_order_id: str = Field(default="", max_length=100)
    """The order an open complaint is about; empty for the other kinds (not ``order_id``: the
    subject of a memory write, which names its idempotency key, is the customer)."""
    quote: str = Field(min_length=1, max_length=500)


class ForgetFactArgs(ToolArgs):
    user_id: str = USER_ID
    kind: Literal["refund_method", "delivery_instructions", "preferred_language", "open_complaint", "all"]


# --- the read ---------------------------------------------------------------------------


def due_read(state: ConversationState) -> list[dict[str, Any]]:
    """``get_remembered_facts``: once, after the authenticated customer's profile is loaded."""
    customer = state.customer
    if customer is None or not customer.details_loaded or customer.memory is not None:
        return []
    return [{"user_id": customer.user_id}]


def read_fold(state: ConversationState, args: dict[str, Any], result: str) -> str:
    """Fold ``{"facts": [{kind, value, order_id, source: {conversation_id, turn, words},
    age_days}]}`` onto the customer (at most ``MEMORY_FACTS_KEPT``), flagging what the loaded
    profile contradicts."""
    customer = state.customer
    if customer is None or args.get("user_id") != customer.user_id:
        return result
    facts = []
    for fact in json.loads(result).get("facts", [])[:MEMORY_FACTS_KEPT]:
        source = fact.get("source") or {}
        facts.append(RememberedFact(
            kind=fact["kind"], value=fact["value"], order_id=fact.get("order_id"),
            conversation=source.get("conversation_id", ""), turn=source.get("turn", 0),
            words=source.get("words", ""), age_days=max(0, int(fact.get("age_days", 0))),
            contradicted=_contradicted(state, fact["kind"], fact["value"], fact.get("order_id"))))
    customer.memory = facts
    return result


def _contradicted(state: ConversationState, kind: str, value: str, order_id: Optional[str]) -> bool:
    """Whether the profile as read now says otherwise: a refund method it does not list, a
    complaint about an order not among theirs."""
    customer = state.customer
    if customer is None or not customer.details_loaded:
        return False
    if kind == FactKind.REFUND_METHOD.value:
        return value not in customer.payment_methods
    if kind == FactKind.OPEN_COMPLAINT.value:
        return order_id not in customer.order_ids
    return False


def usable(state: ConversationState, kind: FactKind) -> Optional[RememberedFact]:
    """The remembered fact of ``kind`` that may shape a proposal (read, not contradicted), or None."""
    customer = state.customer
    memory = customer.memory if customer is not None else None
    return next((f for f in memory or [] if f.kind == kind.value and not f.contradicted), None)


# --- the writes -------------------------------------------------------------------------


def _proposal_turns(state: ConversationState) -> set[int]:
    """The user turns whose message the quote may come from: the current one (a proposal), and
    the one of the remembering step awaiting the user's yes (the check runs again when they
    confirm, a turn later)."""
    shown = {s.turn for s in state.steps if s.name == REMEMBER_TOOL and s.status is StepStatus.PENDING}
    return {state.turn} | shown


def remember_check(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """memory-fact: the memory rule against the profile read in this conversation, the user's
    own words, and no cancel pending. Raises ``PolicyViolation``."""
    require(state.phase is not Phase.CLOSING, Rule.CANCELLED,
            "the conversation is being cancelled: nothing new is remembered")
    customer = state.customer
    assert customer is not None  # scope CUSTOMER
    require(customer.details_loaded, Rule.CHECK_STATUS,
            "read the customer's details first: a fact is checked against them")
    messages = [state.user_message(turn) or "" for turn in _proposal_turns(state)]
    quote = args["quote"]
    require(any(quote in m for m in messages) and (len(quote.split()) >= MIN_QUOTE_WORDS
                                                   or any(quote.strip() == m.strip() for m in messages)),
            Rule.MEMORY_FACT, f"quote the user's own words asking for it from their current message, verbatim "
            f"(at least {MIN_QUOTE_WORDS} words, or the whole message)")
    # the quote is kept as the fact's source and shown in later conversations: it may hold
    # nothing sensitive and no instruction about requests, as the fact itself may not
    sensitive = sensitive_problem(quote)
    if sensitive is not None:
        raise PolicyViolation(Rule.MEMORY_FACT, f"{sensitive}, not even in the words a fact is kept with")
    instruction = instruction_problem(quote)
    if instruction is not None:
        raise PolicyViolation(Rule.MEMORY_FACT, f"{instruction}, not even in the words a fact is kept with")
    require(args["kind"] == FactKind.OPEN_COMPLAINT.value or not args.get("complaint_order_id"), Rule.MEMORY_FACT,
            "an order is remembered only with a complaint about it")
    problem = fact_problem(FactKind(args["kind"]), args["value"], payment_method_ids=customer.payment_methods,
                           order_ids=customer.order_ids, addresses=(), order_id=args.get("complaint_order_id") or None)
    if problem is not None:
        raise PolicyViolation(Rule.MEMORY_FACT, problem)


def forget_check(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """No cancel pending. Raises ``PolicyViolation``."""
    require(state.phase is not Phase.CLOSING, Rule.CANCELLED, "the conversation is being cancelled")


def remember_detail(state: ConversationState, args: dict[str, Any]) -> str:
    """"Remember that refunds go to your gift card (gift_card_0000000)"."""
    value = args["value"]
    if args["kind"] == "refund_method" and state.customer and value in state.customer.payment_methods:
        display = state.customer.payment_methods[value].display
        value = f"{display} ({value})" if display else value
    elif args.get("complaint_order_id"):
        value = f"{value} (order {args['complaint_order_id']})"
    return f"Remember for your next conversations that {KIND_WORDS[args['kind']].format(value=value)}."


def forget_detail(state: ConversationState, args: dict[str, Any]) -> str:
    """"Forget everything remembered about you" or one kind, and whether anything of it is
    remembered now (forgetting nothing still applies)."""
    kind = args["kind"]
    said = ("Forget everything remembered about you." if kind == "all"
            else f"Forget what is remembered about you: your {kind.replace('_', ' ')}.")
    memory = state.customer.memory if state.customer is not None else None
    if memory is not None and not any(kind in ("all", f.kind) for f in memory):
        said += " Nothing of that is remembered now."
    return said


def remember_fold(state: ConversationState, args: dict[str, Any], result: str) -> str:
    """The fact just remembered (``{"fact_id", "kind", "kept"}``: the result holds no value, the
    arguments do) replaces the customer's fact of its kind; when another conversation confirmed
    a value later (``kept`` False), that one stays and the customer's facts are left as read."""
    customer = state.customer
    if customer is None or not json.loads(result).get("kept", False):
        return result
    quote = args["quote"]
    turn = next((t.turn for t in reversed(state.recent_turns) if t.role is Role.USER and quote in t.text), state.turn)
    order_id = args.get("complaint_order_id") or None
    kept = RememberedFact(kind=args["kind"], value=args["value"].strip(), order_id=order_id,
                          conversation=state.conversation_id, turn=turn, words=quote, age_days=0,
                          contradicted=_contradicted(state, args["kind"], args["value"].strip(), order_id))
    others = [f for f in customer.memory or [] if f.kind != kept.kind]
    customer.memory = [*others, kept][-MEMORY_FACTS_KEPT:]
    return result


def forget_fold(state: ConversationState, args: dict[str, Any], result: str) -> str:
    """The forgotten kinds leave the customer's facts."""
    customer = state.customer
    if customer is not None and customer.memory is not None:
        customer.memory = [f for f in customer.memory if args["kind"] not in ("all", f.kind)]
    return result


POSITION = 60
"""Where these tools come in the catalogue (``workflows.domain.catalogue``): last, so the tools
every prompt version offers keep their order."""

SPECS = (
    ToolSpec(
        name=READ_TOOL, args=GetRememberedFactsArgs, tool_class=ToolClass.READ,
        description="Read what is remembered about the customer.",
        scope=Scope.CUSTOMER, system=System.MEMORY, fold=read_fold, state_driven=due_read,
    ),
    ToolSpec(
        name=REMEMBER_TOOL, args=RememberFactArgs, tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="kind refund_method|delivery_instructions|preferred_language|open_complaint; quote: their words.",
        scope=Scope.CUSTOMER, system=System.MEMORY, check=remember_check, detail=remember_detail,
        fold=remember_fold, noun="fact to remember", outcome_lookup=True,
        personal_data=frozenset({"value", "quote"}),
    ),
    ToolSpec(
        name=FORGET_TOOL, args=ForgetFactArgs, tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="kind or all.",
        scope=Scope.CUSTOMER, system=System.MEMORY, check=forget_check, detail=forget_detail, fold=forget_fold,
        noun="forgetting",
    ),
)
