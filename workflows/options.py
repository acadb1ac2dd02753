"""Activity timeouts and retry policies, chosen by what the activity touches.

Temporal owns retries (provider clients run with ``max_retries=0``). Reads retry
freely. Writes retry too, but only because every write carries an idempotency key
and the ledger returns the recorded result instead of applying twice; after the
attempts run out the workflow stops and escalates instead of replaying.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy, SearchAttributeKey

from workflows.errors import TOOL_NON_RETRYABLE, ErrorType

CUSTOMER_ID = SearchAttributeKey.for_keyword("CustomerId")
"""The customer's keyed pseudonym (``workflows.pseudonym``), never the real id: τ-bench ids hold names."""
ORDER_IDS = SearchAttributeKey.for_keyword_list("OrderIds")
"""Every order the process touched (read or wrote), not just the latest; bounded
(``workflows.visibility.ORDER_IDS_KEPT``)."""
STEP = SearchAttributeKey.for_keyword("Step")
STATUS = SearchAttributeKey.for_keyword("Status")
"""Business status: active, ended, cancelled, transferred, escalated (refunds: their outcome)."""
PENDING_APPROVAL = SearchAttributeKey.for_keyword("PendingApproval")
"""The approval id awaiting a supervisor's decision; unset when none is pending."""
TENANT = SearchAttributeKey.for_keyword("Tenant")
"""The tenant a process belongs to (``starter.tenancy``): set by the client at start (not a
command), passed on to a conversation's refund children; unset means the default tenant."""
SEARCH_ATTRIBUTES = (CUSTOMER_ID, ORDER_IDS, STEP, STATUS, PENDING_APPROVAL, TENANT)
"""Search attributes the workflows set; registered on the embedded dev server."""

HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""Every activity heartbeats each second while it waits (``activities.heartbeat``): a worker
that dies mid-call is noticed after this, not after the start-to-close timeout."""
HEARTBEAT_INTERVAL_SECONDS = 1.0

MODEL_TIMEOUT = timedelta(seconds=60)
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=[ErrorType.MODEL_REQUEST_REJECTED.value, ErrorType.TOKEN_BUDGET_EXCEEDED.value],
)
"""Malformed output is retried as a new model call at most twice; then it becomes a rejection."""

READ_TIMEOUT = timedelta(seconds=15)
READ_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=6,
    non_retryable_error_types=TOOL_NON_RETRYABLE,
)

WRITE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
    non_retryable_error_types=TOOL_NON_RETRYABLE,
)
"""Safe only with the ledger: a retry with the same idempotency key returns the recorded result."""

IDENTITY_TIMEOUT = timedelta(seconds=5)
IDENTITY_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=5,
    non_retryable_error_types=[ErrorType.INVALID_ARGUMENTS.value],
)
"""The pseudonym local activity: pure computation in the worker, so short and few retries."""

JOURNAL_TIMEOUT = timedelta(seconds=10)
JOURNAL_GIVE_UP = timedelta(seconds=30)
JOURNAL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=6,
    non_retryable_error_types=[ErrorType.INVALID_JOURNAL_RECORD.value],
)
"""The journal write (decision log, transcript): upserts, so retries are safe. Bounded
(``JOURNAL_GIVE_UP`` from schedule to close): the journal is an audit record, not the
system of record, and a conversation must not stall on it (``workflows.journal_log``)."""

DEFAULT_WRITE_TIMEOUT_SECONDS = 30.0
MAX_MODEL_STEPS_PER_TURN = 30
MAX_CONSECUTIVE_REJECTIONS = 4
MAX_USER_MESSAGE_BYTES = 8 * 1024
