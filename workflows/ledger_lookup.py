"""One question to the system of record before telling anyone what a write did: what does
the ledger hold under this write's idempotency key? (workflow code, deterministic)

Asked before an unknown outcome is escalated (``workflows.conversation.execute``), before a write is parked
for a supervisor or a decided approval is told as "nothing was changed"
(``workflows.conversation.approvals``), and before a compensating write whose retries ran out is
reported as not undone (``workflows.conversation.compensation``). Each caller fails open: a look-up that
cannot answer is treated as "nothing recorded", and the caller's own next step (escalating,
parking, a human ticket) keeps the user's account honest.
"""

from __future__ import annotations

from typing import Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.activity_api import ToolActivitiesApi
from workflows.domain.contracts import ToolResult, WriteToolRequest
from workflows.failures import log_detail
from workflows.options import HEARTBEAT_TIMEOUT, READ_RETRY, READ_TIMEOUT


async def recorded_under(request: WriteToolRequest, summary: str) -> Optional[ToolResult]:
    """The outcome the ledger holds under ``request.idempotency_key`` (``find_recorded_write``:
    applied or refused, ``replayed=True``), or None when it holds none or the look-up failed
    (logged, redacted). ``summary`` is the activity's summary in the Web UI."""
    try:
        return await workflow.execute_activity_method(
            ToolActivitiesApi.find_recorded_write, request, heartbeat_timeout=HEARTBEAT_TIMEOUT,
            start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY, summary=summary)
    except ActivityError as err:
        workflow.logger.warning("ledger look-up failed (%s): %s", summary, log_detail(err))
        return None
