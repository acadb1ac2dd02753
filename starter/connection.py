"""The one place that connects to Temporal: the data converter (pydantic payloads, the
encryption codec of ``starter.codec``, failure messages encoded with it) and the client.
Used by the worker, the API, the CLI, the codec server and the tests."""

from __future__ import annotations

import dataclasses
from typing import Optional

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes

from settings import Settings
from starter.codec import payload_codec


def data_converter(settings: Optional[Settings] = None, *, create_key: bool = False) -> DataConverter:
    """The data converter every client and worker of statekeeper uses, for ``settings``
    (default: ``Settings()`` from the environment). With the codec on (the default) payloads
    are encrypted and failures carry their message and stack trace as an encrypted payload
    (``encode_common_attributes``); ``create_key``: see ``starter.codec.codec_keyring``.

    Raises ``starter.codec.CodecKeyMissing`` (a ``StartupRefused``) when encryption is on
    and no key is configured, ``starter.codec.CodecKeyError`` for an unusable key setting."""
    codec = payload_codec(settings or Settings(), create=create_key)
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec,
                               failure_converter_class=DefaultFailureConverterWithEncodedAttributes)


async def connect(settings: Settings, *, create_key: bool = False) -> Client:
    """A Temporal client for ``settings.temporal_address`` / ``temporal_namespace`` with
    ``data_converter(settings)``. Raises ``RuntimeError`` when the server cannot be reached,
    ``CodecKeyMissing`` / ``CodecKeyError`` as ``data_converter``."""
    converter = data_converter(settings, create_key=create_key)
    return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                data_converter=converter)
