"""HTTP routes for standalone refunds and approvals (mounted by ``starter.api.application``).

    POST /refunds                 RefundRequest                        -> 202 {refund_id, status, ...}
    GET  /refunds/{refund_id}                                          -> 200 RefundStatus
    GET  /refunds?order_id=&customer_id=&status=&step=&limit=&next_page_token= -> 200 {items, next_page_token}
    GET  /approvals/{approval_id}                                      -> 200 ApprovalItem
    POST /approvals/{approval_id} {decision, approver, note?}          -> 200 Approval
    GET  /approvals?status=pending&limit=&next_page_token=             -> 200 {items: [ApprovalItem], next_page_token}
    POST /conversations/{id}/resolutions  (``starter.api.operators``, included here)

Refusals are ``ConversationError``s, turned into ``{"detail"}`` answers by the app's handler.
Refunds need a tenant-wide key (service or operator), approvals an operator key; another
tenant's refund or approval is a 404 (``starter.api.guard``).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from fastapi import APIRouter, Depends, Query, status

from starter.api.guard import Guard, guard_dep
from starter.api.operators import router as operators_router
from starter.api.models import ApprovalId, DecisionIn, RefundId, client_dep, filter_query, page_token_query
from starter.api.responses import responses_for
from starter.api.auth import Permission
from starter.client.approvals import ApprovalItem
from starter.client.conversations import StatekeeperClient
from starter.client.listing import MAX_PAGE, Page
from starter.client.refunds import RefundStatus
from workflows.domain.policy.approvals import Approval
from workflows.refund.standalone import RefundRequest

router = APIRouter()
router.include_router(operators_router)  # operators' resolutions of unknown outcomes


@router.post("/refunds", status_code=status.HTTP_202_ACCEPTED, response_model=RefundStatus,
             responses=responses_for("POST", "/refunds"))
async def request_refund(body: RefundRequest, guard: Guard = Depends(guard_dep),
                         client: StatekeeperClient = Depends(client_dep)) -> RefundStatus:
    """Start a standalone refund by business identity; a repeated request returns the same
    ``refund_id`` (one run), the same ``request_id`` with other arguments is a 409."""
    guard.require(Permission.REQUEST_REFUND)
    attributes = guard.start_attributes(body.store)[:1]  # the tenant: a refund has no customer scope
    return await client.request_refund(body, search_attributes=attributes)


RefundListStatus = Literal["running", "awaiting_approval", "applied", "refused", "escalated", "terminated",
                           "timed_out", "failed", "stuck"]
"""The statuses ``GET /refunds`` filters by: those of ``starter.client.refunds.RefundStatus`` (``terminated``,
``timed_out``, ``failed``: Temporal ended the run, ``starter.client.run_status``; ``stuck``: its workflow
tasks keep failing, ``starter.client.run_status``)."""


@router.get("/refunds", response_model=Page, responses=responses_for("GET", "/refunds"))
async def list_refunds(order_id: Optional[str] = filter_query(), customer_id: Optional[str] = filter_query(),
                       status: Optional[RefundListStatus] = Query(None, description=(
                           "A refund's status as GET /refunds/{refund_id} states it")),
                       step: Optional[str] = filter_query(), limit: int = Query(20, ge=1, le=MAX_PAGE),
                       next_page_token: Optional[str] = page_token_query(), guard: Guard = Depends(guard_dep),
                       client: StatekeeperClient = Depends(client_dep)) -> Page:
    """The caller's tenant's refunds (standalone and conversations') matching every filter, one
    page. ``status`` is one of the statuses ``GET /refunds/{refund_id}`` answers (another is a
    422), as are the items' (``StatekeeperClient.list_refunds``): ``awaiting_approval`` is a
    running refund at that step, ``running`` one that is not."""
    guard.require(Permission.READ_REFUNDS)
    page = await client.list_refunds(order_id=order_id, customer_id=customer_id, status=status, step=step, limit=limit,
                                     next_page_token=next_page_token, scope=guard.scope())
    await guard.audit_list(client, "refunds", customer_id, len(page.items))
    return page


@router.get("/refunds/{refund_id}", response_model=RefundStatus, responses=responses_for("GET", "/refunds/{refund_id}"))
async def get_refund(refund_id: RefundId, guard: Guard = Depends(guard_dep),
                     client: StatekeeperClient = Depends(client_dep)) -> RefundStatus:
    """A refund's status, step, and (once finished) outcome."""
    await guard.refund(client, refund_id)
    return await client.refund(refund_id)


@router.get("/approvals/{approval_id}", response_model=ApprovalItem,
            responses=responses_for("GET", "/approvals/{approval_id}"))
async def read_approval(approval_id: ApprovalId, guard: Guard = Depends(guard_dep),
                        client: StatekeeperClient = Depends(client_dep)) -> ApprovalItem:
    """An approval as a supervisor reads it, pending or decided (operators): the write with
    the exact detail the user confirmed and its amount, why it needs a supervisor, when it
    was requested and expires, who decided it and when."""
    await guard.approval(client, approval_id, Permission.LIST_APPROVALS)
    return await client.approval(approval_id)


@router.post("/approvals/{approval_id}", response_model=Approval,
             responses=responses_for("POST", "/approvals/{approval_id}"))
async def decide_approval(approval_id: ApprovalId, body: DecisionIn, guard: Guard = Depends(guard_dep),
                          client: StatekeeperClient = Depends(client_dep)) -> Any:
    """Approve or reject a pending approval as ``approver`` (operators); answers the decided approval."""
    await guard.approval(client, approval_id)
    # the approver is a name the caller types: the entry ties the decision to the key that sent
    # it, written first, so a decision whose entry cannot be written is never sent (503)
    await guard.audit("decide_approval", approval_id, f"decision={body.decision} approver={body.approver}")
    return await client.decide_approval(approval_id, body.decision, body.approver, body.note)


@router.get("/approvals", response_model=Page, responses=responses_for("GET", "/approvals"))
async def list_approvals(status: Literal["pending"] = "pending", limit: int = Query(20, ge=1, le=MAX_PAGE),
                         next_page_token: Optional[str] = page_token_query(), guard: Guard = Depends(guard_dep),
                         client: StatekeeperClient = Depends(client_dep)) -> Page:
    """The caller's tenant's approvals awaiting a decision (``PendingApproval`` of running
    processes), one page (operators), each as ``GET /approvals/{approval_id}`` reads it."""
    guard.require(Permission.LIST_APPROVALS)
    return await client.list_pending_approvals(limit=limit, next_page_token=next_page_token, scope=guard.scope())
