"""An offline stand-in for the Messages API: ``POST /v1/messages`` answered by a brain.

It speaks the wire format the anthropic SDK expects (request fields, the
``tool_use`` response, the ``{"type": "error", ...}`` error bodies; ``wire.py``), so
the caller runs the very same SDK code path offline. The "model" is a deterministic
function ``brain(view, plan)``: ``view`` is the state view parsed from the last user
message's ``<state_json>`` block (``view.py``), ``plan`` the plan registered in the
``PlanBook`` under the request's ``metadata.user_id`` (None without a book, an id or a
plan). ``offline_brain`` dispatches to ``scripted_brain`` when there is a plan
(benchmark runs), else ``rules_brain`` (interactive chat). Neither is intelligence;
both are stand-ins.

Usage is modelled (``cache.py``): the app's ``PromptCache`` follows the provider's caching
rules, so ``usage`` reports ``cache_read_input_tokens``, ``cache_creation_input_tokens`` and
the uncached ``input_tokens`` as the provider would bill them, tokens ≈ characters / 4.
``POST /v1/messages/count_tokens`` answers ``{"input_tokens"}`` by the same approximation.

Run it over real HTTP with ``python -m systems.model.server --port 8765
[--database-url URL]`` and point an Anthropic client's ``base_url`` at it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Protocol, Union

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from systems.model.cache import MAX_BREAKPOINTS, CacheRuleError, PromptCache, request_blocks, tokens_of
from systems.model.rules import rules_brain
from systems.model.scripted import scripted_brain
from systems.model.view import honour_offered, parse_state_view
from systems.model.wire import (
    answered_tool_name,
    approx_tokens,
    caller_user_id,
    error_body,
    offered_tool_names,
    request_problem,
    parallel_allowed,
    text_of,
    tool_use_message,
)

Brain = Callable[[dict, Optional[dict]], Union[dict, list, Awaitable[Union[dict, list]]]]
"""(state view, plan or None) -> raw ``ProposedAction`` dict, or a list of them (parallel tool
use: one ``tool_use`` block each), or an awaitable of either (a brain that takes its time, as a
real model does, without blocking the server)."""


class Plans(Protocol):
    """Where plans come from: ``PlanBook`` (``plans.py``), or any object with this ``get``."""

    def get(self, conversation_id: str) -> Optional[dict[str, Any]]: ...


class BrainFault(Exception):
    """Raised by a brain to make the server answer with an API error, e.g.
    ``BrainFault(529, "overloaded_error", "Overloaded")``; lets tests inject faults."""

    def __init__(self, status_code: int, error_type: str, message: str, headers: Optional[dict[str, str]] = None):
        super().__init__(message)
        self.status_code = status_code
        self.error_type = error_type
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class StoppedEarly:
    """Returned by a brain to make the server answer as a provider does when generation
    stopped before the tool call was complete: ``stop_reason`` ``"refusal"`` (a safety
    refusal) or ``"pause_turn"`` (a long turn paused), with the partial ``action`` as the
    tool input. Lets tests show such a response is never acted on."""

    stop_reason: str
    action: dict


def offline_brain(view: dict, plan: Optional[dict] = None,
                  offered: Optional[frozenset[str]] = None) -> Union[dict, list]:
    """Default brain: ``scripted_brain`` when the conversation has a plan (a list of reads it
    proposes together), else ``rules_brain``. ``offered``: the tools the request lets the answer
    call (None: all); the scripted brain works around a withheld read, and ``honour_offered``
    turns any other withheld call into a transfer to a human."""
    if plan is not None:
        planned = scripted_brain(view, plan, offered)
        if isinstance(planned, list):
            return [honour_offered(action, offered) for action in planned]
        return honour_offered(planned, offered)
    return honour_offered(rules_brain(view), offered)


def _error(status: int, error_type: str, message: str, headers: Optional[dict[str, str]] = None) -> JSONResponse:
    return JSONResponse(error_body(error_type, message), status_code=status, headers=headers)


def offline_app(brain: Optional[Brain] = None, plans: Optional[Plans] = None,
                cache: Optional[PromptCache] = None) -> FastAPI:
    """The FastAPI app serving ``POST /v1/messages`` with ``brain`` (default ``offline_brain``)
    and the plans of ``plans`` (none if None); ``cache`` (default: a fresh ``PromptCache`` of
    this app, shared by all its requests) models the provider's prompt cache in ``usage``.

    Answers 200 with one ``tool_use`` block per proposed action (several only where the request
    allows parallel tool use; the default brain never calls a tool the
    request's schema leaves out, ``honour_offered``); 400 ``invalid_request_error`` for a request
    missing model/max_tokens/messages, a tool schema or ``metadata`` the real API refuses,
    content without a ``<state_json>`` block, or more than 4 ``cache_control`` breakpoints; 401 without an api key header; the
    status of a ``BrainFault``; 500 ``api_error`` if the plan look-up or the brain fails.
    Ids and usage are deterministic functions of the request.
    """
    app = FastAPI(title="statekeeper offline model", docs_url=None, redoc_url=None, openapi_url=None)
    prompt_cache = cache if cache is not None else PromptCache()
    app.state.prompt_cache = prompt_cache

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> JSONResponse:
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return _error(401, "authentication_error", "x-api-key header is required")
        try:
            body = json.loads(await request.body())
        except (ValueError, RecursionError):
            return _error(400, "invalid_request_error", "request body is not valid JSON")
        problem = request_problem({**body, "max_tokens": 1}) if isinstance(body, dict) else "body must be an object"
        if problem:
            return _error(400, "invalid_request_error", problem)
        chars = sum(len(b.text) for b in request_blocks(body))
        return JSONResponse({"input_tokens": tokens_of(chars)})

    @app.post("/v1/messages")
    async def messages(request: Request) -> JSONResponse:
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return _error(401, "authentication_error", "x-api-key header is required")
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deeply
            return _error(400, "invalid_request_error", "request body is not valid JSON")
        problem = request_problem(body)
        if problem:
            return _error(400, "invalid_request_error", problem)
        if body.get("stream"):
            return _error(400, "invalid_request_error", "the offline model does not stream")
        breakpoints = sum(b.breakpoint for b in request_blocks(body))
        if breakpoints > MAX_BREAKPOINTS:
            return _error(400, "invalid_request_error", f"A maximum of {MAX_BREAKPOINTS} blocks with "
                                                        f"cache_control may be provided. Found {breakpoints}.")
        content = text_of(body["messages"][-1].get("content"))
        try:
            view = parse_state_view(content)
        except ValueError as exc:
            return _error(400, "invalid_request_error", f"offline model: {exc}")
        conversation_id = caller_user_id(body)
        plan = None
        try:
            if plans is not None and conversation_id:
                plan = await asyncio.to_thread(plans.get, conversation_id)
        except Exception as exc:  # e.g. the database is unreachable: retryable for the caller
            return _error(500, "api_error", f"offline model: plan look-up failed: {type(exc).__name__}: {exc}")
        offered = offered_tool_names(body)
        try:
            # a test brain answers as it likes (it may play a model that breaks the schema)
            action = offline_brain(view, plan, offered) if brain is None else brain(view, plan)
            if inspect.isawaitable(action):
                action = await action
        except BrainFault as fault:
            return _error(fault.status_code, fault.error_type, fault.message, fault.headers)
        except Exception as exc:  # a brain bug must look like a server error, not kill the server
            return _error(500, "api_error", f"offline brain failed: {type(exc).__name__}: {exc}")
        try:
            usage = prompt_cache.account(body)
        except CacheRuleError as exc:  # checked above; kept for a cache with other rules
            return _error(400, "invalid_request_error", str(exc))
        digest = hashlib.sha256(json.dumps([body["model"], body.get("system"), body["messages"],
                                            body.get("tools")], sort_keys=True).encode()).hexdigest()
        early = action.stop_reason if isinstance(action, StoppedEarly) else None
        action = action.action if isinstance(action, StoppedEarly) else action
        if isinstance(action, list) and (len(action) == 1 or not parallel_allowed(body)):
            action = action[0]  # one proposal, or parallel tool use turned off: the first only
        output = json.dumps(action, sort_keys=True)
        # the provider's rule: output that would pass the request's max_tokens stops there
        # (stop_reason "max_tokens"), with whatever input was produced so far
        limit = body["max_tokens"] if isinstance(body.get("max_tokens"), int) else None
        cut = limit is not None and approx_tokens(output) > limit
        return JSONResponse(
            tool_use_message(
                message_id=f"msg_offline_{digest[:24]}",
                tool_use_id=f"toolu_offline_{digest[24:48]}",
                model=body["model"],
                action=action,
                input_tokens=usage["input_tokens"],
                cache_creation_input_tokens=usage["cache_creation_input_tokens"],
                cache_read_input_tokens=usage["cache_read_input_tokens"],
                output_tokens=min(approx_tokens(output), limit) if cut and limit else approx_tokens(output),
                tool_name=answered_tool_name(body),
                stop_reason=early or ("max_tokens" if cut else "tool_use"),
            ),
            headers={"request-id": f"req_offline_{digest[:24]}", "x-statekeeper-usage": "modelled"},
        )

    return app


@dataclass
class RunningServer:
    """A uvicorn server running in a background thread; ``base_url`` is ``http://host:port``."""

    server: Any
    thread: threading.Thread
    base_url: str

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Ask uvicorn to exit and join its thread."""
        self.server.should_exit = True
        self.thread.join(timeout_seconds)


def start_in_thread(brain: Optional[Brain] = None, host: str = "127.0.0.1", port: int = 0,
                    startup_timeout_seconds: float = 10.0, plans: Optional[Plans] = None) -> RunningServer:
    """Serve ``offline_app(brain, plans)`` over real HTTP in a daemon thread.

    ``port=0`` binds a free port (the socket is bound here, so there is no race).
    Raises ``RuntimeError`` if uvicorn has not started within the timeout.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(offline_app(brain, plans), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="offline-model")
    thread.start()
    # uvicorn exposes no start callback; poll its flag.
    deadline = time.monotonic() + startup_timeout_seconds
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        server.should_exit = True
        raise RuntimeError("offline model server did not start")
    return RunningServer(server=server, thread=thread, base_url=f"http://{host}:{bound_port}")


def serve(host: str = "127.0.0.1", port: int = 8765, database_url: Optional[str] = None) -> None:
    """Serve the default offline model in the foreground (blocks until interrupted);
    with ``database_url``, plans come from a ``PlanBook`` on that database."""
    import uvicorn

    plans = None
    if database_url:
        import sqlalchemy as sa

        from systems.model.plans import PlanBook

        plans = PlanBook(sa.create_engine(database_url))
        plans.create_schema()
    uvicorn.run(offline_app(plans=plans), host=host, port=port, log_level="info")


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m systems.model.server [--host H] [--port P] [--database-url URL]``."""
    parser = argparse.ArgumentParser(description="statekeeper offline Messages API stand-in")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--database-url", default=None, help="SQLAlchemy URL of the plan book (default: no plans)")
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.database_url)


if __name__ == "__main__":
    main()
