"""Replies by message id across runs: ``AnsweredReplies``, which ``SupportWorkflow`` holds to
remember which message ids (update ids) were answered and with what.

Temporal deduplicates update ids within one run only, and a finished run answers a recorded
update id itself; the replies of earlier runs travel in the next run's input
(``SupportInput.answered``), so only the workflow can answer a retry of a message an earlier
run handled. It does so in the update's validator's stead (a retry is accepted whatever the
conversation's status, as Temporal would answer it within its run) and, after the run has
completed, through the ``answered_reply`` query the client asks when an update is refused as
finished. Deterministic; imported inside the workflow sandbox.
"""

from __future__ import annotations

from typing import Optional

from temporalio import workflow

from workflows.domain.contracts import AssistantReply

ANSWERED_KEPT = 50
"""Message ids whose replies a new run still knows: a client retries within minutes, not
after 50 more messages."""


class AnsweredReplies:
    """Update id → the reply given to that message, the newest ``ANSWERED_KEPT``, starting
    from what earlier runs answered (``SupportInput.answered``)."""

    def __init__(self, answered: dict[str, AssistantReply]) -> None:
        self._answered = dict(answered)

    def recorded(self) -> Optional[AssistantReply]:
        """The reply already given to the current update's message id, if any (validator or handler)."""
        info = workflow.current_update_info()
        return self._answered.get(info.id) if info is not None else None

    def remember(self, update_id: str, reply: AssistantReply) -> None:
        """Record ``reply`` under ``update_id``, keeping the newest ``ANSWERED_KEPT``."""
        self._answered[update_id] = reply
        while len(self._answered) > ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]

    def get(self, update_id: str) -> Optional[AssistantReply]:
        """The reply recorded under ``update_id`` in this run or an earlier one (None when none
        is recorded, or it is older than the last ``ANSWERED_KEPT``)."""
        return self._answered.get(update_id)

    def carried(self) -> dict[str, AssistantReply]:
        """What the next run starts from (continue-as-new's ``SupportInput.answered``)."""
        return dict(self._answered)
