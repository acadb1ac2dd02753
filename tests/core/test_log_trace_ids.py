"""Every log line of statekeeper's processes names its trace: ``trace_id=<32 hex>`` inside
an OpenTelemetry span (``starter.runtime.telemetry``), ``trace_id=-`` outside any."""

from __future__ import annotations

import logging
import re

from opentelemetry.sdk.trace import TracerProvider

from tests.log_capture import root_log


def test_log_lines_carry_the_current_trace_id_or_a_dash():
    with root_log(logging.INFO) as out:
        log = logging.getLogger("statekeeper.test")
        log.info("outside any span")
        tracer = TracerProvider().get_tracer("test")
        with tracer.start_as_current_span("turn") as span:
            log.info("inside a span for %s", "someone@example.com")
            expected = format(span.get_span_context().trace_id, "032x")
        lines = out.getvalue().splitlines()
        assert re.search(r" INFO statekeeper\.test trace_id=-: outside any span$", lines[0]), lines[0]
        assert lines[1].endswith(f"statekeeper.test trace_id={expected}: inside a span for <email>"), lines[1]
        assert re.fullmatch(r"[0-9a-f]{32}", expected) and expected != "0" * 32


def test_a_record_no_filter_saw_still_formats():
    from starter.runtime.logs import log_formatter

    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "plain", None, None)
    assert log_formatter().format(record).endswith("WARNING x trace_id=-: plain")
