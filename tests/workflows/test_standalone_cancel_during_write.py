"""A Temporal cancel (Web UI, ``temporal workflow cancel``, a parent's close policy) that
reaches a standalone refund while its write runs. The cancel does not abandon the write's
activity (the refund would ask the ledger at once, find nothing yet, open a human ticket and
say ``escalated``, "the order system could not be reached", while the write went on and
committed a moment later): the write finishes, once, and the refund says ``applied``.
Real parts: a Temporal dev server, a worker and the SQLite system of record; the write is
held before it reaches the store (``PauseBeforeWrite``) so the cancel lands mid-flight. A refund
terminated there says so with a reason, and ``?status=terminated`` lists it."""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from temporalio.client import WorkflowExecutionStatus

from tests.faults import DelegatingPort
from tests.policy_fixtures import PENDING
from tests.workflow_harness import order_details, refund_settled, running_worker, until
from workflows.refund.standalone import RefundRequest


class PauseBeforeWrite(DelegatingPort):
    """Touches ``marker`` and sleeps ``seconds`` before each write reaches the store."""

    def __init__(self, inner: Any, seconds: float, marker: Path) -> None:
        self._inner, self._seconds, self._marker = inner, seconds, marker

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               **kwargs: Any):
        if idempotency_key is not None:
            self._marker.touch()
            time.sleep(self._seconds)
        return self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key, **kwargs)


@contextlib.asynccontextmanager
async def _refund_writing(temporal_env, settings, tmp_path: Path, seconds: float) -> AsyncIterator[tuple]:
    """A standalone cancel of PENDING whose write is held ``seconds`` before it reaches the store;
    yields (client, backend, refund id) once the write has started."""
    marker = tmp_path / "writing"
    async with running_worker(temporal_env, settings,
                              wrap_port=lambda port: PauseBeforeWrite(port, seconds, marker)) as (client, backend):
        request = RefundRequest(request_id=f"w-{uuid.uuid4().hex[:6]}", order_id=PENDING, operation="cancel",
                                reason="no longer needed")
        refund_id = (await client.request_refund(request)).refund_id
        await until(lambda: marker.exists(), "the write to start")
        yield client, backend, refund_id


async def test_a_temporal_cancel_during_the_write_lets_it_finish_and_reports_it_applied(temporal_env, settings,
                                                                                        tmp_path):
    async with _refund_writing(temporal_env, settings, tmp_path, 3.0) as (client, backend, refund_id):
        await temporal_env.client.get_workflow_handle(refund_id).cancel()
        status = await refund_settled(client, refund_id)
        assert (status.status, status.reason) == ("applied", None), status
        described = await temporal_env.client.get_workflow_handle(refund_id).describe()
        assert described.status is WorkflowExecutionStatus.COMPLETED
        assert [e["tool"] for e in backend.ledger_entries("main")] == ["cancel_pending_order"]
        assert order_details(backend, PENDING)["status"] == "cancelled"


async def test_a_refund_terminated_during_its_write_says_so_and_is_listed_by_that_word(temporal_env, settings,
                                                                                      tmp_path):
    # GET /refunds/{id} said "terminated" with no reason, and ?status=terminated found nothing
    # (the run's ProcessStatus search attribute still said "running")
    async with _refund_writing(temporal_env, settings, tmp_path, 2.0) as (client, _backend, refund_id):
        await temporal_env.client.get_workflow_handle(refund_id).terminate("stopped by an operator")
        status = await client.refund(refund_id)
        assert status.status == "terminated" and status.reason and "operator stopped" in status.reason, status
        assert "Error" not in status.reason and refund_id not in status.reason

        async def listed(word: str) -> list:
            page = await client.list_refunds(order_id=PENDING, status=word, limit=100)
            return [(i.refund_id, i.status) for i in page.items if i.refund_id == refund_id]

        await until(lambda: _equal(listed("terminated"), [(refund_id, "terminated")]), "the list by its word")
        assert await listed("running") == []


async def _equal(found, expected) -> bool:
    return await found == expected
