"""statekeeper's starters: everything that starts, steers or serves a run from outside a worker.

The public face for backend services is small and imported from here::

    from starter import StatekeeperClient, ConversationError, client_for, connect

Subpackages, one role each: ``api`` (the HTTP API), ``client`` (the Python client), ``cli``
(the ``statekeeper`` command line), ``dev`` (the embedded Temporal dev server and its
services), ``runtime`` (the worker and what every process shares: connection, codec, logs,
telemetry) and ``ops`` (operator tools: replay checks, backtests, the τ-bench runner).
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

_PUBLIC = {
    "StatekeeperClient": "starter.client.conversations",
    "client_for": "starter.ops.bootstrap",
    "ConversationError": "starter.client.errors",
    "RefundStatus": "starter.client.refunds",
    "connect": "starter.runtime.connection",
}

__all__ = ["package_version", *_PUBLIC]


def package_version() -> str:
    """The installed statekeeper's version (``pyproject.toml``), e.g. ``1.0.0``; the
    OpenAPI document and the image tag carry it. ``0+unknown`` when run uninstalled."""
    try:
        return version("statekeeper")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> Any:
    # Imported on first use: the command line imports ``starter`` on every start and must
    # not pay for the client's Temporal and pydantic imports when it does not need them.
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'starter' has no attribute {name!r}")
