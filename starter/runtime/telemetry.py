"""OpenTelemetry for statekeeper's processes: tracing through Temporal's contrib interceptor
(``temporalio.contrib.opentelemetry.TracingInterceptor``: client calls, workflow runs,
updates, signals and activities become spans of one trace) and the Temporal SDK's metrics
(its Rust core's ``Runtime`` telemetry: Prometheus scrape endpoint or OTLP push).

Configured by settings (``Settings.otel_*``, ``metrics_*``): tracing is always on, so every
log line carries its trace id (``starter.runtime.logs``); spans go to an OTLP/HTTP endpoint when
``otel_exporter_otlp_endpoint`` is set, else nowhere. Used by ``starter.runtime.connection.connect``
only: the worker, the API and the CLI connect there, and a worker inherits its client's
interceptors.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Optional

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig

from settings import Settings

log = logging.getLogger("statekeeper.telemetry")
_lock = threading.Lock()
_exporting: set[str] = set()
_runtimes: dict[tuple[Optional[str], Optional[str]], Runtime] = {}


def tracer_provider(settings: Settings) -> TracerProvider:
    """The process's SDK tracer provider: the global one if it is already an SDK provider
    (set by this function before, by a test or by an auto-instrumentation), else a new one
    named ``otel_service_name``, made global. Adds a batching OTLP/HTTP exporter for
    ``otel_exporter_otlp_endpoint`` once per endpoint."""
    with _lock:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider(resource=Resource.create({SERVICE_NAME: settings.otel_service_name}))
            trace.set_tracer_provider(provider)
            provider = trace.get_tracer_provider()
            assert isinstance(provider, TracerProvider)
        endpoint = settings.otel_exporter_otlp_endpoint
        if endpoint and endpoint not in _exporting:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
            _exporting.add(endpoint)
        return provider


def tracing_interceptor(settings: Settings) -> TracingInterceptor:
    """Temporal's tracing interceptor over ``tracer_provider(settings)``."""
    return TracingInterceptor(tracer_provider(settings).get_tracer("statekeeper"))


def telemetry_runtime(settings: Settings) -> Optional[Runtime]:
    """A Temporal ``Runtime`` exporting the SDK's metrics (Prometheus on
    ``metrics_prometheus_address`` and/or OTLP to ``metrics_otlp_endpoint``; Prometheus wins
    when both are set), one per process and configuration; None when metrics are off (the
    SDK's default runtime)."""
    key = (settings.metrics_prometheus_address, settings.metrics_otlp_endpoint)
    if key == (None, None):
        return None
    with _lock:
        if key not in _runtimes:
            if settings.metrics_prometheus_address:
                if settings.metrics_otlp_endpoint:  # the SDK's runtime takes one: say which, not silently
                    log.warning("STATEKEEPER_METRICS_PROMETHEUS_ADDRESS and STATEKEEPER_METRICS_OTLP_ENDPOINT are "
                                "both set: metrics are served for Prometheus and not pushed over OTLP; set one")
                metrics = PrometheusConfig(bind_address=settings.metrics_prometheus_address)
            else:
                metrics = OpenTelemetryConfig(url=str(settings.metrics_otlp_endpoint),
                                              metric_periodicity=timedelta(seconds=10))
            _runtimes[key] = Runtime(telemetry=TelemetryConfig(
                metrics=metrics, global_tags={"service_name": settings.otel_service_name}))
        return _runtimes[key]
