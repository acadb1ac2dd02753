"""Replies by message id across runs: ``AnsweredReplies``, the mixin of ``SupportWorkflow``
that remembers which message ids (update ids) were answered and with what.

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
    """Holds ``_answered`` (update id → reply), set by the workflow's ``__init__``."""

    _answered: dict[str, AssistantReply]

    def _recorded(self) -> Optional[AssistantReply]:
        """The reply already given to the current update's message id, if any (validator or handler)."""
        info = workflow.current_update_info()
        return self._answered.get(info.id) if info is not None else None

    def _remember(self, update_id: str, reply: AssistantReply) -> None:
        """Record ``reply`` under ``update_id``, keeping the newest ``ANSWERED_KEPT``."""
        self._answered[update_id] = reply
        while len(self._answered) > ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]

    @workflow.query(description="The reply recorded for a message id (the update id, msg-<message id>), or "
                                "null: a retry of a message an earlier run answered, once the run has finished.")
    def answered_reply(self, update_id: str) -> Optional[AssistantReply]:
        """The reply recorded under ``update_id`` in this run or an earlier one (``None`` when
        none is recorded, or it is older than the last ``ANSWERED_KEPT``)."""
        return self._answered.get(update_id)
