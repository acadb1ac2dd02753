"""``WebhookActivities``: one signed attempt of a webhook delivery (``deliver``), marking a
delivery failed (``give_up``) and the outbox sweep (``sweep``), for ``workflows.webhooks``.

An attempt reads the subscription and the event afresh (a deleted subscription or an erased
event ends the delivery: ``WebhookGone``, non-retryable), checks the URL's addresses now
(``activities.webhooks.addresses``: DNS may have changed since the subscription was made), and
POSTs the event to the address it checked, with the URL's host name in ``Host`` and, for
``https``, in TLS's server name (so the certificate is verified against the name, and no second
lookup can send the request elsewhere). The body is the event's JSON
(``{id, type, timestamp, sequence, data}``, the same bytes as the event stream's ``data:``),
signed per the Standard Webhooks specification with its library (``standardwebhooks``):
``webhook-id`` is the event's id (the same on every redelivery), ``webhook-timestamp`` the
attempt's time, ``webhook-signature`` ``v1,<base64 HMAC-SHA256>``.

A receiver holds a worker for at most ``timeout_seconds`` (connect, send, the status line):
redirects are not followed (a 3xx is a failed attempt), the response body is never read (a
50 MB body costs nothing), proxies from the environment are not used. A 2xx is delivered;
anything else is recorded in the delivery's row (attempts, last status, what went wrong) and
raised as the retryable ``WebhookNotAccepted``, so Temporal retries it on the workflow's
schedule. Messages name statuses and error types, never the event's data.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Optional

import httpx
import sqlalchemy.exc as sa_exc
from standardwebhooks import Webhook
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.store.webhooks import Target, WebhookStore
from activities.webhooks.addresses import Allowance, Refused, Resolved, resolve
from activities.webhooks.starts import DeliveryStarter
from workflows.domain.errors import ErrorType
from workflows.domain.journal import PublicEvent
from workflows.webhooks.workflow import DeliveryAttempt, SweepRequest, WebhookActivitiesApi

log = logging.getLogger("statekeeper.webhooks")

USER_AGENT = "statekeeper-webhooks"


def body_of(target: Target) -> bytes:
    """The request body of ``target``'s event: its JSON, compact with sorted keys (the bytes signed)."""
    event = PublicEvent(id=target.event_id, type=target.event_type, timestamp=target.at, sequence=target.sequence,
                        data=target.data)
    return json.dumps(event.model_dump(mode="json"), separators=(",", ":"), sort_keys=True).encode()


def signed_headers(secret: str, event_id: str, body: bytes, now: Optional[datetime] = None) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: ``webhook-id`` (the event's id),
    ``webhook-timestamp`` (``now``, whole seconds since the epoch) and ``webhook-signature``."""
    now = now or datetime.now(timezone.utc)
    return {"webhook-id": event_id, "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(secret).sign(event_id, now, body)}


async def post(url: str, resolved: Resolved, body: bytes, headers: dict[str, str],
               timeout_seconds: float) -> tuple[Optional[int], Optional[str]]:
    """POST ``body`` to ``url`` at the checked address ``resolved``; returns the status (None:
    no answer) and what went wrong (None: a 2xx). Never raises for the receiver's sake."""
    target = httpx.URL(url).copy_with(host=str(resolved.address))
    host = httpx.URL(url).netloc.decode("ascii")
    extensions = {"sni_hostname": resolved.host} if resolved.scheme == "https" else {}
    sent = {**headers, "host": host, "content-type": "application/json", "user-agent": USER_AGENT}
    try:
        async with httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                     timeout=httpx.Timeout(timeout_seconds)) as client:
            async with asyncio.timeout(timeout_seconds):
                # the status line and headers only: the body is never read
                async with client.stream("POST", target, content=body, headers=sent,
                                         extensions=extensions) as response:
                    status = response.status_code
    except TimeoutError:
        return None, f"no answer within {timeout_seconds:g} s"
    except httpx.HTTPError as err:
        return None, f"no answer: {type(err).__name__}"
    if 200 <= status < 300:
        return status, None
    if 300 <= status < 400:
        return status, f"answered {status}: redirects are not followed"
    return status, f"answered {status}"


class WebhookActivities(WebhookActivitiesApi):
    """The delivery activities over ``store``, sending to addresses ``allow`` permits, each
    attempt within ``timeout_seconds``; ``starter`` starts workflows for the sweep. Register
    ``instance.all()`` with the worker."""

    def __init__(self, store: WebhookStore, starter: DeliveryStarter, allow: Allowance,
                 timeout_seconds: float = 10.0) -> None:
        self.store, self.starter, self.allow, self.timeout_seconds = store, starter, allow, timeout_seconds

    @activity.defn
    async def deliver(self, req: DeliveryAttempt) -> int:
        """One attempt (see the module); returns the receiver's 2xx status. Raises
        ``ApplicationError`` ``WebhookGone`` (non-retryable) or ``WebhookNotAccepted``."""
        async with heartbeating():
            try:
                target = await asyncio.to_thread(self.store.target, req.webhook_id, req.event_id)
            except ValueError as err:  # the secret does not open: the keys changed under it
                raise ApplicationError(str(err), type=ErrorType.WEBHOOK_NOT_ACCEPTED.value) from None
            if target is None:
                raise ApplicationError("the webhook was deleted or its event erased",
                                       type=ErrorType.WEBHOOK_GONE.value, non_retryable=True)
            body = body_of(target)
            try:
                resolved = await resolve(target.url, self.allow)
            except Refused as err:
                status, error = None, str(err)
            else:
                headers = signed_headers(target.secret, target.event_id, body)
                status, error = await post(target.url, resolved, body, headers, self.timeout_seconds)
            await asyncio.to_thread(self.store.attempted, req.webhook_id, req.event_id, status, error)
        if error is not None:
            raise ApplicationError(f"the webhook's receiver did not take the event: {error}",
                                   type=ErrorType.WEBHOOK_NOT_ACCEPTED.value)
        assert status is not None
        return status

    @activity.defn
    async def give_up(self, req: DeliveryAttempt) -> None:
        """Mark the delivery failed (its retries ran out)."""
        await asyncio.to_thread(self.store.failed, req.webhook_id, req.event_id)
        log.warning("webhooks: delivery %s of %s failed: its retries ran out", req.event_id, req.webhook_id)

    @activity.defn
    async def sweep(self, req: SweepRequest) -> int:
        """Start the deliveries unstarted for ``req.grace_seconds`` or more; returns how many (0
        while the journal's database cannot be reached: the worker named that once when it
        started, and the next sweep asks again)."""
        async with heartbeating():
            try:
                return await self.starter.sweep(timedelta(seconds=req.grace_seconds))
            except sa_exc.OperationalError:
                return 0

    def all(self) -> list:
        """The activity methods, for ``Worker(activities=...)``."""
        return [self.deliver, self.give_up, self.sweep]
