"""Lists of conversations, refunds and pending approvals, from search attributes
(Temporal visibility), one page at a time.

Filter values go into a visibility query only after they matched ``FILTER_PATTERN``
(ASCII id characters, no quote or space), so a value can never change the query. A
customer id is mapped to its ``CustomerId`` pseudonym (``workflows.domain.pseudonym``) before it
is looked up, and items carry the pseudonym, never the real id. Page tokens are the
server's, in URL-safe base64.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import re
from typing import NamedTuple, Optional, Sequence

from pydantic import BaseModel
from temporalio.client import WorkflowExecution, WorkflowExecutionStatus
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.service import RPCError, RPCStatusCode

from starter.client.approvals import ApprovalItem, ApprovalReads
from starter.client.errors import ConversationError, unreachable
from starter.client.run_status import (NOT_STUCK_CLAUSE, STUCK, STUCK_CLAUSE, StuckRun, abnormal_word,
                                       description_stuck, problems_of, reported_stuck, status_clause, stuck_run)
from workflows.options import CUSTOMER_ID, LEGACY_STATUS, ORDER_IDS, PENDING_APPROVAL, STATUS, STEP
from workflows.domain.pseudonym import PREFIX as PSEUDONYM_PREFIX
from workflows.domain.pseudonym import customer_pseudonym

FILTER_VALUE = r"^[A-Za-z0-9#][A-Za-z0-9#._:@-]{0,127}$"
"""A filter value: an id of ASCII letters, digits and ``#._:@-``, at most 128 characters."""
FILTER_PATTERN = re.compile(FILTER_VALUE, re.ASCII)
PAGE_TOKEN_VALUE = r"^[A-Za-z0-9_-]{1,4096}={0,2}$"
"""The shape of the page tokens this client returns (URL-safe base64)."""
MAX_PAGE = 100
SUPPORT_PREFIX = "support-"
AWAITING = "awaiting_approval"


class PendingRun(NamedTuple):
    """A process waiting for a supervisor, as visibility lists it: the approval it waits for,
    its workflow id, whether it can be read (Temporal does not report it stuck) and its
    customer's ``CustomerId`` pseudonym (None: not known yet)."""

    approval_id: str
    workflow_id: str
    readable: bool
    customer: Optional[str]


class ConversationItem(BaseModel):
    """One conversation in a list: ``customer_id`` is the ``CustomerId`` pseudonym."""

    conversation_id: str
    customer_id: Optional[str] = None
    order_ids: list[str] = []
    status: Optional[str] = None
    step: Optional[str] = None


class RefundItem(BaseModel):
    """One refund in a list (standalone or a conversation's)."""

    refund_id: str
    customer_id: Optional[str] = None
    order_ids: list[str] = []
    status: Optional[str] = None
    step: Optional[str] = None
    pending_approval: Optional[str] = None


class Page(BaseModel):
    """One page of a list; ``next_page_token`` is None on the last page."""

    items: list[ConversationItem | RefundItem | ApprovalItem]
    next_page_token: Optional[str] = None


def clause(name: str, value: str) -> str:
    """```name` = "value"`` for a visibility query. Raises ``ConversationError`` ``invalid`` for
    a value that is not id-shaped (the only guard against query injection: keep it). The
    name is back-quoted: the server's parser rejects a bare ``Status`` (it reads it as a
    reserved word), and quoting is harmless for the other names."""
    if not FILTER_PATTERN.fullmatch(value):
        raise ConversationError(f"{name} filter must be an id of letters, digits and #._:@- (at most 128)",
                                "invalid")
    return f'`{name}` = "{value}"'


