"""The Temporal side of erasure and retention: finding a customer's or an expired
conversation's workflow runs through visibility, and deleting them.

Visibility is eventually consistent: a run listed as running is described (the
authoritative state) before anyone is told it runs. Deletion is asynchronous in Temporal:
``DeleteWorkflowExecution`` is accepted at once and the history is gone shortly after
(about half a minute on the dev server); deleting a running run terminates it first.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Iterable, NamedTuple, Optional

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from workflows.options import CUSTOMER_ID
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow

SUPPORT, REFUND = SupportWorkflow.__name__, RefundWorkflow.__name__
"""The workflow types erasure and retention act on (their ``@workflow.defn`` names)."""
CONVERSATION_PREFIX = "support-"
"""A conversation's workflow id is ``support-<conversation id>``."""
QUOTABLE = re.compile(r"[A-Za-z0-9#._:@-]{1,1000}")
"""Values put in a visibility query between quotes: no quotes, backslashes or spaces (the
query language's escaping is not relied on). Other ids are left out of id queries."""


MAX_CHAIN = 10_000
"""The most runs ``TemporalRuns._chain`` follows back (a conversation continues as new every
few hundred turns: far more than any lives through)."""


class Run(NamedTuple):
    """One workflow run as visibility lists it (``running`` confirmed by a describe)."""

    workflow_id: str
    run_id: str
    workflow_type: str
    running: bool
    parent_id: Optional[str] = None


def conversation_of(workflow_id: str) -> Optional[str]:
    """The conversation id of a conversation's workflow id; None for other workflows."""
    if not workflow_id.startswith(CONVERSATION_PREFIX):
        return None
    return workflow_id[len(CONVERSATION_PREFIX):] or None


def _in(values: Iterable[str]) -> str:
    return ", ".join(f"'{v}'" for v in sorted(values))


def _chunks(values: list[str], size: int = 50) -> list[list[str]]:
    return [values[i:i + size] for i in range(0, len(values), size)]


