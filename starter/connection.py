"""The one place that connects to Temporal: the data converter (pydantic now; a payload
codec joins it here) and the client. Used by the worker, the API, the CLI and the tests."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from settings import Settings


def data_converter() -> DataConverter:
    """The data converter every client and worker of statekeeper uses."""
    return pydantic_data_converter


async def connect(settings: Settings) -> Client:
    """A Temporal client for ``settings.temporal_address`` / ``temporal_namespace``.
    Raises ``RuntimeError`` when the server cannot be reached."""
    return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                data_converter=data_converter())
