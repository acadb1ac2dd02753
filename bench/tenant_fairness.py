"""One tenant's burst against another tenant's message latency, in one run.

Starts a Temporal dev server with statekeeper's dynamic config (fairness on; ``--no-fairness``
leaves ``matching.enableFairness`` out, to compare), one worker with few activity slots
(``--slots``) and the HTTP API with one key per tenant, all in this process. The model call
waits ``--model-ms`` before the offline stand-in answers, as a hosted model's network wait
does: the tenants then share the worker's slots, not its CPU (the offline stand-in alone is CPU
work, which no task queue order can share out).

Phase ``alone``: tenant ``b`` sends ``-n`` messages one after another on one conversation.
Phase ``burst``: tenant ``a`` keeps ``--burst`` conversations sending messages back to back
(each the next as soon as its reply comes) while ``b`` sends ``-n`` messages as before. The
table gives ``b``'s message latency (request to reply over HTTP) in both phases, ``a``'s in the
burst, and the ratio of ``b``'s p95 during the burst to alone (target: at most 1.5).

Run: ``.venv/bin/python bench/tenant_fairness.py [-n 20] [--burst 24] [--slots 8] [--model-ms 2000]
[--tenant-rps R] [--no-fairness] [--eager true|false] [--dynamic-config KEY=VALUE ...]``; the
figures and what they mean: docs/performance.md, "Fairness between tenants".
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from temporalio import activity  # noqa: E402

from activities.llm.model_activity import ModelActivities  # noqa: E402
from workflows.domain.contracts import ModelRequest, ModelResult  # noqa: E402

TARGET = 1.5
"""The ratio of ``b``'s p95 during ``a``'s burst to alone that the run should stay within."""


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(0.95 * len(ordered)) - 1))]


class WaitingModel(ModelActivities):
    """The offline stand-in behind a fixed network wait of ``wait_seconds`` (a hosted model's)."""

    wait_seconds = 0.3

    @activity.defn(name="propose_action")
    async def propose_action(self, req: ModelRequest) -> ModelResult:
        await asyncio.sleep(self.wait_seconds)
        return await super().propose_action(req)


async def messages(http: httpx.AsyncClient, key: str, cid: str, count: int, prefix: str,
                   stop: asyncio.Event | None = None) -> list[float]:
    """Send ``count`` messages (or until ``stop`` is set) one after another on ``cid``; their
    latencies in seconds. A refused message ends the run with its answer."""
    took: list[float] = []
    for i in range(count):
        if stop is not None and stop.is_set():
            break
        began = time.perf_counter()
        answer = await http.post(f"/conversations/{cid}/messages", headers={"Authorization": f"Bearer {key}"},
                                 json={"text": "hello, what can you do?", "message_id": f"{prefix}-{i}"})
        if answer.status_code != 200:
            raise SystemExit(f"message refused: {answer.status_code} {answer.text}")
        took.append(time.perf_counter() - began)
    return took


async def run(args: argparse.Namespace) -> None:
    from temporalio.testing import WorkflowEnvironment

    from activities.store.api_keys import KeyStore, Role
    from settings import Settings
    from starter.api.auth import access_from_settings
    from starter.api.server import api_beside
    from starter.runtime.fairness import cap_tenant_dispatch
    from starter.dev.server import DEV_SERVER_STARTUP, DYNAMIC_CONFIG, dynamic_config_args
    from starter.runtime.connection import data_converter
    from starter.runtime.worker import build_backend, build_model_activities, build_worker
    from bench.turns.load import free_port
    from workflows.options import SEARCH_ATTRIBUTES

    tmp = Path(tempfile.mkdtemp(prefix="tenant-fairness-"))
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue=f"fairness-{uuid.uuid4().hex[:8]}", max_concurrent_activities=args.slots,
                        store_tenants={"a-store": "tenant-a", "b-store": "tenant-b"})
    config = {k: v for k, v in DYNAMIC_CONFIG.items() if not (args.no_fairness and k == "matching.enableFairness")}
    if args.eager is not None:
        config["system.enableActivityEagerExecution"] = args.eager
    config.update(kv.split("=", 1) for kv in args.dynamic_config)
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP, dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        data_converter=data_converter(settings, create_key=True), search_attributes=list(SEARCH_ATTRIBUTES),
        dev_server_log_level="error", dev_server_extra_args=dynamic_config_args(config))
    backend = build_backend(settings)
    for store in ("a-store", "b-store"):
        backend.seed_store(store)
    if args.tenant_rps is not None:  # what a worker does with STATEKEEPER_TENANT_ACTIVITIES_PER_SECOND
        await cap_tenant_dispatch(env.client, settings.task_queue, args.tenant_rps)
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    key_a = keys.create("tenant-a", Role.SERVICE, requests_per_minute=1_000_000)[1]
    key_b = keys.create("tenant-b", Role.SERVICE, requests_per_minute=1_000_000)[1]
    model = build_model_activities(settings)
    WaitingModel.wait_seconds = args.model_ms / 1000
    waiting = WaitingModel(model._client or model._factory, model=model.model, max_tokens=model.max_tokens)  # noqa: SLF001
    access = access_from_settings(settings, "127.0.0.1")
    console = Console()
    try:
        async with build_worker(env.client, settings, backend, model=waiting):
            async with api_beside(env.client, settings, host="127.0.0.1", port=free_port(), access=access) as url:
                limits = httpx.Limits(max_connections=args.burst + 20, max_keepalive_connections=args.burst + 20)
                async with httpx.AsyncClient(base_url=url, timeout=300.0, limits=limits) as http:
                    await start(http, key_b, "b-0", "b-store")
                    await messages(http, key_b, "b-0", 3, "warm")
                    alone = await messages(http, key_b, "b-0", args.n, "alone")
                    stop = asyncio.Event()
                    for i in range(args.burst):
                        await start(http, key_a, f"a-{i}", "a-store")
                    bursts = [asyncio.create_task(messages(http, key_a, f"a-{i}", 10**6, "burst", stop))
                              for i in range(args.burst)]
                    await asyncio.sleep(args.model_ms / 1000 * 4)  # the backlog builds up first
                    during = await messages(http, key_b, "b-0", args.n, "during")
                    stop.set()
                    burst_latencies = [t for done in await asyncio.gather(*bursts) for t in done]
    finally:
        await env.shutdown()
    table = Table(title=f"Tenant b's message latency, alone and during tenant a's burst "
                        f"({args.burst} conversations, {args.slots} activity slots, model wait {args.model_ms} ms, "
                        f"fairness {'off' if args.no_fairness else 'on'})")
    for col in ("phase", "tenant", "messages", "p50 (s)", "p95 (s)", "max (s)"):
        table.add_column(col, justify="right" if col not in ("phase", "tenant") else "left")
    for phase, tenant, values in (("alone", "b", alone), ("burst", "b", during), ("burst", "a", burst_latencies)):
        table.add_row(phase, tenant, str(len(values)), f"{statistics.median(values):.3f}", f"{p95(values):.3f}",
                      f"{max(values):.3f}")
    console.print(table)
    ratio = p95(during) / p95(alone)
    verdict = "within" if ratio <= TARGET else "OVER"
    console.print(f"b's p95 during the burst / alone: {ratio:.2f}x ({verdict} the {TARGET}x target)", highlight=False)


