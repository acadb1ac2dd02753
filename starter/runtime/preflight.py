"""Checks before a worker uses a Temporal server, so that a misfit stops at startup with a
clear message instead of failing every task later:

- ``ensure_search_attributes``: the namespace has our search attributes with their types
  (``workflows.options.SEARCH_ATTRIBUTES``); missing ones are registered. Without them every
  workflow task that upserts one fails ("unexpected workflow task failure", the cause only in
  a WARN line of the worker log).
- ``check_task_queue``: no live worker of the task queue serves another system of record
  or reaches other external services (``starter.runtime.system_of_record``).
"""

from __future__ import annotations

import logging
import time
from typing import Iterable, Optional, Sequence

from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError

from starter.runtime.rpc import read_again_if_dropped
from starter.runtime.system_of_record import fingerprint_in_identity, services_difference, services_in_identity
from workflows.options import SEARCH_ATTRIBUTES

log = logging.getLogger("statekeeper.preflight")

LIVE_POLLER_SECONDS = 90.0
"""A poller counts as live when it polled within this many seconds. The server lists a
stopped worker for minutes after its last poll, while an idle live worker re-polls about
once a minute (the server's long-poll interval), so the window must exceed a minute."""


def attribute_type_name(key: SearchAttributeKey) -> str:
    """The CLI's type name for ``key`` (``Keyword``, ``KeywordList``)."""
    return "KeywordList" if key.indexed_value_type == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST else "Keyword"


class StartupRefused(RuntimeError):
    """Startup stopped on purpose; the message says why and how to fix it (no traceback
    needed: the CLI prints the message alone)."""


def _type_name(value: int) -> str:
    return IndexedValueType.Name(value).removeprefix("INDEXED_VALUE_TYPE_").replace("_", " ").title().replace(" ", "")


async def ensure_search_attributes(client: Client, namespace: str,
                                   required: Sequence[SearchAttributeKey] = SEARCH_ATTRIBUTES) -> list[str]:
    """Make sure ``namespace`` has every ``required`` search attribute with its type; returns
    the names this call registered (empty when all were there).

    Raises ``StartupRefused`` naming each attribute registered with another type (the server
    keeps the first type; only an operator can remove it), or each missing attribute when
    listing or adding is refused (e.g. no permission on a shared server).
    """
    try:
        listed = await read_again_if_dropped(lambda: client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)))
    except RPCError as err:
        raise StartupRefused(f"cannot list the search attributes of namespace '{namespace}' ({err.message}); "
                             f"statekeeper needs {_describe(required)}") from err
    known = {**dict(listed.system_attributes), **dict(listed.custom_attributes)}
    mistyped = [key for key in required if key.name in known and known[key.name] != key.indexed_value_type]
    if mistyped:
        found = ", ".join(f"{key.name} is {_type_name(known[key.name])} (needs {attribute_type_name(key)})"
                          for key in mistyped)
        raise StartupRefused(f"search attributes of namespace '{namespace}' have the wrong type: {found}. "
                             "Remove them (`temporal operator search-attribute remove --name NAME`) and start "
                             "again, or use another namespace (STATEKEEPER_TEMPORAL_NAMESPACE).")
    missing = [key for key in required if key.name not in known]
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=namespace, search_attributes={key.name: key.indexed_value_type for key in missing}))
    except RPCError as err:
        raise StartupRefused(f"namespace '{namespace}' lacks the search attributes {_describe(missing)} and "
                             f"registering them was refused ({err.message}); ask an operator to run "
                             + "; ".join(f"`temporal operator search-attribute create --name {key.name} "
                                         f"--type {attribute_type_name(key)}`" for key in missing)) from err
    log.info("registered search attributes %s in namespace %s", ", ".join(k.name for k in missing), namespace)
    return [key.name for key in missing]


def _describe(keys: Iterable[SearchAttributeKey]) -> str:
    return ", ".join(f"{key.name} ({attribute_type_name(key)})" for key in keys)


async def check_task_queue(client: Client, namespace: str, task_queue: str, db_fingerprint: str,
                           live_within_seconds: float = LIVE_POLLER_SECONDS,
                           services: Optional[str] = None) -> None:
    """Refuse to serve ``task_queue`` when a live poller of its workflow or activity queue
    carries another system-of-record fingerprint than ``db_fingerprint``, or (``services``
    given) another services fingerprint (``starter.runtime.system_of_record.services_fingerprint``):
    a worker without the payments URL would skip the payments mirror of the refunds it runs.

    Pollers with the same fingerprint are welcome (scale-out: several workers on one
    database); pollers without one (not a statekeeper worker of this version) are logged and
    let be. Raises ``StartupRefused`` naming the queue and how to fix it; the check cannot
    see a worker that starts polling at the same instant as this one.
    """
    now = time.time()
    for queue_type, kind in ((TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "workflow"),
                             (TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, "activity")):
        request = DescribeTaskQueueRequest(namespace=namespace, task_queue=TaskQueue(name=task_queue),
                                           task_queue_type=queue_type)
        described = await read_again_if_dropped(
            lambda: client.workflow_service.describe_task_queue(request))
        for poller in described.pollers:
            age = now - poller.last_access_time.ToSeconds()
            if age > live_within_seconds:
                continue
            theirs = fingerprint_in_identity(poller.identity)
            if theirs is None:
                log.warning("task queue %s has a %s poller that does not say its system of record", task_queue, kind)
            elif theirs != db_fingerprint:
                raise StartupRefused(
                    f"task queue '{task_queue}' is served by a worker of another system of record (its {kind} "
                    f"poller, last seen {max(age, 0):.0f} s ago, has database fingerprint {theirs}; this one has "
                    f"{db_fingerprint}). A second worker there would apply writes to a different database. "
                    "Use the same data directory or database (STATEKEEPER_DATA_DIR / STATEKEEPER_DATABASE_URL) "
                    "as that worker, or another task queue (STATEKEEPER_TASK_QUEUE). If that worker has just "
                    f"stopped, start again after {live_within_seconds:.0f} s.")
            theirs = services_in_identity(poller.identity)
            if services is not None and theirs is not None and theirs != services:
                raise StartupRefused(
                    f"task queue '{task_queue}' is served by a worker configured with other external services "
                    f"(its {kind} poller, last seen {max(age, 0):.0f} s ago): "
                    f"{services_difference(theirs, services)}. Every worker of a queue must reach the same "
                    "payments, email and ticketing services, or refunds run by one of them skip what the other "
                    "records. Start this worker with the same STATEKEEPER_PAYMENTS_URL, STATEKEEPER_EMAIL_URL and "
                    "STATEKEEPER_TICKETING_URL as that worker, or on another task queue (STATEKEEPER_TASK_QUEUE). "
                    f"If that worker has just stopped, start again after {live_within_seconds:.0f} s.")