class ListingCalls(ApprovalReads):
    """The list operations of ``StatekeeperClient``."""

    _pseudonym_key: Optional[str] = None
    _legacy_status: Optional[bool] = None
    """Whether the namespace still has ``Status`` registered (a server upgraded from 1.0.0): asked once."""

    async def list_conversations(self, *, customer_id: Optional[str] = None, order_id: Optional[str] = None,
                                 status: Optional[str] = None, step: Optional[str] = None, limit: int = 20,
                                 next_page_token: Optional[str] = None, scope: Sequence[str] = ()) -> Page:
        """Conversations matching every given filter, newest first. ``customer_id`` is the real
        id (mapped to its pseudonym here); ``scope`` are further clauses (the caller's tenant,
        ``starter.client.tenancy``). ``status="stuck"``: running conversations whose workflow
        tasks keep failing (``starter.client.run_status``), which no other status lists. Raises
        ``ConversationError`` ``invalid`` for a bad filter or page token, ``unavailable``."""
        legacy = await self._legacy_status_registered() if status is not None else False
        parts = ['WorkflowType = "SupportWorkflow"', *self._filters(customer_id, order_id, status, step, legacy),
                 *scope,
                 CURRENT_RUNS]
        executions, token = await self._page(" AND ".join(parts), limit, next_page_token)
        executions = await self._latest_runs(executions)
        return Page(items=[ConversationItem(conversation_id=e.id.removeprefix(SUPPORT_PREFIX), **_common(e))
                           for e in executions], next_page_token=token)

    async def list_refunds(self, *, order_id: Optional[str] = None, customer_id: Optional[str] = None,
                           status: Optional[str] = None, step: Optional[str] = None, limit: int = 20,
                           next_page_token: Optional[str] = None, scope: Sequence[str] = ()) -> Page:
        """Refund workflows (standalone and conversations' children) matching every given
        filter (``step``: e.g. ``awaiting_approval``, ``done``) and the ``scope`` clauses.
        ``status`` and each item's status are a refund's as ``refund()`` states it: a running
        refund at step ``awaiting_approval`` is ``awaiting_approval``, not ``running``."""
        awaiting = []
        if status == AWAITING:  # the ProcessStatus attribute says running; the step says why
            status, step = "running", step or AWAITING
        elif status == "running":
            awaiting = [f'(`{STEP.name}` IS NULL OR `{STEP.name}` != "{AWAITING}")']
        legacy = await self._legacy_status_registered() if status is not None else False
        parts = ['WorkflowType = "RefundWorkflow"', *self._filters(customer_id, order_id, status, step, legacy),
                 *awaiting,
                 *scope, CURRENT_RUNS]
        executions, token = await self._page(" AND ".join(parts), limit, next_page_token)
        executions = await self._latest_runs(executions)
        return Page(items=[_refund_item(e) for e in executions], next_page_token=token)

    async def list_pending_approvals(self, *, limit: int = 20, next_page_token: Optional[str] = None,
                                     scope: Sequence[str] = ()) -> Page:
        """Approvals awaiting a decision, from ``PendingApproval`` of running processes
        (within the ``scope`` clauses), each read from its process (``ApprovalItem``: the
        write, its detail and amount, the reason, the times)."""
        runs, token = await self.pending_approval_runs(limit=limit, next_page_token=next_page_token, scope=scope)
        pending = [(run.approval_id, run.workflow_id, run.readable) for run in runs]
        return Page(items=await self.approval_items(pending), next_page_token=token)

    async def pending_approval_runs(self, *, limit: int = 20, next_page_token: Optional[str] = None,
                                    scope: Sequence[str] = ()) -> tuple[list["PendingRun"], Optional[str]]:
        """One page of the running processes waiting for a decision (``PendingApproval`` set,
        within the ``scope`` clauses), as visibility lists them, and the next page's token
        (None: the last page). Nothing is read from the processes themselves."""
        query = " AND ".join(['ExecutionStatus = "Running" AND PendingApproval IS NOT NULL', *scope])
        executions, token = await self._page(query, limit, next_page_token)
        return [PendingRun(approval_id, e.id, not reported_stuck(problems_of(e.typed_search_attributes)),
                           _keyword(e, CUSTOMER_ID))
                for e in executions if (approval_id := _keyword(e, PENDING_APPROVAL))], token

    async def _latest_runs(self, executions: list[WorkflowExecution]) -> list[WorkflowExecution]:
        """``executions`` without the runs a later run of the same workflow id replaced (a reset
        closes the run it resets, terminated or as it ended, and starts a new one with the same id
        and the same search attributes up to the reset point: both matched the list's filters), so
        each conversation or refund is listed once, by its latest run, on any page.

        A running run is always its id's latest (Temporal keeps at most one open). A closed one is
        asked about only when visibility counts another run of its id that did not continue as
        new (one count RPC per page holding closed runs; a describe each, only then). Raises
        ``ConversationError`` ``unavailable``."""
        closed = list(dict.fromkeys(e.id for e in executions if e.status != WorkflowExecutionStatus.RUNNING))
        if not closed:
            return executions
        quotable = [workflow_id for workflow_id in closed if WORKFLOW_ID_PATTERN.fullmatch(workflow_id)]
        if len(quotable) == len(closed):  # ids from the server: quoted only when nothing can escape the quotes
            ids = ", ".join(f'"{workflow_id}"' for workflow_id in quotable)
            try:
                counted = await self.read(lambda: self._client.count_workflows(
                    f"WorkflowId IN ({ids}) AND {CURRENT_RUNS}", rpc_timeout=self.rpc_timeout))
            except RPCError as err:
                raise unreachable() from err
            if counted.count <= len(closed):
                return executions  # no closed run here has a later one
        at_once = asyncio.Semaphore(DESCRIBES_AT_ONCE)
        latest = dict(zip(closed, await asyncio.gather(*(self._latest_run_id(i, at_once) for i in closed))))
        return [e for e in executions
                if e.status == WorkflowExecutionStatus.RUNNING or latest[e.id] in (None, e.run_id)]

    async def _latest_run_id(self, workflow_id: str, at_once: asyncio.Semaphore) -> Optional[str]:
        """The run id of ``workflow_id``'s latest run (one describe, within ``at_once``); None
        when Temporal no longer has it."""
        handle = self._client.get_workflow_handle(workflow_id)
        async with at_once:
            try:
                description = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
            except RPCError as err:
                if err.status is RPCStatusCode.NOT_FOUND:
                    return None
                raise unreachable() from err
        return description.run_id

    def _stuck_query(self) -> str:
        """The stuck runs of this client's task queue (``starter.client.run_status.STUCK_CLAUSE``)."""
        return f"{STUCK_CLAUSE} AND {clause('TaskQueue', self._task_queue)}"

    async def count_stuck(self) -> int:
        """How many runs of this client's task queue Temporal reports stuck (one count RPC;
        visibility lags a second or so). Raises ``ConversationError`` ``unavailable``."""
        try:
            counted = await self.read(lambda: self._client.count_workflows(self._stuck_query(),
                                                                          rpc_timeout=self.rpc_timeout))
        except RPCError as err:
            raise unreachable() from err
        return counted.count

    async def stuck_runs(self, limit: int = MAX_PAGE) -> list[StuckRun]:
        """The stuck runs of this client's task queue (at most ``limit``, newest first), each
        described once more for its attempt and since when (a run that moved again meanwhile
        is left out). Raises ``ConversationError`` ``unavailable``."""
        executions, _ = await self._page(self._stuck_query(), limit, None)
        runs = []
        for execution in executions:
            handle = self._client.get_workflow_handle(execution.id, run_id=execution.run_id)
            try:
                description = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
            except (RPCError, ConversationError):  # listed stuck: say so, without the attempt
                runs.append(stuck_run(execution.id, execution.workflow_type,
                                      problems_of(execution.typed_search_attributes)))
                continue
            stuck, problems, attempt = description_stuck(description)
            if stuck:
                since = await self.stuck_since(execution.id, execution.run_id)
                runs.append(stuck_run(execution.id, execution.workflow_type, problems, attempt, since))
        return runs

    async def _legacy_status_registered(self) -> bool:
        """Whether ``Status`` (1.0.0's name of ``ProcessStatus``) is registered in the namespace:
        then a run of 1.0.0 that has not published its status since the upgrade is found by it.
        Asked once per client; a failed ask counts as no (and is asked again next time)."""
        if self._legacy_status is None:
            try:
                listed = await self.read(lambda: self._client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=self._client.namespace)))
            except RPCError:
                return False
            self._legacy_status = LEGACY_STATUS.name in listed.custom_attributes
        return self._legacy_status

    def _filters(self, customer_id: Optional[str], order_id: Optional[str], status: Optional[str],
                 step: Optional[str], legacy_status: bool = False) -> list[str]:
        """Visibility-query clauses for the filters given; ``legacy_status``: also match a run
        whose status is only in 1.0.0's ``Status`` attribute."""
        parts = []
        if customer_id is not None:
            clause(CUSTOMER_ID.name, customer_id)  # validate the real id before mapping it
            if not self._pseudonym_key:
                raise ConversationError("listing by customer needs the workers' pseudonym key: set "
                                        "STATEKEEPER_DATA_DIR to their data directory or STATEKEEPER_PSEUDONYM_KEY",
                                        "unavailable")
            parts.append(clause(CUSTOMER_ID.name, customer_pseudonym(customer_id, self._pseudonym_key)))
        # ended and stuck runs never published these words: Temporal's execution status and its
        # TemporalReportedProblems say them (starter.client.run_status)
        reported = STUCK_CLAUSE if status == STUCK else status_clause(status) if status is not None else None
        for key, value in ((ORDER_IDS, order_id), (STEP, step)):
            if value is not None:
                parts.append(clause(key.name, value))
        if status is not None and not reported:
            own = clause(STATUS.name, status)
            parts.append(f"({own} OR (`{STATUS.name}` IS NULL AND {clause(LEGACY_STATUS.name, status)}))"
                         if legacy_status else own)
        if reported:
            parts.append(reported)
        if status in LIVE_STATUSES:  # a run that closed without its final ProcessStatus is not live
            parts.append('ExecutionStatus = "Running"')
            parts.append(NOT_STUCK_CLAUSE)  # a stuck run is listed as stuck, under that filter only
        return parts

    async def _page(self, query: str, limit: int, token: Optional[str]) -> tuple[list[WorkflowExecution], Optional[str]]:
        if not 1 <= limit <= MAX_PAGE:
            raise ConversationError(f"limit must be between 1 and {MAX_PAGE}", "invalid")
        raw = _decode_token(token, query)
        async def fetch():  # a fresh iterator per ask: ``read`` may ask twice
            pages = self._client.list_workflows(query, page_size=limit, next_page_token=raw,
                                                rpc_timeout=self.rpc_timeout)
            await pages.fetch_next_page()
            return pages

        try:
            iterator = await self.read(fetch)
        except RPCError as err:
            if err.status is RPCStatusCode.INVALID_ARGUMENT:
                raise ConversationError("invalid list request (filter or page token)", "invalid") from err
            if raw is not None and err.status not in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
                raise ConversationError("next_page_token is not a token this API returned", "invalid") from err
            raise unreachable() from err
        executions = list(iterator.current_page or [])
        following = iterator.next_page_token
        return executions, _encode_token(following, query) if following else None


