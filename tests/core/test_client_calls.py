"""How the Python client treats a call to Temporal that fails, with the Temporal service or the
call faked at its boundary:

- a read-only RPC (``ClientCore.read``: the check for a polling worker before every start,
  describes, the state query, results, a page of a listing; the worker's startup checks) is
  asked once more when the connection dropped it in flight (CANCELLED, "operation was
  canceled", which CI has seen), and only then: a refusal or an outage is reported at once;
  checks at the same time share one ``DescribeTaskQueue``;
- ``ClientCore.run_update`` tells an update whose landing is unclear from one that surely did
  not land: with a caller-supplied id (a message, a supervisor's decision) an unreachable
  Temporal is ``outcome_unknown`` naming how to send the same update again; without one it
  stays ``unavailable``; a definite refusal passes through;
- ``starter.client.transient.transient_retried`` sends a call refused as unavailable, timed
  out or with an unknown outcome again (the τ-bench runner's messages carry ids of their own,
  so a resend is handled once); a definite refusal is raised at once, and the last transient
  one after the attempts run out;
- ``starter.client.failure_words.failure_kind``: what an operator reads for a failure names its
  kind in words, never the exception's class (API refusals, ``replay-check`` reports).
"""

from __future__ import annotations

from datetime import datetime, timezone, timedelta
from types import SimpleNamespace

import pytest
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import OperationalError
from temporalio.api.taskqueue.v1 import PollerInfo
from temporalio.api.workflowservice.v1 import DescribeTaskQueueResponse
from temporalio.service import RPCError, RPCStatusCode

from starter.client.core import ClientCore, UNCLEAR_RPC
from starter.client.errors import ConversationError, message_outcome_unknown, outcome_unknown, status_for
from starter.client.failure_words import failure_kind
from starter.client.listing import ListingCalls
from starter.client.transient import transient_retried


# --- Reads asked once more after a drop ---

def core(answers: list) -> tuple[ClientCore, list]:
    calls: list = []

    async def describe_task_queue(request, timeout=None):
        calls.append(request.task_queue.name)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = SimpleNamespace(namespace="default", workflow_service=SimpleNamespace(describe_task_queue=describe_task_queue))
    return ClientCore(client, "q"), calls


def polled_now() -> DescribeTaskQueueResponse:
    poller = PollerInfo()
    poller.last_access_time.FromDatetime(datetime.now(timezone.utc))
    return DescribeTaskQueueResponse(pollers=[poller])


async def test_a_read_dropped_in_flight_is_asked_once_more():
    dropped = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    client, calls = core([dropped, polled_now()])
    assert await client.worker_polling()
    assert calls == ["q", "q"]


@pytest.mark.parametrize("status", [RPCStatusCode.UNAVAILABLE, RPCStatusCode.PERMISSION_DENIED])
async def test_an_outage_or_a_refusal_is_reported_at_once(status):
    client, calls = core([RPCError("no", status, b""), polled_now()])
    with pytest.raises(ConversationError) as info:
        await client.worker_polling()
    assert info.value.kind == "unavailable" and calls == ["q"]


async def test_a_second_drop_is_reported():
    dropped = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    client, calls = core([dropped, dropped])
    with pytest.raises(ConversationError) as info:
        await client.worker_polling()
    assert info.value.kind == "unavailable" and calls == ["q", "q"]


async def test_any_read_is_asked_once_more_after_a_drop_and_only_a_read():
    client, _ = core([])
    answers = [RPCError("operation was canceled", RPCStatusCode.CANCELLED, b""), "described"]

    async def describe():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    assert await client.read(describe) == "described"
    refused = [RPCError("not found", RPCStatusCode.NOT_FOUND, b""), "described"]

    async def missing():
        raise refused.pop(0)
    with pytest.raises(RPCError) as info:
        await client.read(missing)
    assert info.value.status == RPCStatusCode.NOT_FOUND and refused == ["described"]


class _Pages:
    """The SDK's list iterator at its RPC boundary: each ``fetch_next_page`` takes the next answer."""

    def __init__(self, answers: list, asked: list) -> None:
        self._answers, self._asked = answers, asked
        self.current_page, self.next_page_token = None, None

    async def fetch_next_page(self) -> None:
        self._asked.append("page")
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        self.current_page = answer


