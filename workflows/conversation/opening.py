"""Opening a conversation: the ``open`` update that ``POST /conversations`` sends with the
workflow's start (update-with-start), so an unknown store is refused at once.

The store is checked against the worker's system of record by the ``check_store`` read
(a local activity); when it is unknown the conversation closes and the update fails with
``ErrorType.UNKNOWN_STORE`` (non-retryable), which the client maps to a 422. Pure models
and workflow code: imported inside the sandbox.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from workflows.domain.replies import unknown_store_reason
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.contracts import StoreCheckRequest
from workflows.domain.errors import ErrorType
from workflows.interrupts import local_failure_as_activity_error
from workflows.options import READ_RETRY, READ_TIMEOUT


class OpenConversation(BaseModel):
    """Input of the ``open`` update: the store the caller meant (a repeated open of the
    same conversation id with another store is a conflict, judged by the client)."""

    store: str = Field(min_length=1, max_length=64)


class ConversationOpened(BaseModel):
    """Result of ``open``: the conversation's id, its store and its status."""

    conversation_id: str
    store: str
    status: str


async def store_known(store: str) -> bool:
    """Ask the system of record whether it holds ``store`` (a read, run as a local activity inside
    the workflow task of the ``open`` update). Raises ``ActivityError`` when the system cannot be
    asked."""
    return await local_failure_as_activity_error(workflow.start_local_activity_method(
        ToolActivitiesApi.check_store, StoreCheckRequest(store=store),
        start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY, summary=f"check store {store}"), "check_store")


def unknown_store(store: str) -> ApplicationError:
    """The failure of ``open`` for an unknown store (``UnknownStore``, non-retryable)."""
    return ApplicationError(unknown_store_reason(store), type=ErrorType.UNKNOWN_STORE.value, non_retryable=True)