CURRENT_RUNS = 'ExecutionStatus != "ContinuedAsNew"'
"""A conversation or refund is listed by its current run: the runs it continued as new from
(each still saying "active") are not listed again; the runs a reset replaced are left out after
the page is read (``ListingCalls._latest_runs``: visibility does not say which run is current)."""
WORKFLOW_ID_PATTERN = re.compile(r"^[A-Za-z0-9#._:@~=+-]{1,1000}$", re.ASCII)
"""A workflow id that can go between double quotes in a visibility query as it is."""
DESCRIBES_AT_ONCE = 8
"""The most describes one list page asks for at a time (``ListingCalls._latest_runs``)."""
LIVE_STATUSES = frozenset({"active", "running", "awaiting_approval"})
"""``ProcessStatus`` words of a process still going on: true only of a run that is running."""

TOKEN_TAG = b"sk1"


def _query_tag(query: str) -> bytes:
    return hashlib.sha256(query.encode("utf-8")).digest()[:8]


def _encode_token(raw: bytes, query: str) -> str:
    """The server's page token, bound to the list's query: a token is only ever sent back
    with the filter it was made for, and a made-up one is refused before reaching the server."""
    return base64.urlsafe_b64encode(TOKEN_TAG + _query_tag(query) + raw).decode("ascii")


