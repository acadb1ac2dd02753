"""The ceiling row of ``bench/turns/ceiling.py`` on a real server: ``CeilingWorkflow`` answers
the bench conversation with only the round trips statekeeper needs, and its write runs once."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from bench.turns.ceiling_workflow import build_ceiling_worker
from bench.turns.ceiling import _ceiling_conversation, _pooled
from bench.turns.load import pending_orders
from starter.runtime.worker import build_backend


async def test_the_ceiling_conversation_writes_once_with_only_the_round_trips_it_needs(temporal_env, settings):
    backend = build_backend(settings)
    store, email, order_id = pending_orders(["main"])[0]
    latencies: list[float] = []
    async with build_ceiling_worker(temporal_env.client, settings, backend):
        handle = await _ceiling_conversation(temporal_env.client, settings.task_queue, store, email, order_id,
                                             latencies)
        history = await handle.fetch_history()
    assert len(latencies) == 4
    assert [e["tool"] for e in backend.ledger_entries(store)] == ["cancel_pending_order"]
    assert backend.duplicate_writes(store) == 0
    kinds = [e.event_type for e in history.events]
    # per conversation: the model calls as activities, reads as local activities, one write
    assert kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == 7
    assert kinds.count(EventType.EVENT_TYPE_MARKER_RECORDED) == 2
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds


def test_pooled_figures_are_all_turns_over_all_cpu_seconds_as_a_ratio_to_the_baseline():
    rows = [{"code": "base", "turns": 100, "worker_cpu_seconds": 6.0, "server_cpu_seconds": 4.0},
            {"code": "base", "turns": 100, "worker_cpu_seconds": 4.0, "server_cpu_seconds": 6.0},
            {"code": "new", "turns": 100, "worker_cpu_seconds": 3.0, "server_cpu_seconds": 2.0}]
    pooled = _pooled(rows, "base")
    assert pooled["base"]["turns_per_cpu_second"] == pytest.approx(10.0)
    assert pooled["new"]["ratio"] == pytest.approx(2.0)
    assert pooled["new"]["worker_cpu_per_turn_ms"] == pytest.approx(30.0)
