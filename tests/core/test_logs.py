"""What statekeeper's processes log (``starter.runtime.logs``, ``starter.runtime.telemetry``):

- never personal data: the texts our processes really log (a SQL error with its parameters, an
  activity failure carrying the user document, an access log line with a customer id) lose the
  customer's email, names, address and payment method ids at every level, while the ids an
  operator needs stay;
- every line names its trace: ``trace_id=<32 hex>`` inside an OpenTelemetry span,
  ``trace_id=-`` outside any;
- at a terminal, a warning in one line and an error with its trace.
"""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from opentelemetry.sdk.trace import TracerProvider

from starter.runtime.logs import RedactingFilter, configure_logging, redact
from tests.log_capture import root_log
from tests.policy_fixtures import CARD, CUSTOMER, EMAIL, GIFT, PENDING, data


# --- No personal data ---

USER = data()["users"][CUSTOMER]
PERSONAL = (EMAIL, CUSTOMER, USER["name"]["first_name"], USER["name"]["last_name"], USER["address"]["address1"],
            USER["address"]["city"], USER["address"]["zip"], CARD, GIFT)

SQL_ERROR = f"""(sqlite3.OperationalError) database is locked
[SQL: SELECT users.user_id FROM users WHERE users.email_lc = ?]
[parameters: ('{EMAIL}',)]
(Background on this error at: https://sqlalche.me/e/20/e3q8)"""
ACTIVITY_FAILURE = (f"Completing activity as failed ({{'activity_id': '7', 'activity_type': 'get_user_details', "
                    f"'workflow_id': 'support-tb-1-3'}}): the user document {USER!r} for order {PENDING}")
ACCESS_LINE = f'127.0.0.1:5312 - "GET /conversations?customer_id={CUSTOMER}&order_id=%23W4566809 HTTP/1.1" 200'
ENCODED_EMAIL = f'127.0.0.1:5313 - "GET /conversations/{EMAIL.replace("@", "%40")} HTTP/1.1" 404'
SAMPLES = [SQL_ERROR, ACTIVITY_FAILURE, ACCESS_LINE, ENCODED_EMAIL, json.dumps(USER), f"reply to {EMAIL}: refund to {GIFT}",
           f"user_id={CUSTOMER} payment_method_id: {CARD}"]


def leaks(text: str) -> list[str]:
    return [p for p in PERSONAL if p.lower() in text.lower()]


@pytest.mark.parametrize("sample", SAMPLES)
def test_redaction_removes_personal_values_and_keeps_ids(sample):
    assert leaks(sample)  # the sample really carries personal data
    cleaned = redact(sample)
    assert leaks(cleaned) == []
    assert redact(cleaned) == cleaned  # idempotent
    assert (PENDING in cleaned) == (PENDING in sample)  # order ids stay
    if "activity_type" in sample:
        assert "get_user_details" in cleaned and "support-tb-1-3" in cleaned
    if "SELECT" in sample:
        assert "SELECT users.user_id FROM users" in cleaned and "[parameters: <redacted>]" in cleaned


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL])
def test_every_level_message_arguments_and_exceptions_are_redacted(level):
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter())
    second = io.StringIO()
    also = logging.StreamHandler(second)  # a record reaching two handlers
    also.addFilter(RedactingFilter())
    logger = logging.getLogger(f"test.redaction.{level}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    logger.addHandler(also)
    try:
        try:
            raise LookupError(f"no order for {EMAIL} ({USER['address']})")
        except LookupError:
            logger.log(level, "lookup of %s failed: %r", CUSTOMER, {"payment_method_id": CARD}, exc_info=True,
                       stack_info=True)
    finally:
        logger.removeHandler(handler)
        logger.removeHandler(also)
    for text in (out.getvalue(), second.getvalue()):
        assert "lookup of <user_id> failed" in text
        assert "LookupError" in text and "Traceback" in text and "Stack (most recent call last)" in text
        assert leaks(text) == [], text


def test_configure_logging_filters_the_root_handlers_and_the_last_resort():
    root = logging.getLogger()
    with root_log(logging.INFO) as out:
        configure_logging(logging.INFO, stream=out)  # idempotent: one handler, one filter of each kind
        assert len(root.handlers) == 1
        assert sorted(type(f).__name__ for f in root.handlers[0].filters) == ["RedactingFilter", "TraceContextFilter"]
        assert any(isinstance(f, RedactingFilter) for f in logging.lastResort.filters)
        logging.getLogger("statekeeper.test").info("worker polling for %s", EMAIL)
        assert "worker polling for <email>" in out.getvalue()


def test_console_warnings_carry_their_exception_in_one_line_and_errors_their_trace():
    """At a terminal (``cli_logging``), a retried activity's warning shows no stack trace
    (``make demo`` shows such warnings); an error keeps it."""
    import io
    import logging

    from starter.runtime.logs import OneLineWarnings, RedactingFilter, log_formatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(log_formatter())
    handler.filters[:] = [OneLineWarnings(), RedactingFilter()]
    logger = logging.getLogger("test.one_line_warnings")
    logger.propagate, logger.handlers = False, [handler]
    try:
        raise RuntimeError("the payments system failed (500)")
    except RuntimeError:
        logger.warning("Completing activity as failed", exc_info=True)
        logger.error("an error keeps its trace", exc_info=True)
    warning, error = stream.getvalue().split("an error keeps its trace")
    assert "Traceback" not in warning and "Completing activity as failed: the payments system failed (500)" in warning
    assert "Traceback" in error and "RuntimeError" in error


# --- Trace ids ---

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
