"""Tenancy: every conversation, refund and store belongs to one tenant.

- A store's tenant comes from settings (``Settings.store_tenants``; a store not listed, such
  as ``main``, belongs to ``Settings.default_tenant``).
- A process's tenant is its ``Tenant`` search attribute (``workflows.options.TENANT``), set by
  the client when the API starts it (a start option, not a workflow command) and passed on by
  a conversation to its refund children. A run without one (started by the CLI, τ-bench, or
  before tenancy existed) belongs to the default tenant.
- A process of another tenant is invisible: ``visible`` answers the same ``not_found`` as a
  process that does not exist, and lists carry ``list_clauses`` so they only ever hold the
  caller's tenant's runs (and, for a customer-scoped key, that customer's).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from pydantic import BaseModel
from temporalio.common import Priority, SearchAttributePair
from temporalio.service import RPCError, RPCStatusCode

from starter.client.core import ClientCore
from starter.client.errors import ConversationError, unreachable
from starter.client.listing import clause
from workflows.options import CUSTOMER_ID, TENANT


class Tenancy(BaseModel):
    """Which tenant a store and a process belong to (from ``Settings``)."""

    default_tenant: str = "default"
    store_tenants: dict[str, str] = {}

    @classmethod
    def from_settings(cls, settings: Any) -> "Tenancy":
        """The tenancy ``settings`` (a ``settings.Settings``) configure."""
        return cls(default_tenant=settings.default_tenant, store_tenants=dict(settings.store_tenants))

    def tenant_of_store(self, store: str) -> str:
        """The tenant owning ``store`` (the default tenant for a store not listed)."""
        return self.store_tenants.get(store, self.default_tenant)

    def tenant_of_run(self, attributes: Any) -> str:
        """The tenant of a run with ``attributes`` (``TypedSearchAttributes``)."""
        return attributes.get(TENANT) or self.default_tenant

    def list_clauses(self, tenant: str, customer: Optional[str] = None) -> list[str]:
        """Visibility-query clauses selecting ``tenant``'s runs (the default tenant's include
        runs without a ``Tenant``) and, with ``customer`` (a pseudonym), only that customer's."""
        own = clause(TENANT.name, tenant)
        parts = [f"({own} OR `{TENANT.name}` IS NULL)" if tenant == self.default_tenant else own]
        if customer is not None:
            parts.append(clause(CUSTOMER_ID.name, customer))
        return parts


def start_attributes(tenant: str, customer: Optional[str] = None) -> list[SearchAttributePair]:
    """Search attributes a process gets at start: its tenant and, for a conversation opened
    by a customer-scoped key, that customer's pseudonym (the workflow replaces it if another
    customer authenticates, and the scoped key then no longer sees the conversation)."""
    pairs: list[SearchAttributePair] = [SearchAttributePair(TENANT, tenant)]
    if customer is not None:
        pairs.append(SearchAttributePair(CUSTOMER_ID, customer))
    return pairs


class Owner(NamedTuple):
    """Who a process belongs to: its tenant and its customer's pseudonym (None: not known yet)."""

    tenant: str
    customer: Optional[str]


async def owner_of(client: ClientCore, tenancy: Tenancy, workflow_id: str) -> Optional[Owner]:
    """The owner of the latest run of ``workflow_id``; None when there is no such workflow.
    Raises ``ConversationError`` ``unavailable`` when Temporal does not answer."""
    handle = client._client.get_workflow_handle(workflow_id)  # noqa: SLF001 (the client's own connection)
    try:
        description = await client.bounded(handle.describe(rpc_timeout=client.rpc_timeout))
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None
        raise unreachable() from err
    attributes = description.typed_search_attributes
    return Owner(tenancy.tenant_of_run(attributes), attributes.get(CUSTOMER_ID))


async def visible(client: ClientCore, tenancy: Tenancy, workflow_id: str, tenant: str, customer: Optional[str],
                  missing: ConversationError) -> Optional[Owner]:
    """Check that the caller of ``tenant`` (scoped to ``customer``, a pseudonym, if not None)
    may see ``workflow_id``; returns its owner, or None when it does not exist (the caller's
    own call then answers its usual refusal). Raises ``missing`` (a ``not_found`` with the
    same reason as for a process that does not exist) when it belongs to someone else."""
    owner = await owner_of(client, tenancy, workflow_id)
    if owner is None:
        return None
    if owner.tenant != tenant or (customer is not None and owner.customer != customer):
        raise missing
    return owner


def tenant_priority(search_attributes: Sequence[SearchAttributePair]) -> Priority:
    """The start option (``priority=``) of a run whose search attributes are ``search_attributes``:
    its ``Tenant`` as its Temporal fairness key, which its workflow tasks, activities and refund
    children inherit, so a task queue's backlog is handed out round-robin across tenants (with
    ``matching.enableFairness`` on in the server; docs/production.md, "Fairness between
    tenants"); a run without one (CLI, τ-bench) keeps the default key."""
    tenant = next((pair.value for pair in search_attributes if pair.key.name == TENANT.name), None)
    return Priority(fairness_key=tenant) if tenant else Priority.default

