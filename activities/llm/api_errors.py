"""SDK exceptions of the Messages API as the ``ApplicationError`` types the workflow's RetryPolicy
reads (see ``activities.llm.model_activity``): rejected (non-retryable), unavailable (retryable,
honouring ``retry-after``) or malformed (retryable)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio.exceptions import ApplicationError

from workflows.domain.errors import ErrorType

REJECTED = ErrorType.MODEL_REQUEST_REJECTED.value
UNAVAILABLE = ErrorType.MODEL_UNAVAILABLE.value
MALFORMED = ErrorType.MALFORMED_MODEL_OUTPUT.value
RETRYABLE_4XX = frozenset({408, 409, 429})
MAX_RETRY_AFTER_SECONDS = 30.0


def _retry_after(exc: Any) -> Optional[timedelta]:
    """The server's ``retry-after-ms``/``retry-after`` (seconds) hint, capped; None if absent."""
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        try:
            seconds = float(raw) * scale if raw is not None else None
        except ValueError:
            seconds = None  # an HTTP-date; leave the delay to the RetryPolicy
        if seconds is not None and seconds >= 0:
            return timedelta(seconds=min(seconds, MAX_RETRY_AFTER_SECONDS))
    return None


def map_api_error(exc: Exception) -> ApplicationError:
    """Translate an SDK exception into the ``ApplicationError`` the workflow expects.

    Details carry ``{"status_code", "request_id"}`` when the server answered.
    """
    import anthropic  # noqa: PLC0415  (imported already by whoever raised ``exc``)

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        details = {"status_code": status, "request_id": exc.request_id}
        if status in RETRYABLE_4XX or status >= 500:
            return ApplicationError(
                f"model unavailable: HTTP {status}: {exc.message}",
                details,
                type=UNAVAILABLE,
                next_retry_delay=_retry_after(exc),
            )
        return ApplicationError(
            f"model request rejected: HTTP {status}: {exc.message}", details, type=REJECTED, non_retryable=True
        )
    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return ApplicationError(f"model unavailable: {type(exc).__name__}: {exc}", type=UNAVAILABLE)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ApplicationError(f"model response did not match the API schema: {exc}", type=MALFORMED)
    if isinstance(exc, anthropic.CredentialsError):
        return ApplicationError(f"model credentials: {exc}", type=REJECTED, non_retryable=True)
    return ApplicationError(f"model call failed: {type(exc).__name__}: {exc}", type=UNAVAILABLE)
