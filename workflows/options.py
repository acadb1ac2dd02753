"""Activity timeouts and retry policies, chosen by what the activity touches.

Temporal owns retries (provider clients run with ``max_retries=0``). Reads retry
freely. Writes retry too, but only because every write carries an idempotency key
and the ledger returns the recorded result instead of applying twice; after the
attempts run out the workflow stops and escalates instead of replaying.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy, SearchAttributeKey

from workflows.domain.errors import TOOL_NON_RETRYABLE, ErrorType

CUSTOMER_ID = SearchAttributeKey.for_keyword("CustomerId")
"""The customer's keyed pseudonym (``workflows.domain.pseudonym``), never the real id: τ-bench ids hold names."""
ORDER_IDS = SearchAttributeKey.for_keyword_list("OrderIds")
"""Every order the process touched (read or wrote), not just the latest; bounded
(``workflows.visibility.ORDER_IDS_KEPT``)."""
STEP = SearchAttributeKey.for_keyword("Step")
STATUS = SearchAttributeKey.for_keyword("ProcessStatus")
"""Business status: active, ended, cancelled, transferred, escalated (refunds: their outcome).
Not named ``Status``: the Web UI's list shows a custom attribute of that name in place of its
own Status column (the run's Running, Completed, Terminated...)."""
LEGACY_STATUS = SearchAttributeKey.for_keyword("Status")
"""The name ``STATUS`` had in 1.0.0. Runs of 1.0.0 that have not published a status since the
upgrade carry only this one; lists read it, and filter by it where the server still has it
registered (``starter.client.listing``). Never registered on a new server."""
PENDING_APPROVAL = SearchAttributeKey.for_keyword("PendingApproval")
"""The approval id awaiting a supervisor's decision; unset when none is pending."""
TENANT = SearchAttributeKey.for_keyword("Tenant")
"""The tenant a process belongs to (``starter.client.tenancy``): set by the client at start (not a
command), passed on to a conversation's refund children; unset means the default tenant."""
SEARCH_ATTRIBUTES = (CUSTOMER_ID, ORDER_IDS, STEP, STATUS, PENDING_APPROVAL, TENANT)
"""Search attributes the workflows set; registered on the embedded dev server."""

HEARTBEAT_TIMEOUT = timedelta(seconds=3)
"""Every activity heartbeats while it waits (``activities.heartbeat``): a worker that dies
mid-call is noticed after this, not after the start-to-close timeout. The SDK sends at most
one heartbeat per 0.8 × this, so a dead worker is noticed 0.6-3 s after it died. The beats,
every ``HEARTBEAT_INTERVAL_SECONDS``, come from the worker's event loop: a loop held up for
about this long (an overloaded worker) times out live calls, which are then retried.
2 s would save at most a second of a restart and time out more under
load (bench/turns.py), so it is 3 s."""
HEARTBEAT_INTERVAL_SECONDS = 0.5
"""How often ``activities.heartbeat`` calls ``activity.heartbeat`` (the SDK throttles what it sends)."""

STICKY_SCHEDULE_TO_START = timedelta(seconds=1)
"""``Worker(sticky_queue_schedule_to_start_timeout=)``: a workflow task waits this long on the
sticky queue of the worker that last ran the conversation before any worker may take it (the
SDK default, 5 s, is what a user waits after that worker died). A live worker polls its sticky
queue continuously, so a second only misses when it is overloaded; the cost of a miss is one
full-history replay on whichever worker takes the task."""

CONVERSATION_TASK_TIMEOUT = timedelta(seconds=4)
"""A conversation's workflow task timeout (start option; the server's default is 10 s). A
conversation's reads run as local activities inside a workflow task (``workflows.conversation.execute``),
so a worker killed during a read, or while it holds any of the conversation's workflow tasks,
is noticed after this. A task that runs longer (a slow local activity) is kept alive by the
SDK's workflow-task heartbeat at 80 % of it; a replay slower than this on an overloaded worker
would be retried (bench/turns.py counts workflow task timeouts)."""

GRACEFUL_SHUTDOWN = timedelta(seconds=10)
"""``Worker(graceful_shutdown_timeout=)``: on SIGTERM/SIGINT running activities get this long to
finish (a model call, a write) before they are cancelled; then the process exits even if a
write's database thread is still busy (``worker.main``): that write either committed (its
retry finds the ledger row) or rolled back. Local activities are not cancelled by it: with
``SupportInput.local_model_calls`` a shutdown waits for the model calls in flight (up to their
60 s timeout)."""

MODEL_TIMEOUT = timedelta(seconds=60)
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=[ErrorType.MODEL_REQUEST_REJECTED.value, ErrorType.TOKEN_BUDGET_EXCEEDED.value],
)
"""Malformed output is retried as a new model call at most twice; then it becomes a rejection."""

READ_TIMEOUT = timedelta(seconds=3)
"""A read takes under a millisecond (bench/write_path.py); 3 s from start covers a slow
database under load, and a hung connection or a dead worker costs seconds, not 15 s."""
READ_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=6,
    non_retryable_error_types=TOOL_NON_RETRYABLE,
)

WRITE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
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
system of record, and a conversation must not stall on it (``workflows.conversation.journal``)."""

JOURNAL_LOCAL_TIMEOUT = timedelta(seconds=2)
JOURNAL_LOCAL_RETRY = RetryPolicy(maximum_attempts=1)
"""The journal write as a local activity, tried once inside the workflow task that answered the
turn (one history event instead of six; the reply waits for it, a few milliseconds); when it
fails for want of the database the activity above takes over in the background."""

MAX_MODEL_STEPS_PER_TURN = 30
MAX_CONSECUTIVE_REJECTIONS = 4
MAX_MODEL_TROUBLE_TURNS = 2
"""User turns in a row without a usable proposal from the model after which the conversation is
handed to a human agent: the user is apologised to once, then told a person takes over."""
