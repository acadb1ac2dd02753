"""Tool activities: thin adapters from the workflows' typed requests to the ports of
the external systems (reads, idempotent writes, the customer-email outbox, tickets).

Business refusals are results (``outcome=refused``), not exceptions: they are not
retried. Deterministic failures raise a non-retryable ``ApplicationError`` typed by
``ErrorType``. Other exceptions are infrastructure failures: Temporal retries them,
and a retried write carries the same idempotency key, so it never applies twice.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Optional, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deadline import attempt_deadline
from activities.heartbeat import heartbeating
from activities.payments_port import PaymentsPort, money_movements, payments_key
from activities.record_limits import RecordTooLarge, bound_result, skeleton, too_large_result
from activities.memory_port import AbsentMemory
from activities.ports import Guard, OutboxPort, PortError, TicketPort, ToolPort
from workflows.domain.actions import call_arguments
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.catalogue import System, spec_of
from workflows.domain.catalogue.checks import status_refusal
from workflows.domain.contracts import (
    EmailRequest,
    Outcome,
    ReadToolRequest,
    StoreCheckRequest,
    TicketLookup,
    TicketRequest,
    ToolResult,
    WriteToolRequest,
)
from workflows.domain.errors import ErrorType
from workflows.failures import FAILED_SYSTEM, PAYMENTS_AFTER_ORDER
from workflows.domain.state import ConversationState, Customer

T = TypeVar("T")


class ToolActivities(ToolActivitiesApi):
    """The tool activities over injected ports (``tools``, ``outbox``, ``tickets``, and
    ``payments``: when given, the money a write moved is moved there too, once per key);
    register ``instance.all()`` with the worker). The memory tools (``System.MEMORY``) run on
    ``memory`` (``activities.memory_port.MemoryPort``); without one, nothing is remembered
    (``AbsentMemory``)."""

    def __init__(self, tools: ToolPort, outbox: OutboxPort, tickets: TicketPort,
                 payments: Optional[PaymentsPort] = None, memory: Optional[ToolPort] = None) -> None:
        self._tools = tools
        self._memory: ToolPort = memory if memory is not None else AbsentMemory()
        self._outbox = outbox
        self._tickets = tickets
        self._payments = payments
        self.system_of_record = ""
        """The fingerprint of the database behind ``tools`` (set by ``worker.build_worker``);
        empty: not checked."""

    def _check_bound(self, bound: Optional[str]) -> None:
        # A process bound to another database must never read or write here: refuse before
        # touching anything (retryable: a worker on the right database may take the retry).
        if bound and self.system_of_record and bound != self.system_of_record:
            raise ApplicationError("this worker serves another system of record than the one this process is "
                                   "bound to; nothing was done", type=ErrorType.WRONG_SYSTEM_OF_RECORD.value)

    def _port(self, tool: str) -> ToolPort:
        """The port of the system that owns ``tool`` (its spec's ``system``)."""
        return self._memory if spec_of(tool).system is System.MEMORY else self._tools

    def _stamp(self, result: ToolResult) -> ToolResult:
        result.system_of_record = self.system_of_record or None
        return result

    @activity.defn
    async def run_read_tool(self, req: ReadToolRequest) -> ToolResult:
        """Run a read tool scoped to ``req.scope_user_id``. Raises ``ApplicationError``
        (``InvalidArguments``, non-retryable) for a write passed as a read."""
        if spec_of(req.call.name).is_write:
            raise _fatal(ErrorType.INVALID_ARGUMENTS, f"{req.call.name} is not a read tool")
        self._check_bound(req.system_of_record)
        args = call_arguments(req.call)
        result = await _call(self._port(req.call.name).invoke, req.store, req.call.name, args,
                             scope_user_id=req.scope_user_id)
        return self._stamp(_bounded_read(req.call, result))

    @activity.defn
    async def run_write_tool(self, req: WriteToolRequest) -> ToolResult:
        """Apply a write exactly once per idempotency key (effect and ledger row in one
        transaction of the system). A repeated key returns the recorded result with
        ``replayed=True``; the same key with other arguments is ``IdempotencyKeyConflict``."""
        if not spec_of(req.call.name).is_write:
            raise _fatal(ErrorType.INVALID_ARGUMENTS, f"{req.call.name} is not a write tool")
        if not req.idempotency_key.startswith(f"{req.call.name}:"):
            raise _fatal(ErrorType.INVALID_ARGUMENTS, "idempotency key does not belong to this tool")
        self._check_bound(req.system_of_record)
        args = call_arguments(req.call)
        result = await _call(self._port(req.call.name).invoke, req.store, req.call.name, args,
                             idempotency_key=req.idempotency_key, guard=status_guard(req.call.name, args))
        await self._move_money(req, args, result)
        return self._stamp(_bounded_write(req.call, result))

    async def _move_money(self, req: WriteToolRequest, args: dict[str, Any], result: ToolResult) -> None:
        # The order (system of record) already records the movements; the payments service
        # moves them, under a key derived from the write's. A retried write gets the recorded
        # order, hence the same movements under the same key: the money moves once.
        movements = money_movements(req.call.name, result.result) if result.ok else None
        if self._payments is None or not movements:
            return
        try:
            await _call(self._payments.move, payments_key(req.idempotency_key), args["order_id"], req.call.name,
                        movements)
        except ApplicationError as err:
            if err.type not in (ErrorType.INVALID_DATA.value, ErrorType.IDEMPOTENCY_KEY_CONFLICT.value):
                raise _payments_failure(err.message, err.type or "", err.non_retryable) from err
            # the order's write has committed: a refusal of its money is not "nothing was written"
            # (said of InvalidData, a refused change); a human must move the money or undo the write
            raise _payments_failure("the order was changed but the payments system refused its money movement "
                                    f"({err.type}): the money has not moved", ErrorType.OUTCOME_UNKNOWN.value,
                                    True) from err
        except Exception as err:  # noqa: BLE001 - unreachable, no answer: retried like any failure, then named
            raise _payments_failure(str(err), type(err).__name__, False) from err

    @activity.defn
    async def find_recorded_write(self, req: WriteToolRequest) -> Optional[ToolResult]:
        """Look a write's outcome up by its idempotency key before deciding anything (a reset
        or a retried refund must not re-check preconditions its own write already changed).
        Returns the recorded outcome (``replayed=True``) or None; ``IdempotencyKeyConflict``
        (non-retryable) when the key holds another call."""
        self._check_bound(req.system_of_record)
        args = call_arguments(req.call)
        recorded = await _call(self._port(req.call.name).recorded, req.store, req.call.name, args,
                               req.idempotency_key)
        if recorded is not None:
            # an applied write is only done once its money moved: found by the payments key, or
            # moved now if proven absent; ``OutcomeUnknown`` when the payments system cannot say
            await self._move_money(req, args, recorded)
            recorded = _bounded_write(req.call, recorded)
        return recorded

    @activity.defn
    async def peek_recorded_write(self, req: WriteToolRequest) -> bool:
        """Whether ``find_recorded_write`` has anything to do for ``req``: False when the ledger
        holds nothing under its idempotency key. Moves no money, so a refund may run it as a local
        activity. True also when the look-up refuses (another call under the key, an unknown
        store): ``find_recorded_write`` then raises that refusal as it always did."""
        self._check_bound(req.system_of_record)
        try:
            return await _call(self._port(req.call.name).recorded, req.store, req.call.name,
                               call_arguments(req.call), req.idempotency_key) is not None
        except ApplicationError as err:
            if err.non_retryable:  # a port refusal (``_fatal``): the activity reports it
                return True
            raise

    @activity.defn
    async def check_store(self, req: StoreCheckRequest) -> bool:
        """True if the system of record holds ``req.store``; an unknown store is a normal
        answer here (False), so the caller can refuse it with its own reason."""
        return await _call(self._tools.has_store, req.store)

    @activity.defn
    async def send_customer_email(self, req: EmailRequest) -> bool:
        """Put an email in the outbox once per ``message_key``; True if newly queued."""
        return await _call(self._outbox.enqueue_email, req.store, req.message_key, req.to_email, req.subject,
                           req.body)

    @activity.defn
    async def open_ticket(self, req: TicketRequest) -> bool:
        """Open a human-agent ticket once per ``ticket_key``; True if newly opened."""
        return await _call(self._tickets.open_ticket, req.store, req.ticket_key, req.user_id, req.summary)

    @activity.defn
    async def find_ticket(self, req: TicketLookup) -> bool:
        """True if the ticketing system holds a ticket under ``req.ticket_key`` (a read): the
        workflow asks before it acts on a write an earlier run may have handed to a human."""
        return await _call(self._tickets.ticket_opened, req.store, req.ticket_key)

    def all(self) -> list[Callable[..., Any]]:
        """The activity methods, for ``Worker(activities=...)``."""
        return [self.run_read_tool, self.run_write_tool, self.find_recorded_write, self.peek_recorded_write,
                self.check_store, self.send_customer_email, self.open_ticket, self.find_ticket]


def _bounded_read(call: Any, result: ToolResult) -> ToolResult:
    """``result`` within the record limits (``activities.record_limits``), before it enters
    history. A record too large to use once cut, or one whose fields are not of the types the
    state holds (its fold would fail), becomes a refused read the model sees (the workflow
    records it like any refusal: an observation, a journal row), logged for operators."""
    try:
        bounded = bound_result(result.result)
        problem = None if not result.ok else fold_problem(call, bounded.text)
        if problem is not None:
            raise RecordTooLarge(f"it is not in the form this system reads: {problem}")
    except RecordTooLarge as err:
        activity.logger.warning("%s: a record that cannot be used was refused: %s", call.name, err)
        return result.model_copy(update={"result": too_large_result(str(err)), "outcome": Outcome.REFUSED})
    if bounded.cut:
        activity.logger.info("%s: a record was cut to the limits (%d paths)", call.name, len(bounded.cut))
    return result.model_copy(update={"result": bounded.text})


def _bounded_write(call: Any, result: ToolResult) -> ToolResult:
    """A write's ``result`` within the record limits. A write has taken effect (or was refused)
    whatever its answer's size, so a document too large even once cut, or one the state cannot
    hold, is shortened to its plain top-level fields (``record_limits.skeleton``), never refused."""
    try:
        text = bound_result(result.result).text
        problem = None if not result.ok else fold_problem(call, text)
        if problem is not None:
            raise RecordTooLarge(f"it is not in the form this system reads: {problem}")
    except RecordTooLarge as err:
        activity.logger.warning("%s: a write's answer that cannot be kept was shortened: %s", call.name, err)
        text = skeleton(result.result, str(err))
    return result.model_copy(update={"result": text})


def fold_problem(call: Any, text: str) -> Optional[str]:
    """Why folding the applied result ``text`` of ``call`` into a conversation's state would
    fail (the name of the error: a field of the wrong type, a missing id), or None. Runs the
    tool's own fold on a scratch state whose customer owns the document, so a record the state
    cannot hold is refused here, in the activity, not in a workflow task."""
    fold = spec_of(call.name).fold
    if fold is None:
        return None
    try:
        doc = json.loads(text) if text.lstrip()[:1] == "{" else None
        owner = doc.get("user_id") if isinstance(doc, dict) else None
        state = ConversationState(conversation_id="record-check")
        if isinstance(owner, str):
            state.customer = Customer(user_id=owner, authenticated_via="email", authenticated_turn=0)
        fold(state, call_arguments(call), text)
    except Exception as err:  # noqa: BLE001 - any failure of the fold is the record's shape
        return type(err).__name__
    return None


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        with attempt_deadline():  # the work ends before Temporal gives up on this attempt
            async with heartbeating():
                return await asyncio.to_thread(fn, *args, **kwargs)
    except PortError as err:
        raise _fatal(err.error_type, str(err)) from err


def _fatal(error_type: ErrorType, message: str) -> ApplicationError:
    return ApplicationError(message, type=error_type.value, non_retryable=True)


def _payments_failure(message: str, error_type: str, non_retryable: bool) -> ApplicationError:
    """A failure of the payments call after the order's write committed, as the activity's
    failure: its type and retryability kept, the payments system named in its details
    (``workflows.failures.failed_in``), so the reason the workflow words names the payments
    system, not the order system whose write applied."""
    said = message if message.startswith("payments") else f"payments: {message}"
    return ApplicationError(said, {FAILED_SYSTEM: PAYMENTS_AFTER_ORDER}, type=error_type,
                            non_retryable=non_retryable)


def status_guard(tool: str, args: dict[str, Any]) -> Optional[Guard]:
    """The spec's order precondition (status; a single payment before a cancel), for the
    system to evaluate on the locked order inside the write's transaction."""
    spec = spec_of(tool)
    order_id = args.get("order_id")
    if spec.status is None or order_id is None:
        return None

    def guard(data: dict[str, dict]) -> Optional[str]:
        order = data["orders"].get(order_id)
        if order is None:
            return None  # the tool itself reports the unknown order
        failed = status_refusal(tool, spec.status, order_id, order["status"], len(order["payment_history"]))
        return f"Error: {failed[1]} ({failed[0].value})" if failed else None

    return guard
