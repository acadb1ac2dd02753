"""The memory port: the memory tools (``workflows.domain.catalogue.memory``) over statekeeper's
own memory store (``activities.store.memory``), as a ``ToolPort``.

A conversation names its customer by user id and its store; the memory keeps facts by tenant
(the store's, ``tenant_of``), store and the customer's keyed pseudonym (``pseudonym``, the
worker's key: ``activities.identity``), never the id. A write's source conversation and turn
come from its idempotency key (``remember_fact:<user_id>:<conversation>.t<turn>``), the user's
words from its ``quote``, its time from this process's clock (UTC). Each write applies once per
key: its effect and its ledger row (``memory_writes``) commit together; a retry gets the
recorded result (``replayed``); the same key with other arguments is ``IdempotencyKeyConflict``.

Results hold no remembered value (a forgotten value must not live on in a ledger): a read
answers ``{"facts": [{kind, value, order_id, source: {conversation_id, turn, words}, age_days}]}``,
``remember_fact`` ``{"fact_id", "kind", "kept": bool}`` (False: another conversation confirmed
a value later, and that one stays), ``forget_fact`` ``{"forgotten": [kinds]}`` (empty: nothing
was kept, still applied).
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from sqlalchemy.engine import Connection

from activities.ports import Guard, PortError
from activities.store.memory import MemoryStore
from workflows.domain.catalogue.memory import FORGET_TOOL, READ_TOOL, REMEMBER_TOOL
from workflows.domain.contracts import Outcome, ToolResult
from workflows.domain.errors import ErrorType
from workflows.domain.keys import key_ref, operation_turn
from workflows.domain.memory import FactKind, FactSource, MemoryFact, expiry, fact_id, sensitive_problem
from workflows.domain.memory.facts import MAX_VALUE_CHARS
from workflows.domain.user_text import control_problem

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _digest(tool: str, arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([tool, arguments], sort_keys=True, default=str).encode()).hexdigest()


class MemoryPort:
    """The memory tools over ``store`` (a ``MemoryStore``, or a function making it at first use, so
    a worker starts while the journal's database does not answer); ``pseudonym(user_id)`` and
    ``tenant_of(store)`` name the customer's facts; ``retention_days`` overrides the kinds'
    retention (``Settings``)."""

    def __init__(self, store: "MemoryStore | Callable[[], MemoryStore]", pseudonym: Callable[[str], str],
                 tenant_of: Callable[[str], str], retention_days: Optional[dict[str, int]] = None,
                 clock: Clock = _utc_now) -> None:
        self._made: Optional[MemoryStore] = store if isinstance(store, MemoryStore) else None
        self._make = store if not isinstance(store, MemoryStore) else None
        self._lock = threading.Lock()
        self._pseudonym = pseudonym
        self._tenant_of = tenant_of
        self._retention = retention_days or {}
        self._clock = clock

    @property
    def _store(self) -> MemoryStore:
        with self._lock:
            if self._made is None:
                assert self._make is not None
                self._made = self._make()
            return self._made

    def has_store(self, store: str) -> bool:
        """Every store has a memory (empty until something is remembered)."""
        return True

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        """Run a memory tool (the ``ToolPort`` contract). Raises ``PortError`` (``InvalidArguments``)
        for another tool, a write without a key or a key that names no conversation turn."""
        if tool == READ_TOOL:
            if scope_user_id is not None and arguments["user_id"] != scope_user_id:
                return ToolResult(result="Error: user not found", outcome=Outcome.REFUSED)
            return self._read(store, arguments["user_id"])
        if tool not in (REMEMBER_TOOL, FORGET_TOOL):
            raise PortError(ErrorType.INVALID_ARGUMENTS, f"{tool} is not a memory tool")
        if idempotency_key is None:
            raise PortError(ErrorType.INVALID_ARGUMENTS, "a memory write needs its idempotency key")
        conversation = key_ref(idempotency_key).conversation
        if conversation is None:
            raise PortError(ErrorType.INVALID_ARGUMENTS, "a memory write's key names no conversation turn")
        turn = operation_turn(idempotency_key.rsplit(":", 1)[-1])
        tenant, customer, now = self._tenant_of(store), self._pseudonym(arguments["user_id"]), self._clock()
        digest = _digest(tool, arguments)

        def effect(conn: Connection) -> tuple[str, str]:
            if tool == FORGET_TOOL:
                kinds = None if arguments["kind"] == "all" else [FactKind(arguments["kind"])]
                return Outcome.APPLIED.value, json.dumps({"forgotten": self._store.forget_kinds(
                    conn, tenant, store, customer, kinds)})
            return self._remember(conn, tenant, store, customer, arguments, conversation, turn, now)

        row, replayed = self._store.apply_once(idempotency_key, tool, digest, customer, now, effect)
        if row.digest != digest:
            raise PortError(ErrorType.IDEMPOTENCY_KEY_CONFLICT, "this idempotency key was used for another call")
        return ToolResult(result=row.result, outcome=Outcome(row.outcome), replayed=replayed)

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        """The recorded outcome of a memory write (``replayed``), or None if it never applied.
        Raises ``PortError`` (conflict) when the key holds another call."""
        row = self._store.recorded(idempotency_key)
        if row is None:
            return None
        if row.digest != _digest(tool, arguments):
            raise PortError(ErrorType.IDEMPOTENCY_KEY_CONFLICT, "this idempotency key was used for another call")
        return ToolResult(result=row.result, outcome=Outcome(row.outcome), replayed=True)

    def _read(self, store: str, user_id: str) -> ToolResult:
        now = self._clock()
        facts = self._store.facts(self._tenant_of(store), self._pseudonym(user_id), now, store=store)
        return ToolResult(outcome=Outcome.APPLIED, result=json.dumps({"facts": [
            {"kind": f.kind.value, "value": f.value, "order_id": f.order_id,
             "source": f.source.model_dump(mode="json"), "age_days": max(0, (now - f.confirmed_at).days)}
            for f in facts]}))

    def _remember(self, conn: Connection, tenant: str, store: str, customer: str, arguments: dict[str, Any],
                  conversation: str, turn: int, now: datetime) -> tuple[str, str]:
        # the workflow checked the fact against the profile; what needs no profile is checked
        # again here, where the value is written
        value = arguments["value"].strip()
        problem = ("what to remember is too long" if len(value) > MAX_VALUE_CHARS else
                   control_problem(value, "what to remember") or control_problem(arguments["quote"], "the quote")
                   or sensitive_problem(value) or sensitive_problem(arguments["quote"]))
        if problem is not None:
            return Outcome.REFUSED.value, f"Error: {problem}"
        kind = FactKind(arguments["kind"])
        fact = MemoryFact(fact_id=fact_id(tenant, store, customer, kind), kind=kind, value=value,
                          order_id=arguments.get("complaint_order_id") or None,
                          source=FactSource(conversation_id=conversation, turn=turn, words=arguments["quote"]),
                          learnt_at=now, confirmed_at=now, expires_at=expiry(kind, now, self._retention))
        kept = self._store.remember_on(conn, tenant, store, customer, fact)
        same = kept.value == fact.value and kept.order_id == fact.order_id
        return Outcome.APPLIED.value, json.dumps({"fact_id": kept.fact_id, "kind": kind.value, "kept": same})


class AbsentMemory:
    """The memory tools where memory is turned off: the read answers that nothing is
    remembered, a write is refused with its reason."""

    OFF = "Error: this service does not remember anything between conversations"

    def has_store(self, store: str) -> bool:
        return True

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        if tool == READ_TOOL:
            return ToolResult(result=json.dumps({"facts": []}), outcome=Outcome.APPLIED)
        return ToolResult(result=self.OFF, outcome=Outcome.REFUSED)

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        return None
