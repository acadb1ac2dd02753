"""Identity activities: the customer pseudonyms the ``CustomerId`` search attribute holds.

Why an activity: the pseudonym is keyed (HMAC-SHA256, ``workflows.domain.pseudonym``) and the key
is a secret of the deployment. Workflows never read settings, and anything in a workflow's
input or history is readable by everyone with Web UI access; so the key stays in the worker,
given to this class at construction (``worker.build_worker``), and a workflow asks for the
pseudonym of a customer id it already holds. Only the pseudonym enters the history (as the
activity's result), never the key. The workflows run it as a local activity: it is pure
computation, so it needs no task-queue round trip.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from workflows.activity_api import IdentityActivitiesApi
from workflows.domain.contracts import PseudonymRequest
from workflows.domain.errors import ErrorType
from workflows.domain.pseudonym import customer_pseudonym


class IdentityActivities(IdentityActivitiesApi):
    """Pseudonyms under ``key`` (``Settings.pseudonym_secret()``); register ``instance.all()``.
    Raises ``ValueError`` for an empty key: a worker must not start without one."""

    def __init__(self, key: str) -> None:
        if not key:
            raise ValueError("a pseudonym key is required")
        self._key = key

    @activity.defn
    async def customer_pseudonym(self, req: PseudonymRequest) -> str:
        """``cust-`` + 20 hex characters of HMAC-SHA256(key, customer id). Raises a
        non-retryable ``ApplicationError`` (``InvalidArguments``) for an empty id."""
        if not req.customer_id:
            raise ApplicationError("customer id is empty", type=ErrorType.INVALID_ARGUMENTS.value, non_retryable=True)
        return customer_pseudonym(req.customer_id, self._key)

    def all(self) -> list:
        """The activity methods, for ``Worker(activities=...)``."""
        return [self.customer_pseudonym]