def _time(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TemporalRuns:
    """Workflow runs of statekeeper's workflows on ``client``'s namespace."""

    TYPES = f"WorkflowType IN ({_in([SUPPORT, REFUND])})"

    def __init__(self, client: Client) -> None:
        self.client = client

    async def _list(self, query: str) -> list[Run]:
        return [Run(w.id, w.run_id, w.workflow_type, w.status == WorkflowExecutionStatus.RUNNING, w.parent_id)
                async for w in self.client.list_workflows(query)]

    async def of_customer(self, customer_values: Iterable[str], conversation_ids: Iterable[str] = ()) -> list[Run]:
        """Every run of the conversations and refunds whose ``CustomerId`` is one of
        ``customer_values`` (the pseudonym; also the real id, which runs recorded before
        pseudonyms carried), and every run of those workflows and of the conversations
        ``conversation_ids`` (runs before the customer authenticated carry no ``CustomerId``).
        Raises ``ValueError`` for a value that cannot be quoted in a query."""
        values = sorted(set(customer_values))
        if not values or not all(QUOTABLE.fullmatch(v) for v in values):
            raise ValueError("customer values must be ids ([A-Za-z0-9#._:@-])")
        runs = await self._list(f"{CUSTOMER_ID.name} IN ({_in(values)}) AND {self.TYPES}")
        ids = {r.workflow_id for r in runs} | {CONVERSATION_PREFIX + c for c in conversation_ids}
        for chunk in _chunks(sorted(i for i in ids if QUOTABLE.fullmatch(i))):
            runs += await self._list(f"WorkflowId IN ({_in(chunk)}) AND {self.TYPES}")
        for workflow_id in sorted(i for i in ids if not QUOTABLE.fullmatch(i)):
            runs += await self._chain(workflow_id)
        unique = {(r.workflow_id, r.run_id): r for r in runs}
        # visibility lags: a run a conversation has just continued as new into may not be
        # listed yet while the run it left is, and erasure then neither refused nor stopped
        # it, and it went on writing the customer's records. Each workflow's latest run is
        # asked for directly.
        for workflow_id in sorted({r.workflow_id for r in runs} | {i for i in ids if QUOTABLE.fullmatch(i)}):
            for latest in await self._chain(workflow_id, depth=1):
                unique.setdefault((latest.workflow_id, latest.run_id), latest)
        return [await self._confirmed(r) for _, r in sorted(unique.items())]

    async def running_refunds(self, orders: Iterable[tuple[str, str]]) -> list[Run]:
        """The running refunds of ``orders`` (``(store, order id)`` pairs), found by workflow
        id (``refund-{store}-{order without #}-``: a conversation's and a standalone request's
        alike), whether or not they carry a ``CustomerId`` yet."""
        # a refund learns its customer in its first workflow task (a standalone one from its fresh
        # read of the order), so until a worker has run it, it carries no ``CustomerId``; missed,
        # erasure neither refused nor stopped it (a conversation's child outlives its terminated
        # parent: abandoned), and it then wrote the customer's order to the ledger and emailed them
        prefixes = sorted({p for store, order in orders
                           if QUOTABLE.fullmatch(p := f"refund-{store}-{order.lstrip('#')}-")})
        found: list[Run] = []
        for chunk in _chunks(prefixes):
            ids = " OR ".join(f"WorkflowId STARTS_WITH '{p}'" for p in chunk)
            found += await self._list(f"WorkflowType = '{REFUND}' AND ExecutionStatus = 'Running' AND ({ids})")
        return [confirmed for r in found if (confirmed := await self._confirmed(r)).running]

    async def _chain(self, workflow_id: str, depth: int = MAX_CHAIN) -> list[Run]:
        """Every run of ``workflow_id`` from its latest back through the runs it continued as
        new from, without a visibility query: an id that cannot be quoted in one (a space, a
        letter outside ASCII: the Python client takes any id) was left out, and the runs of
        such a conversation before the customer authenticated (no ``CustomerId``) outlived the
        erasure with what the user had said in them. ``depth`` 1: the latest run alone."""
        runs: list[Run] = []
        run_id: Optional[str] = None
        while len(runs) < depth:
            handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
            try:
                description = await handle.describe()
                if description.workflow_type not in (SUPPORT, REFUND):
                    break
                runs.append(Run(workflow_id, description.run_id, description.workflow_type,
                                description.status == WorkflowExecutionStatus.RUNNING, description.parent_id))
                if len(runs) == depth:
                    break
                described = self.client.get_workflow_handle(workflow_id, run_id=description.run_id)
                first = await anext(aiter(described.fetch_history_events(page_size=1)))
            except (RPCError, StopAsyncIteration) as err:
                if isinstance(err, RPCError) and err.status != RPCStatusCode.NOT_FOUND:
                    raise
                break
            run_id = first.workflow_execution_started_event_attributes.continued_execution_run_id or None
            if run_id is None:
                break
        return runs

    async def _confirmed(self, run: Run) -> Run:
        # visibility may still list a run that has just closed as running: ask the run itself
        if not run.running:
            return run
        try:
            description = await self.client.get_workflow_handle(run.workflow_id, run_id=run.run_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return run._replace(running=False)
            raise
        return run._replace(running=description.status == WorkflowExecutionStatus.RUNNING)

    async def expired(self, older_than: datetime) -> tuple[list[Run], set[str]]:
        """Runs of conversations and refunds closed before ``older_than``, and the ids of the
        workflows that must be kept: running or closed since (for a refund running or closed
        since, its parent conversation too, which it writes for)."""
        cutoff = _time(older_than)
        closed = await self._list(f"{self.TYPES} AND ExecutionStatus != 'Running' AND CloseTime < '{cutoff}'")
        active = await self._list(f"{self.TYPES} AND (ExecutionStatus = 'Running' OR CloseTime >= '{cutoff}')")
        # a refund child outlives a conversation terminated while it wrote (it is abandoned):
        # kept only while it ran, its parent was purged when the child had closed since, and the
        # child's run (the customer's order and email in its input) then outlived every purge,
        # since a refund goes with its parent only
        keep = {r.workflow_id for r in active} | {r.parent_id for r in active if r.parent_id}
        return closed, keep

    async def delete(self, runs: Iterable[Run]) -> int:
        """Ask Temporal to delete each run (a running one is terminated first); returns how
        many deletions it accepted. A run already gone is skipped."""
        accepted = 0
        for run in runs:
            request = DeleteWorkflowExecutionRequest(
                namespace=self.client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=run.workflow_id, run_id=run.run_id))
            try:
                await self.client.workflow_service.delete_workflow_execution(request)
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
                continue
            accepted += 1
        return accepted
