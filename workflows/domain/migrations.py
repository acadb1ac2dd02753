"""Reading a saved conversation state of any released schema version.

A state travels as JSON: a run's input (started with a state, or continued as new), a
stored dump, a fixture of a released version. ``load_state`` reads it: it checks
``schema_version``, brings an older state up to ``SCHEMA_VERSION`` through ``MIGRATIONS``
(one pure ``dict -> dict`` step per version), then validates the result, whose models
refuse unknown fields. Anything it cannot read raises ``StateIncompatible`` with a reason
a person can act on; nothing is silently dropped or guessed.

Adding a version: bump ``workflows.domain.state.SCHEMA_VERSION`` to N and add ``N-1: step`` to
``MIGRATIONS``, a pure function taking a version N-1 dict and returning a version N dict
(set ``schema_version``, values preserved); add a test per step and keep the stored
fixtures of every released version (``tests/histories/<release>/states/``) loading.

Pure and deterministic (no I/O, clock or randomness): runs inside the workflow when a run
starts or continues as new.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from workflows.domain.errors import ErrorType
from workflows.domain.money import money
from workflows.domain.state import SCHEMA_VERSION, ConversationState

Migration = Callable[[dict[str, Any]], dict[str, Any]]

ERRORS_SHOWN = 3
"""Validation errors named in a reason; the rest are counted."""


class StateIncompatible(ValueError):
    """A saved state this code cannot read: from a newer version, with a missing or invalid
    ``schema_version``, from a version older than the oldest migration, or failing
    validation after migration. ``reason`` says which, for a person (field paths and
    pydantic's messages, never the values: a state holds personal data)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def failure(self) -> ApplicationError:
        """The workflow failure of a run whose input state cannot be loaded: non-retryable
        (the same input fails the same way), type ``ErrorType.STATE_INCOMPATIBLE``; its
        message is what the Web UI and the client show."""
        return ApplicationError(f"the conversation's saved state cannot be loaded: {self.reason}",
                                type=ErrorType.STATE_INCOMPATIBLE.value, non_retryable=True)


# --- the steps ------------------------------------------------------------------------


def _to_cents(holder: Any, key: str) -> None:
    """``holder[key]`` as cent text (``826.7`` → ``"826.70"``) when it is a number; any
    other value is left for validation to name."""
    if isinstance(holder, dict) and isinstance(holder.get(key), (int, float)) and not isinstance(holder[key], bool):
        try:
            holder[key] = str(money(holder[key]))
        except ValueError:
            pass  # NaN, infinity: validation refuses it with the field's path


def _values(mapping: Any) -> list[Any]:
    return list(mapping.values()) if isinstance(mapping, dict) else []


def _items(sequence: Any) -> list[Any]:
    return list(sequence) if isinstance(sequence, list) else []


def v1_to_v2(state: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: money becomes cent ``Decimal`` (JSON text) instead of float: the
    customer's payment-method balances, each order's item prices, payment amounts and
    total, and each product variant's price. Values are kept (``826.7`` → ``"826.70"``)."""
    customer = state.get("customer")
    if isinstance(customer, dict):
        for method in _values(customer.get("payment_methods")):
            _to_cents(method, "balance")
    for order in _values(state.get("orders")):
        if not isinstance(order, dict):
            continue
        _to_cents(order, "total")
        for item in _items(order.get("items")):
            _to_cents(item, "price")
        for entry in _items(order.get("payment_history")):
            _to_cents(entry, "amount")
    for product in _values(state.get("products")):
        if isinstance(product, dict):
            for variant in _values(product.get("variants")):
                _to_cents(variant, "price")
    state["schema_version"] = 2
    return state


def v2_to_v3(state: dict[str, Any]) -> dict[str, Any]:
    """Version 2 → 3: the conversation's ``phase``, which version 2 left to be inferred: closed
    when the status is not ``active``; else awaiting approval while an approval is pending,
    awaiting confirmation while a write is shown, open otherwise. (A version-2 state never
    holds a cancel in progress nor a wait for an operator: both lived in the run, not the
    state.) Every other value is kept."""
    if state.get("status", "active") != "active":
        phase = "closed"
    elif any(isinstance(a, dict) and a.get("status") == "pending" for a in _items(state.get("approvals"))):
        phase = "awaiting_approval"
    elif state.get("pending_confirmation") is not None:
        phase = "awaiting_confirmation"
    else:
        phase = "open"
    state["phase"] = phase
    state["schema_version"] = 3
    return state


MIGRATIONS: dict[int, Migration] = {1: v1_to_v2, 2: v2_to_v3}
"""``version: step`` bringing a state of ``version`` to ``version + 1``; the chain runs
from a saved state's version up to ``SCHEMA_VERSION``."""

OLDEST_VERSION = min(MIGRATIONS, default=SCHEMA_VERSION)
"""The oldest schema version a state may be saved with (1: the first release, v0.1.0)."""


# --- loading --------------------------------------------------------------------------


def saved_version(raw: Any) -> int:
    """The ``schema_version`` of a saved state. Raises ``StateIncompatible`` when ``raw``
    is not a JSON object or its version is missing, not a whole number, older than
    ``OLDEST_VERSION`` or newer than ``SCHEMA_VERSION``."""
    if not isinstance(raw, dict):
        raise StateIncompatible(f"it is not a JSON object (got {type(raw).__name__})")
    if "schema_version" not in raw:
        raise StateIncompatible("it has no schema_version, so which fields it holds is unknown")
    version = raw["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise StateIncompatible(f"its schema_version must be a whole number, not {type(version).__name__}")
    if version > SCHEMA_VERSION:
        raise StateIncompatible(f"saved by a newer version ({version}) than this worker understands "
                                f"({SCHEMA_VERSION}); run a newer worker")
    if version < OLDEST_VERSION:
        raise StateIncompatible(f"saved with schema version {version}, older than the oldest this worker "
                                f"can migrate ({OLDEST_VERSION})")
    return version


def migrate(raw: Any) -> dict[str, Any]:
    """A copy of the saved state ``raw`` brought to ``SCHEMA_VERSION`` (``raw`` itself is
    not changed). Raises ``StateIncompatible`` as ``saved_version``."""
    version = saved_version(raw)
    state = copy.deepcopy(raw)
    while version < SCHEMA_VERSION:
        state = MIGRATIONS[version](state)
        version += 1
    return state


def load_state(raw: Any) -> ConversationState:
    """The ``ConversationState`` of a saved state of any supported version: migrated, then
    validated. Raises ``StateIncompatible`` (as ``saved_version``, or naming the fields
    that fail validation after migration: a wrongly typed value, a missing field, a field
    this version does not know)."""
    migrated = migrate(raw)
    try:
        return ConversationState.model_validate(migrated)
    except ValidationError as err:
        raise StateIncompatible(describe_invalid(err, version=raw["schema_version"])) from None


def describe_invalid(err: ValidationError, version: int) -> str:
    """The fields of ``err`` and what is wrong with each, e.g. ``field orders.#W1.total:
    an amount of money must be a number``; at most ``ERRORS_SHOWN``, the rest counted.
    Values are never quoted."""
    errors = err.errors(include_url=False, include_input=False)
    parts = [f"field {_path(e['loc'])}: {_message(e)}" for e in errors[:ERRORS_SHOWN]]
    more = len(errors) - ERRORS_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    migrated = f" and migrated to {SCHEMA_VERSION}" if version < SCHEMA_VERSION else ""
    return f"saved with schema version {version}{migrated}, it does not validate: " + "; ".join(parts)


def _path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(the state)"


def _message(error: dict[str, Any]) -> str:
    kind: Optional[str] = error.get("type")
    if kind == "extra_forbidden":
        return f"not a field of schema version {SCHEMA_VERSION}"
    if kind == "missing":
        return "required, but missing"
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def initial_state(conversation_id: str, store: str,
                  raw: Optional[dict[str, Any]]) -> tuple[ConversationState, Optional[StateIncompatible]]:
    """A run's state: a fresh one for ``conversation_id`` in ``store`` when ``raw`` is None,
    else ``load_state(raw)`` bound to ``conversation_id`` (a saved state resumed under a new
    id is that conversation's from now on: its journal, operation ids and idempotency keys
    use the new id). A saved state of another store is refused: its facts were read there.
    When loading fails: a fresh placeholder and the error (the run fails with it at once,
    and its handlers refuse with it meanwhile)."""
    fresh = ConversationState(conversation_id=conversation_id, store=store)
    if raw is None:
        return fresh, None
    try:
        state = load_state(raw)
    except StateIncompatible as err:
        return fresh, err
    if state.store != store:
        return fresh, StateIncompatible(f"saved for store {state.store!r}, but this conversation is in store "
                                        f"{store!r}")
    state.conversation_id = conversation_id
    return state, None
