"""OpenTelemetry tracing through Temporal's contrib interceptor, as ``starter.runtime.connection``
wires it: a conversation's client calls, its workflow and its activities are spans of one
trace (client → workflow → activity, by parent links), and a log line written inside an
activity carries that activity span's trace id (``starter.runtime.logs``)."""

from __future__ import annotations

import io
import logging
import uuid

from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from activities.llm.model_activity import ModelActivities, offline_client
from settings import Settings
from starter.client.conversations import StatekeeperClient
from starter.runtime.connection import connect
from starter.runtime.logs import RedactingFilter, TraceContextFilter, log_formatter
from starter.runtime.telemetry import tracer_provider
from systems.model.server import offline_brain
from tests.policy_fixtures import EMAIL
from tests.workflow_harness import NO_APPROVALS
from starter.runtime.worker import build_backend, build_worker


async def test_a_conversation_is_one_trace_from_client_to_activity_and_its_logs_name_it(temporal_env, settings: Settings):
    exporter = InMemorySpanExporter()
    tracer_provider(settings).add_span_processor(SimpleSpanProcessor(exporter))
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(log_formatter())
    handler.addFilter(RedactingFilter())
    handler.addFilter(TraceContextFilter())
    brain_log = logging.getLogger("statekeeper.test.brain")
    brain_log.addHandler(handler)
    brain_log.setLevel(logging.INFO)
    seen: list[str] = []

    def brain(view: dict, plan: dict | None = None) -> dict:
        # runs inside the model activity: what it logs must name the activity's trace
        seen.append(format(trace.get_current_span().get_span_context().trace_id, "032x"))
        brain_log.info("proposing for turn %s", view.get("turn"))
        return offline_brain(view, plan)

    address = temporal_env.client.service_client.config.target_host
    settings = settings.model_copy(update={"temporal_address": address})
    client = await connect(settings)  # the interceptor comes with the client, the worker inherits it
    backend = build_backend(settings)
    model = ModelActivities(offline_client(30.0, brain=brain), model="test-brain", max_tokens=256)
    try:
        async with build_worker(client, settings, backend, model=model):
            conversations = StatekeeperClient(client, settings.task_queue, settings.write_timeout_seconds,
                                              approvals=NO_APPROVALS)
            cid = await conversations.start_conversation(f"trace-{uuid.uuid4().hex[:6]}")
            await conversations.send_message(cid, f"Hi, my email is {EMAIL}")
    finally:
        brain_log.removeHandler(handler)

    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    names = {s.name for s in spans}
    # a conversation starts with an update-with-start and goes on with updates
    assert {"StartUpdateWithStartWorkflow:SupportWorkflow", "RunWorkflow:SupportWorkflow",
            "StartWorkflowUpdate:send_message", "HandleUpdate:send_message",
            "StartActivity:propose_action", "RunActivity:propose_action"} <= names, sorted(names)

    def ancestors(span) -> list[str]:
        chain = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            chain.append(span.name)
        return chain

    runs = [s for s in spans if s.name == "RunActivity:propose_action"]
    for run in runs:
        chain = ancestors(run)
        # activity run ← its scheduling in the workflow ← ... ← a client call of this process
        assert chain[0] == "StartActivity:propose_action", chain
        assert chain[-1] in ("StartUpdateWithStartWorkflow:SupportWorkflow", "StartWorkflowUpdate:send_message"), chain
    # the workflow's run is in the trace of the client call that started it
    [start] = [s for s in spans if s.name == "StartUpdateWithStartWorkflow:SupportWorkflow"]
    [run_workflow] = [s for s in spans if s.name == "RunWorkflow:SupportWorkflow"]
    assert run_workflow.context.trace_id == start.context.trace_id
    assert by_id[run_workflow.parent.span_id] is start
    activity_traces = {format(s.context.trace_id, "032x") for s in runs}
    assert seen and set(seen) <= activity_traces, (seen, activity_traces)
    lines = [line for line in out.getvalue().splitlines() if "proposing for turn" in line]
    assert len(lines) == len(seen) >= 1
    for line, trace_id in zip(lines, seen):
        assert f"trace_id={trace_id}:" in line, line


async def test_sdk_metrics_are_served_for_prometheus_when_configured(temporal_env, settings: Settings):
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = temporal_env.client.service_client.config.target_host
    settings = settings.model_copy(update={"temporal_address": address, "metrics_prometheus_address": f"127.0.0.1:{port}"})
    client = await connect(settings)
    backend = build_backend(settings)
    async with build_worker(client, settings, backend):
        conversations = StatekeeperClient(client, settings.task_queue, settings.write_timeout_seconds,
                                          approvals=NO_APPROVALS)
        cid = await conversations.start_conversation(f"metrics-{uuid.uuid4().hex[:6]}")
        await conversations.send_message(cid, f"Hi, my email is {EMAIL}")
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    assert "temporal_request" in scraped and "temporal_workflow_task" in scraped, scraped[:2000]
    assert 'service_name="statekeeper"' in scraped
    assert settings.task_queue in scraped  # the worker's own series
