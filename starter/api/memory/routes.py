"""``/customers/{customer_id}/memory``: what statekeeper remembers about a customer
(``starter.client.memory.reads``), read and corrected by the tenant's backends, its operators and a
key scoped to that customer. Every read and every change is in the audit log, by pseudonym."""

from __future__ import annotations

import asyncio
from typing import Any

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status

from starter.api.auth import Permission
from starter.api.guard import Guard, guard_dep
from starter.api.models import PathId, client_dep
from starter.api.responses import responses_for
from starter.client.conversations import StatekeeperClient
from starter.client.errors import ConversationError
from starter.client.listing import FILTER_VALUE
from starter.client.memory.reads import CustomerMemory, MemoryPage

router = APIRouter()

CustomerId = Annotated[str, Path(min_length=1, max_length=128, pattern=FILTER_VALUE,
                                 description="The customer id, as the lists take it (ASCII letters, digits and "
                                             "#._:@-, at most 128 characters).")]
FactId = PathId("fact id", max_length=40)


async def memory_dep(request: Request, client: StatekeeperClient = Depends(client_dep)) -> CustomerMemory:
    """The app's ``CustomerMemory`` on the journal's database (opened on first use); 503 while
    that database is unreachable."""
    state = request.app.state
    if getattr(state, "memory", None) is None:
        try:
            journal = await state.ensure_journal()
            url = journal.engine.url.render_as_string(hide_password=False)
            state.memory = await asyncio.to_thread(CustomerMemory, url, client._pseudonym_key)  # noqa: SLF001
        except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="the memory store is not reachable") from err
    return state.memory


def _subject(guard: Guard, memory: CustomerMemory, customer_id: str) -> str:
    """The customer's pseudonym, once the caller may act on it: a key scoped to another
    customer gets the same 404 as a customer with nothing remembered."""
    guard.require(Permission.CUSTOMER_MEMORY)
    pseudonym = memory.pseudonym(customer_id)
    scoped = guard.principal.customer
    if scoped is not None and scoped != pseudonym:
        raise ConversationError("no memory for this customer", "not_found")
    return pseudonym


async def _guarded(call: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(call, *args)
    except ConversationError:
        raise
    except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="the memory store is not reachable") from err


@router.get("/customers/{customer_id}/memory", response_model=MemoryPage,
            responses=responses_for("GET", "/customers/{customer_id}/memory"))
async def get_memory(customer_id: CustomerId, guard: Guard = Depends(guard_dep),
                     memory: CustomerMemory = Depends(memory_dep)) -> MemoryPage:
    """Every fact remembered about the customer (the id as the lists take it) in the caller's
    tenant: kind, value, where it was learnt (conversation, turn, the user's words), when it was
    learnt, last confirmed and when it expires. Audited."""
    subject = _subject(guard, memory, customer_id)
    page = await _guarded(memory.facts, guard.principal.tenant, customer_id)
    await guard.audit("read_memory", subject, f"items={len(page.items)}")
    return page


@router.delete("/customers/{customer_id}/memory/{fact_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=responses_for("DELETE", "/customers/{customer_id}/memory/{fact_id}"))
async def forget_fact(customer_id: CustomerId, fact_id: FactId, guard: Guard = Depends(guard_dep),
                      memory: CustomerMemory = Depends(memory_dep)) -> None:
    """Forget one fact; 404 when the customer has no such fact (also the second time). Audited."""
    subject = _subject(guard, memory, customer_id)
    await _guarded(memory.forget, guard.principal.tenant, customer_id, fact_id)
    await guard.audit("forget_memory", subject, f"fact={fact_id}")
