"""One rule for read-only RPCs to the Temporal server, shared by the client, the worker's
startup checks and the health check."""

from __future__ import annotations

from typing import Awaitable, Callable, TypeVar

from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")


async def read_again_if_dropped(call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()``; when the connection dropped that RPC in flight (``CANCELLED``,
    "operation was canceled": seen in CI on ``DescribeTaskQueue``), call it once more.

    Only for RPCs that read (a describe, a listing, a query): asking twice changes nothing.
    Any other ``RPCError``, and a second drop, propagate as they are."""
    try:
        return await call()
    except RPCError as err:
        if err.status != RPCStatusCode.CANCELLED:
            raise
    return await call()
