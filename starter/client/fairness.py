"""Temporal task queue fairness between tenants: every process a tenant starts carries its
tenant as its fairness key (``Priority(fairness_key=...)``), which its workflow tasks, its
activities and its refund children inherit. The server's matching then hands out each task
queue's backlog round-robin across tenants instead of first come, first served, so one tenant's
burst waits behind itself, not in front of every other tenant (docs/performance.md, "Fairness
between tenants"). It needs a server with fairness on (dynamic config
``matching.enableFairness``: the embedded dev server and the compose stack set it); elsewhere
the key is carried and ignored. A worker may also cap each tenant's share of the activity
slots (``starter.runtime.fairness``)."""

from __future__ import annotations

from typing import Sequence

from temporalio.common import Priority, SearchAttributePair

from workflows.options import TENANT


def tenant_priority(search_attributes: Sequence[SearchAttributePair]) -> Priority:
    """The start option of a run whose search attributes are ``search_attributes``: its
    ``Tenant`` as the fairness key; a run without one (CLI, τ-bench) keeps the default key."""
    tenant = next((pair.value for pair in search_attributes if pair.key.name == TENANT.name), None)
    return Priority(fairness_key=tenant) if tenant else Priority.default