async def start(http: httpx.AsyncClient, key: str, cid: str, store: str) -> None:
    answer = await http.post("/conversations", json={"conversation_id": cid, "store": store},
                             headers={"Authorization": f"Bearer {key}"})
    if answer.status_code != 201:
        raise SystemExit(f"start refused: {answer.status_code} {answer.text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20, help="tenant b's messages per phase")
    parser.add_argument("--burst", type=int, default=24, help="tenant a's conversations sending at once")
    parser.add_argument("--slots", type=int, default=8, help="the worker's activity slots")
    parser.add_argument("--model-ms", type=int, default=2000, help="the model call's network wait")
    parser.add_argument("--no-fairness", action="store_true", help="run the server without fairness")
    parser.add_argument("--eager", choices=("true", "false"), default=None,
                        help="eager activity execution on the server (default: as statekeeper's dynamic config)")
    parser.add_argument("--tenant-rps", type=float, default=None,
                        help="cap each tenant's activity dispatch at this many a second (fairness key rate limit)")
    parser.add_argument("--dynamic-config", action="append", default=[], metavar="KEY=VALUE",
                        help="more dynamic config of the server (repeatable)")
    args = parser.parse_args()
    asyncio.run(run(args))
    from starter.runtime.process_exit import exit_now

    exit_now(0)


if __name__ == "__main__":
    main()