def listing(answers: list) -> tuple[ListingCalls, list]:
    asked: list = []
    client = SimpleNamespace(namespace="default",
                             list_workflows=lambda query, **_: _Pages(answers, asked))
    return ListingCalls(client, "q"), asked


async def test_a_list_page_dropped_in_flight_is_asked_once_more():
    dropped = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    calls, asked = listing([dropped, []])
    page = await calls.list_conversations(limit=5)
    assert page.items == [] and page.next_page_token is None and asked == ["page", "page"]


async def test_a_refused_list_is_reported_at_once():
    calls, asked = listing([RPCError("bad query", RPCStatusCode.INVALID_ARGUMENT, b""), []])
    with pytest.raises(ConversationError) as info:
        await calls.list_refunds(limit=5)
    assert info.value.kind == "invalid" and asked == ["page"]


async def test_checks_at_the_same_time_share_one_describe_and_a_yes_is_reused_briefly(monkeypatch):
    import asyncio  # noqa: PLC0415

    import starter.client.core  # noqa: PLC0415

    client, calls = core([polled_now(), polled_now()])
    assert await asyncio.gather(*[client.worker_polling() for _ in range(50)]) == [True] * 50
    assert await client.worker_polling()
    assert calls == ["q"]  # 51 checks, one RPC
    monkeypatch.setattr(starter.client.core, "POLLING_REUSE_SECONDS", 0.0)
    client, calls = core([polled_now(), polled_now()])
    assert await client.worker_polling() and await client.worker_polling()
    assert calls == ["q", "q"]


async def test_a_no_is_never_reused():
    client, calls = core([DescribeTaskQueueResponse(), polled_now()])
    assert not await client.worker_polling()
    assert await client.worker_polling()
    assert calls == ["q", "q"]


async def test_a_check_whose_callers_were_all_cancelled_leaves_no_unread_failure(caplog):
    import asyncio  # noqa: PLC0415
    import gc  # noqa: PLC0415

    gate = asyncio.Event()
    client, _ = core([])

    async def describe_task_queue(request, timeout=None):
        await gate.wait()
        raise RPCError("down", RPCStatusCode.UNAVAILABLE, b"")

    client._client.workflow_service.describe_task_queue = describe_task_queue
    caller = asyncio.ensure_future(client.worker_polling())
    await asyncio.sleep(0.01)
    caller.cancel()
    gate.set()
    await asyncio.sleep(0.05)
    client._polled_check = None
    gc.collect()
    assert "never retrieved" not in caplog.text


def test_a_check_left_pending_on_a_closed_loop_is_not_reused():
    import asyncio  # noqa: PLC0415

    client, calls = core([polled_now(), polled_now()])
    stale = asyncio.new_event_loop()
    client._polled_check = stale.create_future()  # a check in flight when its loop went away
    stale.close()
    assert asyncio.run(client.worker_polling())
    assert calls == ["q"]


async def test_the_worker_startup_checks_ask_a_dropped_read_once_more():
    """``starter.runtime.preflight``: one dropped ``DescribeTaskQueue`` or search-attribute listing
    is asked again rather than stopping a worker's startup with the RPC error."""
    from temporalio.api.operatorservice.v1 import ListSearchAttributesResponse  # noqa: PLC0415

    from starter.runtime.preflight import check_task_queue, ensure_search_attributes  # noqa: PLC0415

    dropped = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    answers = [dropped, DescribeTaskQueueResponse(), dropped, DescribeTaskQueueResponse()]
    client, calls = core(answers)
    await check_task_queue(client._client, "default", "q", "fp")
    assert calls == ["q"] * 4 and answers == []
    listings = [dropped, ListSearchAttributesResponse()]

    async def list_search_attributes(request, timeout=None):
        answer = listings.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    operator = SimpleNamespace(list_search_attributes=list_search_attributes)
    assert await ensure_search_attributes(SimpleNamespace(operator_service=operator), "default", []) == []
    assert listings == []


