"""Logging for statekeeper's processes, with personal data redacted at every level.

Log records are formatted by the SDK, SQLAlchemy and uvicorn from values we do not control
(an activity's failure with its arguments, a SQL error with its parameters, a request's query
string), so redaction works on the formatted text of every record (message, exception and
stack): e-mail addresses, payment method ids, SQL parameters and the values of personal
fields (``email``, ``first_name``, ``address1``, ``zip``, ``payment_method_id``, ``user_id``,
...; in JSON, Python reprs, ``key=value`` and query strings) become placeholders. The ids an
operator needs (orders, items, conversations, workflow and activity ids) stay.
"""

from __future__ import annotations

import logging
import re
from typing import Optional, Union

from opentelemetry import trace

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
"""An e-mail address, also URL-encoded (``%40``: in a request line of the access log)."""
USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{4}\b", re.ASCII)
"""The reference system's customer ids (``first_last_1234``): they hold the person's name."""
PAYMENT_METHOD = re.compile(r"\b(?:credit_card|debit_card|gift_card|paypal|bank_account|apple_pay)_\d+\b", re.ASCII)
PERSONAL_FIELDS = ("email", "email_lc", "first_name", "last_name", "full_name", "address1", "address2", "city",
                   "zip", "zip_code", "postal_code", "phone", "payment_method_id", "user_id", "customer_id",
                   "expected_user_id", "last_four")
"""Field names whose values are personal: the customer's identity, address and payment
methods. Matched as whole names."""
_QUOTED = r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'"
PERSONAL_VALUE = re.compile(
    r"(?P<key>[\"']?\b(?:" + "|".join(PERSONAL_FIELDS) + r")\b[\"']?\s*(?::|=)\s*)"
    r"(?P<value>" + _QUOTED + r"|[^\s,;)}\]&\"']+)", re.ASCII)
SQL_PARAMETERS = re.compile(r"\[parameters: .*?\](?=\s*(?:\n|\(Background|$))", re.DOTALL | re.ASCII)
REDACTED = "<redacted>"


def redact(text: str) -> str:
    """``text`` with personal data replaced: SQL parameter lists, personal fields' values
    (``<redacted>``, quotes kept), e-mail addresses (``<email>``), payment method ids
    (``<payment_method>``) and customer ids (``<user_id>``). Idempotent."""
    text = SQL_PARAMETERS.sub(f"[parameters: {REDACTED}]", text)
    text = PERSONAL_VALUE.sub(_field, text)
    text = EMAIL.sub("<email>", text)
    text = PAYMENT_METHOD.sub("<payment_method>", text)
    return USER_ID.sub("<user_id>", text)


def _field(match: re.Match) -> str:
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group('key')}{quote}{REDACTED}{quote}"


class RedactingFilter(logging.Filter):
    """A handler filter that redacts (``redact``) each record's message, exception text and
    stack before any formatter sees them; it never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_statekeeper_redacted", False):
            return True  # a record reaching several handlers is redacted once
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the raw text, redacted
            message = f"{record.msg} {record.args}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        record._statekeeper_redacted = True
        return True


class TraceContextFilter(logging.Filter):
    """A handler filter that stamps each record with ``trace_id``: the current OpenTelemetry
    span's trace id (32 hex digits; ``starter.runtime.telemetry``), ``-`` outside any span. Never drops
    a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        # no import here: a record logged inside the workflow sandbox would import through it
        if not hasattr(record, "trace_id"):
            record.trace_id = current_trace_id() or "-"
        return True


def current_trace_id() -> Optional[str]:
    """The current OpenTelemetry span's trace id as 32 hex digits, None outside any span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s trace_id=%(trace_id)s: %(message)s"
"""Every line names its trace (``-`` when logged outside a span)."""


def log_formatter() -> logging.Formatter:
    """``LOG_FORMAT``, with ``trace_id`` ``-`` for a record no ``TraceContextFilter`` saw."""
    return logging.Formatter(LOG_FORMAT, defaults={"trace_id": "-"})


def configure_logging(level: Union[int, str] = logging.INFO, stream: Optional[object] = None) -> None:
    """Log records at ``level`` (``logging.INFO`` or ``"INFO"``) and above to stderr (or ``stream``) with ``LOG_FORMAT``, every
    handler of the root logger (and the last-resort handler used when none is configured)
    redacting personal data and stamping the trace id. Idempotent; a later call changes the level."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(stream)  # type: ignore[arg-type]
        handler.setFormatter(log_formatter())
        root.addHandler(handler)
    root.setLevel(level)
    handlers = [*root.handlers, *([logging.lastResort] if logging.lastResort else [])]
    for handler in handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
        if not any(isinstance(f, TraceContextFilter) for f in handler.filters):
            handler.addFilter(TraceContextFilter())


class OneLineWarnings(logging.Filter):
    """A console handler filter: a record below ERROR keeps its exception's last line, not its
    stack trace (e.g. the SDK's warning for an activity attempt that Temporal retries: people
    at a terminal never see stack traces; errors keep theirs). Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR and (record.exc_info or record.exc_text):
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)  # type: ignore[arg-type]
            last = text.strip().splitlines()[-1] if text.strip() else ""
            record.msg, record.args = f"{record.getMessage()}: {last.split(': ', 1)[-1]}", None
            record.exc_info, record.exc_text = None, None
        return True


def cli_logging() -> None:
    """The ``statekeeper`` command line's callback: every command logs warnings and errors to
    stderr, redacted, warnings on one line; ``worker``, ``api`` and ``codec-server`` lower the
    level to INFO."""
    configure_logging(logging.WARNING)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OneLineWarnings) for f in handler.filters):
            handler.filters.insert(0, OneLineWarnings())  # before redaction, which formats the trace
