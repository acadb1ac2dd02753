"""The one bootstrap of a ``StatekeeperClient`` from settings, shared by the HTTP API, the
command line and the runners: the client with its deadlines and approval policy, and the
systems of record an operator's resolution is checked against."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.client import Client

from starter.client.conversations import StatekeeperClient
from starter.client.core import Deadlines
from starter.ops.resolution_evidence import LedgerEvidence
from starter.ops.replay_systems import Systems
from workflows.domain.policy.approvals import ApprovalPolicy

if TYPE_CHECKING:
    from starter.client.webhooks.service import Webhooks


def client_for(temporal_client: Client, settings: Any) -> StatekeeperClient:
    """The ``StatekeeperClient`` that ``settings`` (a ``settings.Settings``) describe: its task
    queue, write timeout, deadlines, pseudonym key, approval policy and the systems of record
    an operator's resolution is checked against (opened only when one is checked), and its
    webhooks (``StatekeeperClient.webhooks``, built on first use)."""
    approvals = ApprovalPolicy(threshold=settings.approval_threshold, timeout_seconds=settings.approval_timeout_seconds)
    deadlines = Deadlines(rpc_seconds=settings.rpc_timeout_seconds, accept_seconds=settings.update_accept_seconds,
                          reply_seconds=settings.reply_timeout_seconds)
    client = StatekeeperClient(temporal_client, settings.task_queue, settings.write_timeout_seconds,
                               approvals=approvals, deadlines=deadlines,
                               pseudonym_key=settings.pseudonym_secret(create=False),
                               token_budget=getattr(settings, "token_budget", None),
                               local_model_calls=getattr(settings, "model_calls", "activity") == "local",
                               memory=getattr(settings, "memory_enabled", True))
    client.evidence = LedgerEvidence(lambda: Systems.from_settings(settings))
    client.webhooks_source = lambda: webhooks_for(temporal_client, settings)
    return client


def webhooks_for(temporal_client: Client, settings: Any) -> "Webhooks":
    """The webhooks of ``settings``' deployment (``starter.client.webhooks.service``): subscriptions in
    its journal's database, deliveries restarted on its task queue."""
    from starter.client.webhooks.service import Webhooks
    from starter.runtime.webhooks import allowance, delivery_starter, webhook_store

    store = webhook_store(settings)
    return Webhooks(store, delivery_starter(temporal_client, settings, store), allowance(settings),
                    settings.default_tenant)