async def test_the_worker_startup_check_reports_a_second_drop():
    from starter.runtime.preflight import check_task_queue  # noqa: PLC0415

    dropped = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    client, calls = core([dropped, dropped, DescribeTaskQueueResponse()])
    with pytest.raises(RPCError):
        await check_task_queue(client._client, "default", "q", "fp")
    assert calls == ["q", "q"]


# --- Updates whose landing is unclear ---

DECISION = outcome_unknown("the decision", "send the same decision again (approve by alice)")


def _failing(status: RPCStatusCode):
    async def start(timeout: timedelta):
        raise RPCError("the server went away", status, b"")
    return start


@pytest.mark.parametrize("status", UNCLEAR_RPC)
@pytest.mark.parametrize("unknown", [DECISION, message_outcome_unknown("m-7")], ids=["decision", "message"])
async def test_an_unclear_failure_with_a_caller_id_is_outcome_unknown(status, unknown):
    with pytest.raises(ConversationError) as refused:
        await ClientCore(None, "q").run_update(_failing(status), "the update", unknown=unknown)
    assert refused.value is unknown and refused.value.kind == "outcome_unknown" and status_for(refused.value) == 503
    assert "whether" in str(refused.value) and "at most once" in str(refused.value)


async def test_the_retry_names_the_id_to_send_again():
    assert 'send it again with message_id "m-7"' in str(message_outcome_unknown("m-7"))
    assert message_outcome_unknown("m-7").message_id == "m-7"
    assert "send the same decision again (approve by alice)" in str(DECISION) and DECISION.message_id is None


async def test_without_a_caller_id_it_stays_unavailable():
    with pytest.raises(ConversationError) as refused:
        await ClientCore(None, "q").run_update(_failing(RPCStatusCode.UNAVAILABLE), "the update")
    assert refused.value.kind == "unavailable"


async def test_a_definite_refusal_passes_through():
    with pytest.raises(RPCError):
        await ClientCore(None, "q").run_update(_failing(RPCStatusCode.NOT_FOUND), "the update", unknown=DECISION)


# --- Transient refusals sent again ---

def _script(*outcomes):
    calls = []

    async def call():
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    return call, calls


@pytest.mark.parametrize("kind", ["unavailable", "timeout", "outcome_unknown"])
async def test_a_transient_refusal_is_sent_again(kind):
    call, calls = _script(ConversationError("Temporal is not reachable; retry later", kind), "reply")
    assert await transient_retried(call, pause_seconds=0) == "reply" and len(calls) == 2


async def test_a_definite_refusal_is_raised_at_once():
    call, calls = _script(ConversationError("conversation c has finished", "finished"), "reply")
    with pytest.raises(ConversationError) as err:
        await transient_retried(call, pause_seconds=0)
    assert err.value.kind == "finished" and len(calls) == 1


async def test_the_last_transient_refusal_is_raised_when_the_attempts_run_out():
    call, calls = _script(*[ConversationError(f"try {i}", "unavailable") for i in range(3)])
    with pytest.raises(ConversationError) as err:
        await transient_retried(call, attempts=3, pause_seconds=0)
    assert str(err.value) == "try 2" and len(calls) == 3


# --- Failures in words ---

class _Shape(BaseModel):
    n: int


def _validation_error() -> ValidationError:
    try:
        _Shape(n="x")  # type: ignore[arg-type]
    except ValidationError as err:
        return err
    raise AssertionError("unreachable")


@pytest.mark.parametrize("err, words", [
    (TimeoutError(), "it timed out"),
    (ConnectionRefusedError(111, "refused"), "a connection failed"),
    (RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b""), "Temporal did not answer"),
    (OperationalError("SELECT 1", {}, Exception("down")), "the database failed"),
    (_validation_error(), "the data did not decode"),
    (PermissionError(13, "denied"), "the operating system refused"),
    (RuntimeError("boom"), "an unexpected error"),
])
def test_each_kind_of_failure_is_worded_without_its_class_name(err, words):
    said = failure_kind(err)
    assert said == words
    assert type(err).__name__ not in said
