"""What a failed activity or child workflow may say, and to whom.

An exception's own text is for operators, never for users or the model: a database
driver's message quotes the SQL statement, its parameters (a customer's email, address)
and the key values of a violated constraint; a connection error names hosts and ports.
Such text once reached a rejection reason (stored in the state, shown to the model,
returned by the API) and, through the model, a user's reply.

So ``public_reason`` words a failure from its kind alone (our ``ErrorType``, a timeout, or
"could not be reached" for anything else), and ``log_detail`` gives operators the
exception's type and its message with the SQL, parameters, quoted values and emails cut
out, for the worker's log. Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

import re
from typing import Optional

from temporalio.exceptions import ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeout

from workflows.domain.errors import ErrorType

ORDER_SYSTEM = "the order system"
TICKET_SYSTEM = "the ticketing system"
PAYMENTS_SYSTEM = "the payments system"
MODEL = "the model"

FAILED_SYSTEM = "failed_system"
"""The key of an ``ApplicationError``'s details that names which system failed when an activity
calls more than one (``failed_in``): a write's activity changes the order, then moves its
money through the payments service."""
PAYMENTS_AFTER_ORDER = "payments-after-order"
"""``FAILED_SYSTEM``'s value of a payments failure after the order's write had committed."""
_AFTER: dict[str, str] = {PAYMENTS_AFTER_ORDER: "the order was changed, but " + PAYMENTS_SYSTEM}

_REFUSED: dict[str, str] = {
    ErrorType.UNKNOWN_TOOL.value: "{system} refused the change: it does not offer this operation",
    ErrorType.INVALID_ARGUMENTS.value: "{system} refused the request: it is not one this operation takes",
    ErrorType.UNKNOWN_STORE.value: "{system} refused the request: it does not hold this store",
    ErrorType.IDEMPOTENCY_KEY_CONFLICT.value: "{system} refused the change: this step already holds a different "
                                              "change",
    ErrorType.WRONG_SYSTEM_OF_RECORD.value: "{system} could not be reached: only workers on another system of "
                                            "record were available",
    ErrorType.INVALID_DATA.value: "{system} refused the data as invalid (such as a control character); nothing "
                                  "was changed",
    ErrorType.OUTCOME_UNKNOWN.value: "{system} could not say whether the change was made",
    ErrorType.MODEL_REQUEST_REJECTED.value: "{system} refused the request",
    ErrorType.MODEL_UNAVAILABLE.value: "{system} could not be reached",
}
"""Policy-level wording of each failure kind we raise on purpose; ``{system}`` is who failed."""

_MALFORMED_PREFIX = "the model's answer was not one valid proposal"
MAX_DETAIL_CHARS = 300

_CUT = re.compile(r"\[SQL:|\[parameters:|\(Background on this error|\bLINE [0-9]+:|\bDETAIL:|\bHINT:", re.ASCII)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,190}", re.ASCII)
_QUOTED = re.compile(r"'[^'\n]{0,500}'|\"[^\"\n]{0,500}\"|\([^()\n]{0,200}\)=\([^()\n]{0,500}\)")


def application_cause(err: BaseException) -> BaseException:
    """The first ``ApplicationError`` under the Temporal wrappers of a (child workflow →
    activity → application) failure chain: the error our activity raised, with its type;
    else the innermost cause."""
    while not isinstance(err, ApplicationError) and getattr(err, "cause", None) is not None:
        err = err.cause  # type: ignore[assignment]
    return err


def failed_in(cause: BaseException) -> Optional[str]:
    """The ``FAILED_SYSTEM`` named in the details of ``cause`` (an ``ApplicationError`` our
    activity raised), or None."""
    if not isinstance(cause, ApplicationError):
        return None
    for detail in cause.details or ():
        if isinstance(detail, dict) and isinstance(detail.get(FAILED_SYSTEM), str):
            return detail[FAILED_SYSTEM]
    return None


def _scrub(text: str) -> str:
    """``text`` up to a quoted SQL statement, its parameters or a driver's ``DETAIL`` /
    ``LINE``, with emails as ``<email>``, on one line, at most 300 characters."""
    cut = _CUT.search(text)
    if cut is not None:
        text = text[: cut.start()]
    return " ".join(_EMAIL.sub("<email>", text[: MAX_DETAIL_CHARS * 4]).split())[:MAX_DETAIL_CHARS]


def redact(text: str) -> str:
    """``text`` without what may hold personal or internal data: everything from a quoted
    SQL statement, its parameters or a driver's ``DETAIL``/``LINE`` on; quoted values and
    ``(column)=(value)`` pairs become ``'…'``; emails ``<email>``. At most 300 characters."""
    return _scrub(_QUOTED.sub("'…'", _scrub(text)))


def public_reason(err: BaseException, system: str = ORDER_SYSTEM) -> str:
    """A failure of ``system`` (who was called: ``ORDER_SYSTEM``, ``MODEL``) worded for the
    state, the model and operators' views: from its kind, never from its message. A model
    answer that did not validate keeps the (redacted) summary of what was wrong with it,
    which our own activity wrote (the stop reason, or the schema's complaint: field paths and
    rules, no values), so the model can correct it. A failure our activity names as another
    system's (``failed_in``: the payments service after the order's write committed) names
    that system instead of ``system``: "the order was changed, but the payments system could
    not be reached"."""
    cause = application_cause(err)
    system = _AFTER.get(failed_in(cause) or "", system)
    if isinstance(cause, ApplicationError):
        if cause.type == ErrorType.MALFORMED_MODEL_OUTPUT.value:
            return f"{_MALFORMED_PREFIX} ({_scrub(cause.message)})"
        wording = _REFUSED.get(cause.type or "")
        if wording is not None:
            return wording.format(system=system)
    if isinstance(cause, TemporalTimeout):
        return f"{system} did not answer in time"
    return f"{system} could not be reached"


def log_detail(err: BaseException) -> str:
    """``Type: message`` of the failure's cause, redacted (``redact``): for the worker's log."""
    cause = application_cause(err)
    kind = cause.type if isinstance(cause, ApplicationError) and cause.type else type(cause).__name__
    message = cause.message if isinstance(cause, ApplicationError) else str(cause)
    return f"{kind}: {redact(message)}"
