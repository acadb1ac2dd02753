"""HTTP routes for standalone refunds and approvals (mounted by ``starter.api``).

    POST /refunds                 RefundRequest                        -> 202 {refund_id, status, ...}
    GET  /refunds/{refund_id}                                          -> 200 RefundStatus
    GET  /refunds?order_id=&customer_id=&status=&limit=&next_page_token= -> 200 {items, next_page_token}
    POST /approvals/{approval_id} {decision, approver, note?}          -> 200 Approval
    GET  /approvals?status=pending&limit=&next_page_token=             -> 200 {items, next_page_token}

Refusals are ``ConversationError``s, turned into ``{"detail"}`` answers by the app's handler.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from fastapi import APIRouter, Depends, Query, status

from starter.api_models import ApprovalId, DecisionIn, RefundId, client_dep, filter_query, page_token_query
from starter.api_responses import responses_for
from starter.client import StatekeeperClient
from starter.listing import MAX_PAGE, Page
from starter.refunds import RefundStatus
from workflows.approvals import Approval
from workflows.standalone import RefundRequest

router = APIRouter()


@router.post("/refunds", status_code=status.HTTP_202_ACCEPTED, response_model=RefundStatus,
             responses=responses_for("POST", "/refunds"))
async def request_refund(body: RefundRequest, client: StatekeeperClient = Depends(client_dep)) -> RefundStatus:
    """Start a standalone refund by business identity; a repeated request returns the same
    ``refund_id`` (one run), the same ``request_id`` with other arguments is a 409."""
    return await client.request_refund(body)


@router.get("/refunds", response_model=Page, responses=responses_for("GET", "/refunds"))
async def list_refunds(order_id: Optional[str] = filter_query(), customer_id: Optional[str] = filter_query(),
                       status: Optional[str] = filter_query(), limit: int = Query(20, ge=1, le=MAX_PAGE),
                       next_page_token: Optional[str] = page_token_query(),
                       client: StatekeeperClient = Depends(client_dep)) -> Page:
    """Refunds (standalone and conversations') matching every filter, one page."""
    return await client.list_refunds(order_id=order_id, customer_id=customer_id, status=status, limit=limit,
                                     next_page_token=next_page_token)


@router.get("/refunds/{refund_id}", response_model=RefundStatus, responses=responses_for("GET", "/refunds/{refund_id}"))
async def get_refund(refund_id: RefundId, client: StatekeeperClient = Depends(client_dep)) -> RefundStatus:
    """A refund's status, step, and (once finished) outcome."""
    return await client.refund(refund_id)


@router.post("/approvals/{approval_id}", response_model=Approval,
             responses=responses_for("POST", "/approvals/{approval_id}"))
async def decide_approval(approval_id: ApprovalId, body: DecisionIn,
                          client: StatekeeperClient = Depends(client_dep)) -> Any:
    """Approve or reject a pending approval as ``approver``; answers the decided approval."""
    return await client.decide_approval(approval_id, body.decision, body.approver, body.note)


@router.get("/approvals", response_model=Page, responses=responses_for("GET", "/approvals"))
async def list_approvals(status: Literal["pending"] = "pending", limit: int = Query(20, ge=1, le=MAX_PAGE),
                         next_page_token: Optional[str] = page_token_query(),
                         client: StatekeeperClient = Depends(client_dep)) -> Page:
    """Approvals awaiting a decision (``PendingApproval`` of running processes), one page."""
    return await client.list_pending_approvals(limit=limit, next_page_token=next_page_token)
