"""Webhook delivery latency, and what webhooks add to a conversation's history.

On a Temporal dev server of its own (in memory) with one worker (offline model, SQLite journal)
it runs N conversations without a webhook, then N with one webhook (``*``) to a receiver on a
loopback port (``http.server`` in a thread, answering 200 at once). Each conversation confirms a
cancel above the approval threshold, a supervisor approves, then it is cancelled (about 13
events). It reports:

- latency from each event's ``timestamp`` (the workflow's clock when it happened) to the
  receiver reading the request, and from the commit of its row (the delivery row's
  ``created_at``) to the receiver: p50, p95, max;
- a conversation's history (events, bytes of ``fetch_history``) with and without the webhook;
- one delivery workflow's history (events, bytes).

Run: ``.venv/bin/python bench/webhooks.py [-n 5]``. Both figures are wall-clock on whatever else
the machine is doing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.testing import WorkflowEnvironment  # noqa: E402

from settings import Settings  # noqa: E402
from starter.ops.bootstrap import client_for  # noqa: E402
from starter.runtime.connection import data_converter  # noqa: E402
from starter.runtime.worker import build_backend, build_worker  # noqa: E402
from workflows.options import SEARCH_ATTRIBUTES  # noqa: E402
from workflows.webhooks.workflow import delivery_workflow_id  # noqa: E402

EMAIL = "raj.sanchez2046@example.com"
ORDER = "#W4566809"


def receiver() -> tuple[str, list[tuple[float, dict]]]:
    """A receiver on a free loopback port; returns its URL and the (arrival time, event) list it fills."""
    got: list[tuple[float, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # noqa: ANN002
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            got.append((time.time(), json.loads(body)))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/hook", got


async def conversation(client, backend) -> str:
    """One approved cancel (in a store of its own: the order is pending there), then a cancel of
    the conversation; returns its id once it has ended."""
    store = f"bench-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(backend.seed_store, store)
    cid = await client.start_conversation(f"bench-{uuid.uuid4().hex[:10]}", store=store)
    await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m1")
    await client.send_message(cid, f"Please cancel order {ORDER}, I ordered it by mistake", message_id="m2")
    reply = await client.send_message(cid, "yes", message_id="m3")
    await client.decide_approval(reply.awaiting_approval, "approve", approver="bench")
    await asyncio.sleep(0.5)
    await client.cancel(cid, "done")
    handle = client._client.get_workflow_handle(f"support-{cid}")  # noqa: SLF001
    await handle.result()
    return cid


async def history(temporal, workflow_id: str) -> tuple[int, int]:
    """(events, bytes) of every run of ``workflow_id`` (continue-as-new included)."""
    events = size = 0
    async for execution in temporal.list_workflows(f'WorkflowId = "{workflow_id}"'):
        h = await temporal.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        events += len(h.events)
        size += sum(e.ByteSize() for e in h.events)
    return events, size


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue="bench-webhooks", webhook_allow_loopback=True)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        data_converter=data_converter(settings, create_key=True), search_attributes=list(SEARCH_ATTRIBUTES),
        dev_server_log_level="error")
    url, got = receiver()
    try:
        backend = build_backend(settings)
        async with build_worker(env.client, settings, backend):
            client = client_for(env.client, settings)
            await conversation(client, backend)  # warm-up: imports, caches
            plain = [await conversation(client, backend) for _ in range(n)]
            hook = await client.webhooks.create(url, ["*"])
            subscribed = [await conversation(client, backend) for _ in range(n)]
            expected = {}
            for cid in subscribed:
                expected[cid] = len(client.webhooks.store.engine.connect().exec_driver_sql(
                    "SELECT 1 FROM events WHERE conversation_id = ?", (cid,)).all())
            deadline = time.monotonic() + 60
            while sum(1 for _, e in got if e["data"].get("conversation_id") in expected) < sum(expected.values()):
                assert time.monotonic() < deadline, "not every event arrived"
                await asyncio.sleep(0.2)
            with client.webhooks.store.engine.connect() as conn:
                created = dict(conn.exec_driver_sql("SELECT event_id, created_at FROM webhook_deliveries").all())
            from_event, from_commit = [], []
            for at, event in got:
                from_event.append(at - datetime.fromisoformat(event["timestamp"]).timestamp())
                committed = datetime.fromisoformat(str(created[event["id"]])).replace(tzinfo=None)
                from_commit.append(at - (committed - datetime(1970, 1, 1)).total_seconds())
            sizes_plain = [await history(env.client, f"support-{cid}") for cid in plain]
            sizes_hook = [await history(env.client, f"support-{cid}") for cid in subscribed]
            one = got[0][1]
            delivery = await history(env.client, delivery_workflow_id(hook.webhook_id, one["id"]))
    finally:
        await env.shutdown()

    def line(name: str, values: list[float]) -> str:
        return (f"{name}: p50 {pct(values, 0.5) * 1000:.0f} ms, p95 {pct(values, 0.95) * 1000:.0f} ms, "
                f"max {max(values) * 1000:.0f} ms")

    print(f"{n} conversations with a webhook, {len(got)} deliveries ({statistics.mean(expected.values()):.1f} "
          "events per conversation)")
    print(line("latency from the event's timestamp to the receiver", from_event))
    print(line("latency from the delivery row's commit to the receiver", from_commit))
    for name, sizes in (("without a webhook", sizes_plain), ("with a webhook", sizes_hook)):
        print(f"conversation history {name}: {statistics.mean(s[0] for s in sizes):.1f} events, "
              f"{statistics.mean(s[1] for s in sizes):.0f} bytes (mean of {len(sizes)})")
    print(f"one delivery's own workflow history: {delivery[0]} events, {delivery[1]} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=5, help="conversations per variant")
    asyncio.run(main(parser.parse_args().n))
