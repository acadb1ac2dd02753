"""The payments service (FastAPI, its own database): moves money for cancellations, payment
changes and refunds, exactly once per ``Idempotency-Key``.

- ``POST /operations`` (header ``Idempotency-Key``, body ``MoneyOperation``): 201 with the
  ``Recorded`` operation; the same key again returns the first result (200, ``replayed``),
  the same key with another body is a 409. 422 for invalid data: a NUL character, no
  movements (an operation moves money), a field out of bounds; 413 for a body over
  ``systems.service_kit.limits.MAX_BODY_BYTES``. Nothing is stored for either.
- ``GET /operations/{key}``: the recorded operation or 404 (proven absent).
- ``GET /operations?reference=``: every operation for a business reference (an order id).

Faults and deadlines: ``systems.service_kit``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from decimal import Decimal
from typing import Literal, Optional

import sqlalchemy as sa
from fastapi import FastAPI, Header, HTTPException, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection

from systems.service_kit.app import service_app
from systems.service_kit.limits import Text
from systems.service_kit.times import UtcTime

metadata = sa.MetaData()
operations = sa.Table(
    "payment_operations", metadata,
    sa.Column("idempotency_key", sa.String(300), primary_key=True),
    sa.Column("reference", sa.String(200), nullable=False, index=True),
    sa.Column("kind", sa.String(100), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("movements", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)


class Movement(BaseModel):
    """One money movement: ``payment`` (charged) or ``refund`` (paid back), in the currency's
    decimal units, on a payment method id."""

    transaction_type: Literal["payment", "refund"]
    amount: Decimal = Field(ge=0, max_digits=14, decimal_places=2)
    payment_method_id: Text = Field(min_length=1, max_length=200)


class MoneyOperation(BaseModel):
    """What to move: ``reference`` (the order id), ``kind`` (the business operation, e.g.
    ``cancel_pending_order``) and its ``movements`` in order."""

    reference: Text = Field(min_length=1, max_length=200)
    kind: Text = Field(min_length=1, max_length=100)
    movements: list[Movement] = Field(min_length=1, max_length=100)


class Recorded(MoneyOperation):
    """A recorded operation: its key, when, and whether this answer is a replay."""

    idempotency_key: str
    created_at: UtcTime
    replayed: bool = False


def _digest(op: MoneyOperation) -> str:
    return hashlib.sha256(op.model_dump_json().encode()).hexdigest()


def _recorded(conn: Connection, key: str) -> Optional[Recorded]:
    row = conn.execute(sa.select(operations).where(operations.c.idempotency_key == key)).first()
    if row is None:
        return None
    return Recorded(idempotency_key=row.idempotency_key, reference=row.reference, kind=row.kind,
                    movements=json.loads(row.movements), created_at=row.created_at, replayed=True)


def create_app(database_url: str) -> FastAPI:
    """The payments app on ``database_url`` (SQLite file or PostgreSQL)."""
    app, effects = service_app("payments", database_url, metadata)

    @app.post("/operations", status_code=201, response_model=Recorded)
    def move(op: MoneyOperation, request: Request, response: Response,
             idempotency_key: Text = Header(min_length=1, max_length=300)) -> Recorded:
        """Move the money of ``op`` once per ``Idempotency-Key``."""
        digest = _digest(op)

        def work(conn: Connection) -> Recorded:
            first = _recorded(conn, idempotency_key)
            if first is None:
                now = datetime.now(timezone.utc)
                conn.execute(operations.insert().values(
                    idempotency_key=idempotency_key, reference=op.reference, kind=op.kind, digest=digest,
                    movements=json.dumps([m.model_dump(mode="json") for m in op.movements]), created_at=now))
                return Recorded(**op.model_dump(), idempotency_key=idempotency_key, created_at=now)
            stored = conn.execute(sa.select(operations.c.digest).where(
                operations.c.idempotency_key == idempotency_key)).scalar_one()
            if stored != digest:
                raise HTTPException(409, "this idempotency key was used for another operation")
            return first

        try:
            result = effects.run(request, work)
        except HTTPException as err:
            if err.status_code != 409:
                raise
            with effects.engine.connect() as conn:  # lost a race on the key: the winner's result
                first = _recorded(conn, idempotency_key)
            if first is None or _digest(MoneyOperation(**first.model_dump())) != digest:
                raise
            result = first
        if result.replayed:
            response.status_code = 200
        return result

    @app.get("/operations/{key:path}", response_model=Recorded)
    def lookup(key: Text) -> Recorded:
        """The operation recorded under ``key``; 404 when none is (proven absent)."""
        with effects.engine.connect() as conn:
            found = _recorded(conn, key)
        if found is None:
            raise HTTPException(404, "no operation under this key")
        return found

    @app.get("/operations", response_model=list[Recorded])
    def by_reference(reference: Text) -> list[Recorded]:
        """Every operation for ``reference``, oldest first."""
        with effects.engine.connect() as conn:
            keys = conn.execute(sa.select(operations.c.idempotency_key).where(operations.c.reference == reference)
                                .order_by(operations.c.created_at)).scalars().all()
            return [r for r in (_recorded(conn, k) for k in keys) if r is not None]

    return app
