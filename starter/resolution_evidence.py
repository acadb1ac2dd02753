"""What the system of record says before an operator's resolution is sent: a resolution the
retail ledger contradicts is refused by the API and the CLI (issue 7: the user is never told
an effect did not happen when it did).

An unknown outcome is escalated when the write could not be shown to have completed, even
by the re-check before escalating (e.g. the database was down then). Later the ledger may
answer: when it records the step's write as applied, ``not_applied`` would tell the user a
change they have did not go through, so it is refused, naming the evidence. The other way
is not refused: a ledger without the write does not prove that no money moved elsewhere (the
payments service), which is what the operator checks.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Optional

from temporalio.client import Client

from starter.replay_check import Systems, check, ref_operation
from workflows.support import support_workflow_id

SystemsFactory = Callable[[], Systems]
"""Opens the systems of record the workers write to (``Systems.from_settings``)."""


async def ledger_contradiction(client: Client, conversation_id: str, step_id: str, outcome: str,
                               systems: Systems) -> Optional[str]:
    """Why the ledger refuses resolving step ``step_id`` of ``conversation_id`` as
    ``outcome``, or None (no contradiction, or the ledger could not be asked: the
    operator's word stands). Reads the run's history (``RPCError`` when Temporal cannot be
    asked) and the ledger under each of the step's keys."""
    if outcome != "not_applied":
        return None
    # by workflow id: ``check`` strips one ``support-``, and a conversation id may start with it
    report = await check(client, support_workflow_id(conversation_id), systems)
    for effect in report.effects:
        if effect.key and ref_operation(effect.key) == step_id and effect.ledger == "applied":
            return (f"the retail ledger records the write of step {step_id} as applied: it cannot be resolved as "
                    "not_applied (resolve it as applied once you have checked the order)")
    return None


async def checked_against(factory: Optional[SystemsFactory], client: Client, conversation_id: str, step_id: str,
                          outcome: str) -> Optional[str]:
    """``ledger_contradiction`` with systems opened by ``factory`` (None: no check) and
    closed afterwards; a factory that cannot open them means no check either."""
    if factory is None:
        return None
    try:
        systems = await asyncio.to_thread(factory)
    except Exception:  # noqa: BLE001 - no evidence to be had: the operator's word stands
        return None
    try:
        return await ledger_contradiction(client, conversation_id, step_id, outcome, systems)
    finally:
        await asyncio.to_thread(systems.close)

