"""The bench's model and worker process for ``bench/turns.py``.

``brain(view, plan)`` is a stateless stand-in model that decides from the state view alone,
so any worker process (and the code of an older commit) answers the same way:

- a message with an email authenticates (``find_user_id_by_email``), then replies;
- ``order #W…`` reads the order (``get_order_details``) once per turn, then replies;
- ``cancel #W…`` proposes ``cancel_pending_order`` (the workflow asks the user to confirm);
- after the user's ``yes`` the workflow runs the write; the model then replies.

``python bench/turns/worker_process.py [--root DIR] [--fault hang-model|hang-read|pause-write --marker PATH]``
runs a worker (``worker.run_worker``) with that model, on the ``STATEKEEPER_*`` settings of the
environment; ``--root`` loads the project from another checkout (the baseline commit); a fault
writes ``--marker`` and hangs at that point, for a SIGKILL.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any, Optional

STARTED = time.time()
ORDER = re.compile(r"#W\d+")
EMAIL = re.compile(r"[\w.+-]+@[\w.-]+")


def stamp(name: str) -> None:
    """A ``STAMP <name> <unix seconds>`` line in the worker's log: ``bench/turns/recovery.py``
    builds a restart's timeline from them."""
    print(f"STAMP {name} {time.time():.3f}", flush=True)


def _call(name: str, **arguments: Any) -> dict:
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


def _reply(text: str) -> dict:
    return {"kind": "reply", "text": text}


def brain(view: dict, plan: Optional[dict] = None) -> dict:
    """The next action for ``view`` (see the module docstring)."""
    turns = view.get("recent_turns") or []
    users = [t for t in turns if t.get("role") == "user"]
    text = users[-1]["text"] if users else ""
    turn = view.get("turn")
    this_turn = [o for o in view.get("observations") or [] if o.get("turn") == turn]
    if text.lower().startswith("yes"):
        return _reply("Done: the order is cancelled.")
    email = EMAIL.search(text)
    if email and not view.get("customer"):
        if this_turn:
            return _reply("I could not find you; please check the email.")
        return _call("find_user_id_by_email", email=email.group(0))
    order = ORDER.search(text)
    if order and text.lower().startswith("cancel"):
        if order.group(0) not in (view.get("orders") or {}) and not this_turn:
            return _call("get_order_details", order_id=order.group(0))
        if any(r.get("turn") == turn for r in view.get("rejections") or []):
            return _reply("That order cannot be cancelled.")
        return _call("cancel_pending_order", order_id=order.group(0), reason="no longer needed")
    if order:
        # a status question reads the order afresh each turn: read now when this turn's read is in
        # the view (as an observation, or, since reads are folded, as the order's ``read_turn``);
        # a view without observations: once the order is in the state
        fact = (view.get("orders") or {}).get(order.group(0))
        if "observations" in view:
            read_now = bool(this_turn) or bool(fact and fact.get("read_turn") == turn)
        else:
            read_now = fact is not None
        if read_now:
            return _reply(f"Order {order.group(0)} is on its way.")
        return _call("get_order_details", order_id=order.group(0))
    return _reply("Hello! How can I help?")


class _Faulty:
    """A tool port that writes ``marker`` and hangs on the first read (``hang-read``) or right
    after the first write commits (``pause-write``)."""

    def __init__(self, inner: Any, fault: str, marker: Path) -> None:
        self._inner, self._fault, self._marker = inner, fault, marker

    def invoke(self, store, tool, arguments, *, idempotency_key=None, scope_user_id=None, guard=None):
        stamp(f"{'write' if idempotency_key else 'read'}:{tool}")
        if self._fault == "hang-read" and idempotency_key is None and tool == "get_order_details":
            self._marker.write_text(tool)
            time.sleep(600)
        result = self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                    scope_user_id=scope_user_id, guard=guard)
        if self._fault == "pause-write" and idempotency_key is not None and not result.replayed:
            self._marker.write_text(idempotency_key)
            time.sleep(600)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main(argv: list[str]) -> None:
    """Run a bench worker (see the module docstring)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--fault", choices=("hang-model", "hang-read", "pause-write"))
    parser.add_argument("--marker")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.root)
    import asyncio
    import logging

    from activities.llm.model_activity import ModelActivities, offline_client
    from activities.retail_port import RetailPort
    from activities.tools import ToolActivities
    from settings import Settings
    from starter.runtime import worker
    from starter.runtime.worker import build_backend, run_worker

    stamp("main")  # the interpreter and this module are up; STARTED: this module's first line
    print(f"STAMP module {STARTED:.3f}", flush=True)
    stamp("imports")
    _instrument(worker)
    logging.basicConfig(level=logging.WARNING)
    settings = Settings()
    marker = Path(args.marker) if args.marker else None

    async def model_brain(view: dict, plan: Optional[dict] = None) -> dict:
        stamp(f"model:turn{view.get('turn')}")
        if args.fault == "hang-model" and view.get("turn", 0) >= 2:
            marker.write_text(str(view.get("turn")))
            await asyncio.sleep(600)  # waiting for the provider: the event loop (and heartbeats) go on
        return brain(view, plan)

    # a factory defers the SDK's import until the worker polls (an older commit's code takes a client)
    client = (lambda: offline_client(600.0, brain=model_brain)) if hasattr(ModelActivities, "warm") \
        else offline_client(600.0, brain=model_brain)
    model = ModelActivities(client, model="bench-brain")
    port = RetailPort(build_backend(settings))
    tool_port = _Faulty(port, args.fault, marker)
    tools = ToolActivities(tools=tool_port, outbox=port, tickets=port)
    asyncio.new_event_loop().run_until_complete(run_worker(settings, tools=tools, model=model))


def _instrument(worker: Any) -> None:
    """Stamp the startup stages of ``worker.run_worker`` (connected, preflight done, polling,
    the model SDK's client built) by wrapping the module's functions."""
    from activities.llm.model_activity import ModelActivities

    if not all(hasattr(worker, name) for name in ("connect", "preflight", "run_until_signalled")):
        return  # an older commit (a --baseline) without these stages: no stamps, the worker runs as is
    connect, preflight, run = worker.connect, worker.preflight, worker.run_until_signalled

    async def connected(*a: Any, **k: Any) -> Any:
        client = await connect(*a, **k)
        stamp("connected")
        return client

    async def checked(*a: Any, **k: Any) -> Any:
        await preflight(*a, **k)
        stamp("preflight")

    async def polling(*a: Any, **k: Any) -> Any:
        stamp("polling")
        return await run(*a, **k)

    worker.connect, worker.preflight, worker.run_until_signalled = connected, checked, polling
    if hasattr(ModelActivities, "warm"):
        warm = ModelActivities.warm

        def warmed(self: Any) -> None:
            warm(self)
            stamp("sdk")

        ModelActivities.warm = warmed


if __name__ == "__main__":
    main(sys.argv[1:])
