"""The one place that connects to Temporal: the data converter (pydantic payloads, the
encryption codec of ``starter.runtime.codec``, failure messages encoded with it), the connection's
security (TLS, mTLS, API key) and telemetry (tracing interceptor, SDK metrics), and the
client. Used by the worker, the API, the CLI, the codec server and the tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional, Union

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes
from temporalio.service import TLSConfig

from settings import Settings
from starter.runtime.codec import payload_codec
from starter.runtime.preflight import StartupRefused
from starter.runtime.telemetry import telemetry_runtime, tracing_interceptor


def data_converter(settings: Optional[Settings] = None, *, create_key: bool = False) -> DataConverter:
    """The data converter every client and worker of statekeeper uses, for ``settings``
    (default: ``Settings()`` from the environment). With the codec on (the default) payloads
    are encrypted and failures carry their message and stack trace as an encrypted payload
    (``encode_common_attributes``); ``create_key``: see ``starter.runtime.codec.codec_keyring``.

    Raises ``starter.runtime.codec.CodecKeyMissing`` (a ``StartupRefused``) when encryption is on
    and no key is configured, ``starter.runtime.codec.CodecKeySettingInvalid`` (a ``StartupRefused`` too) for an
    unusable key setting."""
    codec = payload_codec(settings or Settings(), create=create_key)
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec,
                               failure_converter_class=DefaultFailureConverterWithEncodedAttributes)


def _pem(path: Optional[Path], setting: str) -> Optional[bytes]:
    if path is None:
        return None
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as err:
        raise StartupRefused(f"cannot read {setting} ({path}): {err.strerror or err}") from None
    if b"-----BEGIN " not in data:
        # the SDK's TLS layer would fail the connection, and that reads as "not reachable"
        raise StartupRefused(f"{setting} ({path}) is not a PEM file: it has no '-----BEGIN' line "
                             "(a DER certificate converts with `openssl x509 -inform der`)")
    return data


def tls_config(settings: Settings) -> Union[TLSConfig, bool, None]:
    """The ``tls`` argument of ``Client.connect`` for ``settings``: a ``TLSConfig`` when a CA,
    a client certificate/key or a server name is set (files read now), True for
    ``temporal_tls`` alone, else None (plain TCP; with an API key the SDK turns TLS on).
    Raises ``StartupRefused`` for a certificate without its key (or the reverse) or an
    unreadable file."""
    s = settings
    if (s.temporal_tls_client_cert is None) != (s.temporal_tls_client_key is None):
        raise StartupRefused("mTLS needs both STATEKEEPER_TEMPORAL_TLS_CLIENT_CERT and "
                             "STATEKEEPER_TEMPORAL_TLS_CLIENT_KEY (one is set without the other)")
    if not any((s.temporal_tls_server_ca_cert, s.temporal_tls_client_cert, s.temporal_tls_server_name)):
        return True if s.temporal_tls else None
    return TLSConfig(server_root_ca_cert=_pem(s.temporal_tls_server_ca_cert, "STATEKEEPER_TEMPORAL_TLS_SERVER_CA_CERT"),
                     client_cert=_pem(s.temporal_tls_client_cert, "STATEKEEPER_TEMPORAL_TLS_CLIENT_CERT"),
                     client_private_key=_pem(s.temporal_tls_client_key, "STATEKEEPER_TEMPORAL_TLS_CLIENT_KEY"),
                     domain=s.temporal_tls_server_name)


def connect_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of ``Client.connect`` for ``settings`` other than the address and
    the data converter: namespace, ``tls`` (``tls_config``), ``api_key``, the tracing
    interceptor (a worker on the client inherits it) and the metrics ``runtime``."""
    options: dict[str, Any] = {"namespace": settings.temporal_namespace, "tls": tls_config(settings),
                               "interceptors": [tracing_interceptor(settings)]}
    if settings.temporal_api_key is not None:
        options["api_key"] = settings.temporal_api_key.get_secret_value()
    runtime = telemetry_runtime(settings)
    if runtime is not None:
        options["runtime"] = runtime
    return options


async def connect(settings: Settings, *, create_key: bool = False) -> Client:
    """A Temporal client for ``settings.temporal_address`` with ``connect_options(settings)``
    and ``data_converter(settings)``. Raises ``RuntimeError`` when the server cannot be
    reached (``TemporalUnreachable``, a ``StartupRefused``), ``StartupRefused`` for unusable TLS settings, ``CodecKeyMissing`` /
    ``CodecKeySettingInvalid`` as ``data_converter``."""
    converter = data_converter(settings, create_key=create_key)
    options = connect_options(settings)
    try:
        return await Client.connect(settings.temporal_address, data_converter=converter, **options)
    except StartupRefused:
        raise
    except RuntimeError as err:  # the SDK's transport text names hosts and library internals
        raise TemporalUnreachable(
            f"Temporal is not reachable at {settings.temporal_address} (namespace {settings.temporal_namespace}): "
            "start it (`statekeeper dev`), or set STATEKEEPER_TEMPORAL_ADDRESS and, for a secured cluster, "
            "the STATEKEEPER_TEMPORAL_TLS_* / STATEKEEPER_TEMPORAL_API_KEY settings") from err


class TemporalUnreachable(StartupRefused):
    """``connect`` found no Temporal server at the configured address (a ``RuntimeError``, as
    the SDK raises; the CLI prints the message alone and exits 2)."""