def _decode_token(token: Optional[str], query: str) -> Optional[bytes]:
    if token is None:
        return None
    try:
        data = base64.urlsafe_b64decode(token.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError) as err:
        raise ConversationError("next_page_token is not a token this API returned", "invalid") from err
    head = TOKEN_TAG + _query_tag(query)
    if not data.startswith(head) or len(data) == len(head):
        raise ConversationError("next_page_token is not a token this API returned for this list", "invalid")
    return data[len(head):]


def _keyword(execution: WorkflowExecution, key) -> Optional[str]:  # noqa: ANN001 (a SearchAttributeKey)
    return execution.typed_search_attributes.get(key)


def _refund_item(execution: WorkflowExecution) -> RefundItem:
    item = RefundItem(refund_id=execution.id, pending_approval=_keyword(execution, PENDING_APPROVAL),
                      **_common(execution))
    if item.status == "running" and (item.step == AWAITING or item.pending_approval):
        item.status = AWAITING  # as GET /refunds/{refund_id} says it
    return item


def _common(execution: WorkflowExecution) -> dict:
    """Fields every item shares; ``status`` is Temporal's execution status for a run that
    ended without the workflow's say (terminated, timed out, failed: ``starter.client.run_status``),
    and for a run that has not set the ``ProcessStatus`` search attribute yet; ``stuck`` for a running
    one whose workflow tasks keep failing (``starter.client.run_status``)."""
    fallback = execution.status.name.lower() if execution.status is not None else None
    status = (abnormal_word(execution.status) or _keyword(execution, STATUS) or _keyword(execution, LEGACY_STATUS)
              or fallback)
    if status in LIVE_STATUSES and execution.status not in (None, WorkflowExecutionStatus.RUNNING):
        status = fallback
    if execution.status == WorkflowExecutionStatus.RUNNING and reported_stuck(problems_of(execution.typed_search_attributes)):
        status = STUCK  # as ?status=stuck finds it
    customer = _keyword(execution, CUSTOMER_ID)
    # only a pseudonym leaves this module: a run written before pseudonyms may hold a real id
    return {"customer_id": customer if customer and customer.startswith(PSEUDONYM_PREFIX) else None,
            "order_ids": list(execution.typed_search_attributes.get(ORDER_IDS) or []),
            "status": status, "step": _keyword(execution, STEP)}
