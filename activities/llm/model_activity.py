"""The ``propose_action`` activity: one stateless Messages API call through the SDK.

The SDK never retries (``max_retries=0``): Temporal owns retries, so every failure
is mapped to an ``ApplicationError`` whose ``type`` tells the workflow's RetryPolicy
what to do:

- ``ModelRequestRejected`` (non-retryable): the request itself is wrong — HTTP 400,
  401, 403, 404, 413, 422 and other 4xx except 408/409/429, or no credentials.
- ``ModelUnavailable`` (retryable): 429, 408, 409, 5xx (incl. 529 overloaded),
  connection errors and timeouts. ``next_retry_delay`` honours ``retry-after``.
- ``MalformedModelOutput`` (retryable): no ``tool_use`` block, another tool, or an
  input that fails ``parse_proposed_action``. The RetryPolicy bounds the attempts;
  the workflow then records a rejection.

Each call renders its input from the state view in the request (``render_request(view,
prompt_version)``) and records itself in the decision log (``activities.journal``): one
``model_calls`` row per (conversation, turn, call_seq), upserted, so a retried attempt or a
reset re-running the call overwrites its row; a malformed or failed call is recorded too
(no proposal). A journal write that fails is logged and the call goes on (see ``_record``).

Each call carries ``metadata.user_id`` = the conversation id (an opaque id; the
offline stand-in finds a benchmark conversation's plan by it). Offline,
``offline_client`` puts the stand-in model (``systems.model``) behind the very same SDK
call through an in-process ASGI transport; only the transport differs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.llm.api_errors import map_api_error
from activities.llm.wire import MalformedOutput, build_create_kwargs, read_proposal
from workflows.activity_api import ModelActivitiesApi
from workflows.domain.contracts import ModelRequest, ModelResult
from workflows.domain.errors import ErrorType
from workflows.domain.prompt import PROMPT_VERSION, ModelSnapshot, UnknownPromptVersion, render_request

if TYPE_CHECKING:
    import anthropic
    from anthropic import AsyncAnthropic

    from activities.store.journal import JournalStore
    from systems.model.server import Plans

log = logging.getLogger("statekeeper.model")

REJECTED = ErrorType.MODEL_REQUEST_REJECTED.value
OVER_BUDGET = ErrorType.TOKEN_BUDGET_EXCEEDED.value
COUNTED_FIELDS = ("model", "system", "messages", "tools", "tool_choice")
"""The ``messages.create`` arguments ``messages.count_tokens`` takes (not max_tokens, metadata)."""
UNAVAILABLE = ErrorType.MODEL_UNAVAILABLE.value
MALFORMED = ErrorType.MALFORMED_MODEL_OUTPUT.value
OFFLINE_BASE_URL = "http://offline-model.invalid"


def sdk() -> Any:
    """The ``anthropic`` package, imported on first use: it is most of a worker's import time,
    so a worker polls first and builds its model client in the background (``ModelActivities.warm``)."""
    import anthropic  # noqa: PLC0415

    return anthropic


def build_client(api_key: Optional[str], base_url: Optional[str], timeout_seconds: float) -> AsyncAnthropic:
    """An ``AsyncAnthropic`` with SDK retries off (Temporal retries instead).

    ``api_key``/``base_url`` None fall back to the SDK's defaults (``ANTHROPIC_API_KEY``,
    ``https://api.anthropic.com``). ``timeout_seconds`` bounds each HTTP request and
    should stay below the activity's start-to-close timeout.
    """
    return sdk().AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0)


def offline_client(
    timeout_seconds: float,
    brain: Optional[Callable[[dict, Optional[dict]], dict]] = None,
    plans: Optional[Plans] = None,
    cache: Optional[Any] = None,
) -> AsyncAnthropic:
    """An ``AsyncAnthropic`` whose HTTP goes in-process to the offline stand-in model,
    ``systems.model.server.offline_app(brain, plans, cache)``: ``brain(view, plan)`` replaces
    its decisions (tests), ``plans`` (a ``PlanBook``) holds benchmark plans, ``cache`` (a
    ``systems.model.cache.PromptCache``; None: the app's own) models the prompt cache.

    Note: anthropic 2.x is built on ``httpx2`` and refuses ``httpx`` objects
    (TypeError), so the transport is ``httpx2.ASGITransport``.
    """
    import httpx2  # noqa: PLC0415

    from systems.model.server import (
        offline_app,  # the server pulls in FastAPI; only load it when used
    )

    http_client = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=offline_app(brain, plans, cache)), base_url=OFFLINE_BASE_URL,
        timeout=timeout_seconds,
    )
    return sdk().AsyncAnthropic(
        api_key="offline", base_url=OFFLINE_BASE_URL, timeout=timeout_seconds, max_retries=0, http_client=http_client
    )


def _snapshot(req: ModelRequest) -> ModelSnapshot:
    """The model input of ``req``: its view rendered with its prompt version, or the
    snapshot a v0.1.0 workflow sent. Raises a non-retryable ``ModelRequestRejected`` for
    an unknown prompt version (a newer worker's prompt: no retry can render it here)."""
    if req.view is None:
        assert req.snapshot is not None  # ModelRequest requires one of them
        return req.snapshot
    try:
        return render_request(req.view, req.prompt_version or PROMPT_VERSION)
    except UnknownPromptVersion as exc:
        raise ApplicationError(f"unknown prompt version {exc.args[0]!r}", type=REJECTED, non_retryable=True) from exc


class ModelActivities(ModelActivitiesApi):
    """Holds the SDK client; register ``instance.propose_action`` with the worker.

    ``client`` must be built with ``max_retries=0`` (``build_client``/``offline_client``);
    ``max_tokens`` bounds the model's output per call; ``journal`` (None: not recorded)
    receives one decision-log row per call; ``turn_records`` (None: never) is the journal the
    workflows' turn records go to, where a reply's turn record is written (``ModelRequest.journal``).
    """

    def __init__(self, client: Union["AsyncAnthropic", Callable[[], "AsyncAnthropic"]], model: str,
                 max_tokens: int = 1024, journal: Optional["JournalStore"] = None,
                 turn_records: Optional["JournalStore"] = None) -> None:
        # a factory (``lambda: build_client(...)``) defers the SDK's import to ``warm`` or the first call
        self._client, self._factory = (None, client) if callable(client) else (client, None)
        self._building = threading.Lock()
        self.model = model
        self.max_tokens = max_tokens
        self.journal = journal
        self.turn_records = turn_records

    @property
    def client(self) -> "AsyncAnthropic":
        """The SDK client (built from the factory on first use)."""
        with self._building:
            if self._client is None:
                self._client = self._factory()
            return self._client

    def warm(self) -> None:
        """Build the client now (in a thread, once the worker polls: the import takes seconds)."""
        self.client  # noqa: B018

    @activity.defn
    async def propose_action(self, req: ModelRequest) -> ModelResult:
        """Ask the model for the next action on ``req``'s view (or legacy snapshot), and
        record the call in the journal (also when it fails).

        Returns the validated proposal with the responding model id and token usage.
        Raises ``ApplicationError`` of type ModelRequestRejected (non-retryable),
        ModelUnavailable or MalformedModelOutput (both retryable).
        """
        snapshot = _snapshot(req)
        kwargs = build_create_kwargs(
            snapshot, model=self.model, max_tokens=self.max_tokens, conversation_id=req.conversation_id,
            prompt_version=req.prompt_version or PROMPT_VERSION,
        )
        response: Any = None
        try:
            try:
                async with heartbeating():
                    if self._client is None:
                        await asyncio.to_thread(self.warm)
                    await self._check_budget(req, kwargs)
                    response = await self.client.messages.create(**kwargs)
            except sdk().AnthropicError as exc:
                raise map_api_error(exc) from exc
            except RecursionError as exc:
                # the response's JSON nests deeper than the parser recurses: an unusable answer
                raise ApplicationError("the model's answer is nested too deeply to read", type=MALFORMED) from exc
            except TypeError as exc:
                # The SDK raises a bare TypeError when no api key / token is configured.
                if "authentication method" not in str(exc):
                    raise
                raise ApplicationError(f"model credentials: {exc}", type=REJECTED, non_retryable=True) from exc
            try:
                action = read_proposal(response)
            except MalformedOutput as exc:
                raise ApplicationError(
                    str(exc), {"model": response.model, "stop_reason": response.stop_reason}, type=MALFORMED
                ) from exc
        except Exception:
            await self._record(req, response, None)
            raise
        usage: Any = response.usage
        result = ModelResult(
            action=action,
            model=response.model,
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
            cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        )
        completes_turn = req.journal is not None and action.kind == "reply"
        if completes_turn and self.turn_records is self.journal and self._recordable(req):
            # one transaction for the call's row and the turn its reply completes
            result.journaled = await self._record(req, response, result, reply=action.text)
        else:
            await self._record(req, response, result)
            if completes_turn:
                result.journaled = await self._record_turn(req, action.text)
        return result

    async def _record_turn(self, req: ModelRequest, text: str) -> bool:
        """Write the turn's record completed by this reply; False (the workflow writes it) when
        there is no turn journal or it failed (logged: ids and the exception's type only)."""
        if self.turn_records is None or req.journal is None:
            return False
        record = req.journal.with_reply(req.call_seq, text, datetime.now(timezone.utc))
        try:
            async with heartbeating():
                await asyncio.to_thread(self.turn_records.record_turn, record)
        except Exception as exc:  # noqa: BLE001  (the workflow's own write takes over)
            log.warning("journal: turn %s.t%d not recorded with its reply: %s", req.conversation_id, req.turn,
                        type(exc).__name__)
            return False
        return True

    async def _check_budget(self, req: ModelRequest, kwargs: dict[str, Any]) -> None:
        """With a budget (``req.budget_remaining_tokens``), count the request's input tokens
        first (``messages.count_tokens``: the provider's count; the offline stand-in's is
        characters / 4) and raise a non-retryable ``TokenBudgetExceeded`` when the input plus
        the output bound (``max_tokens``) would not fit the rest. SDK errors propagate."""
        remaining = req.budget_remaining_tokens
        if remaining is None:
            return
        counted = await self.client.messages.count_tokens(**{k: kwargs[k] for k in COUNTED_FIELDS if k in kwargs})
        needed = counted.input_tokens + self.max_tokens
        if needed > remaining:
            raise ApplicationError(f"the next model call needs up to {needed} tokens; {remaining} are left of the "
                                   "conversation's budget", {"needed": needed, "remaining": remaining},
                                   type=OVER_BUDGET, non_retryable=True)

    def _recordable(self, req: ModelRequest) -> bool:
        return self.journal is not None and req.view is not None and req.call_seq >= 1

    async def _record(self, req: ModelRequest, response: Any, result: Optional[ModelResult],
                      reply: Optional[str] = None) -> bool:
        """Upsert this call's decision-log row (only for requests that carry a view and a
        ``call_seq``: v0.1.0's snapshots have no key to record under). With ``reply`` (the
        text of a reply that completes the turn, whose journal is this one), the turn's record
        goes in the same transaction; returns whether it was written (False: the workflow
        writes it). If that transaction fails, the call's row is tried again alone.

        A journal failure never fails the model call: the proposal is what the conversation
        needs, and failing would spend another model call per retry and stop every
        conversation while the journal is down. The failure is logged (ids only, no
        personal data) and the decision-log row is missing for this call."""
        if not self._recordable(req):
            return False
        from activities.store.journal import ModelCallRecord  # noqa: PLC0415  (SQLAlchemy only when journaling)

        usage: Any = getattr(response, "usage", None)
        customer = req.view.get("customer") or {}
        record = ModelCallRecord(
            conversation_id=req.conversation_id, turn=req.turn, call_seq=req.call_seq,
            customer_id=customer.get("user_id") if isinstance(customer, dict) else None,
            prompt_version=req.prompt_version or PROMPT_VERSION,
            model=getattr(response, "model", None) or self.model, view=req.view,
            proposal=result.action.model_dump(mode="json") if result else None,
            stop_reason=getattr(response, "stop_reason", None),
            input_tokens=getattr(usage, "input_tokens", 0) or 0, output_tokens=getattr(usage, "output_tokens", 0) or 0,
            cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
            cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
            recorded_at=datetime.now(timezone.utc),
        )
        turn = req.journal.with_reply(req.call_seq, reply, record.recorded_at) \
            if reply is not None and req.journal is not None else None
        try:
            async with heartbeating():
                await asyncio.to_thread(self.journal.record_model_call, record, turn)
            return turn is not None
        except Exception as exc:  # noqa: BLE001  (any journal failure; see above)
            if turn is None:
                log.warning("decision log: model call %s.t%d.c%d not recorded: %s", req.conversation_id, req.turn,
                            req.call_seq, type(exc).__name__)
                return False
            log.warning("journal: turn %s.t%d not recorded with its reply: %s", req.conversation_id, req.turn,
                        type(exc).__name__)
        # the turn's record failed (the workflow writes it): the call's own row alone, as before
        return await self._record(req, response, result)
