"""What the systems of record say before an operator's resolution is sent: a resolution they
contradict is refused by the API and the CLI: the user is never told an effect happened that
did not, or did not happen when it did.

An unknown outcome is escalated when the write could not be shown to have completed, even
by the re-check before escalating (e.g. the database was down then). Later the ledger may
answer: when it records the step's write as applied, ``not_applied`` would tell the user a
change they have did not go through, so it is refused, naming the evidence. The other way
is refused only when the payments service proves the money did not move (a ledger without
the write does not prove that no money moved in the payments service, which is what the
operator checks then). While the ledger cannot be asked, nothing is resolved.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Optional

from temporalio.client import Client

from starter.client.failure_words import failure_kind
from starter.ops.replay_check import Systems, check, ref_operation
from workflows.conversation.workflow import support_workflow_id

SystemsFactory = Callable[[], Systems]
"""Opens the systems of record the workers write to (``Systems.from_settings``)."""


async def ledger_contradiction(client: Client, conversation_id: str, step_id: str, outcome: str,
                               systems: Systems) -> Optional[str]:
    """Why the systems of record refuse resolving step ``step_id`` of ``conversation_id`` as
    ``outcome``, or None. Refused: ``not_applied`` when the retail ledger records the step's
    write as applied; ``applied`` when it does but the payments service holds no money
    movement under its key (the customer would be told of a refund that never moved); either
    while the ledger cannot be asked about the step's write. Reads the run's history
    (``RPCError`` when Temporal cannot be asked) and the systems under each of the step's keys."""
    # by workflow id: ``check`` strips one ``support-``, and a conversation id may start with it
    report = await check(client, support_workflow_id(conversation_id), systems)
    for effect in report.effects:
        if effect.system != "retail" or not effect.key or ref_operation(effect.key) != step_id:
            continue
        if effect.ledger is None:
            return (f"the retail ledger cannot be asked about the write of step {step_id} right now: resolve it "
                    "once it answers (a resolution must agree with the system of record)")
        if outcome == "not_applied" and effect.ledger == "applied" and effect.money == "absent":
            # "resolve it as applied" sent the operator to the refusal below: neither outcome fits
            return (f"the retail ledger records the write of step {step_id} as applied, so it cannot be resolved "
                    "as not_applied; the payments service holds no money movement for it, so it cannot be "
                    "resolved as applied either: the case stays with its ticket")
        if outcome == "not_applied" and effect.ledger == "applied":
            return (f"the retail ledger records the write of step {step_id} as applied: it cannot be resolved as "
                    "not_applied (resolve it as applied once you have checked the order)")
        if outcome == "applied" and effect.ledger == "applied" and effect.money == "absent":
            return (f"the retail ledger records the write of step {step_id}, but the payments service holds no "
                    "money movement for it: the money has not moved, so it cannot be resolved as applied (the "
                    "customer would be told of a refund they do not have); the case stays with its ticket")
    return None


async def checked_against(factory: Optional[SystemsFactory], client: Client, conversation_id: str, step_id: str,
                          outcome: str) -> Optional[str]:
    """``ledger_contradiction`` with systems opened by ``factory`` (None: no check) and
    closed afterwards; systems that cannot be opened refuse the resolution too."""
    if factory is None:
        return None
    try:
        systems = await asyncio.to_thread(factory)
    except Exception as err:  # noqa: BLE001 - no evidence to be had
        return (f"the systems of record cannot be opened ({failure_kind(err)}): resolve it once they answer "
                "(a resolution must agree with the system of record)")
    try:
        return await ledger_contradiction(client, conversation_id, step_id, outcome, systems)
    finally:
        await asyncio.to_thread(systems.close)



@dataclass(frozen=True)
class LedgerEvidence:
    """The client's ``ResolutionEvidence`` from the systems of record that ``factory`` opens
    (``starter.client.resolutions``): opened for each check and closed afterwards."""

    factory: SystemsFactory

    async def contradiction(self, client: Client, conversation_id: str, step_id: str, outcome: str) -> Optional[str]:
        """``checked_against`` with this evidence's systems."""
        return await checked_against(self.factory, client, conversation_id, step_id, outcome)
