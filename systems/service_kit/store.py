"""A reference-searchable store of records (the email service's messages, the ticketing
service's tickets): the routes both services had written twice, made once.

``reference_store`` adds to a service app, under ``/<path>``:

- ``POST /<path>``: record one more (no idempotency key: every call is a new record), run
  through the service's ``Effects`` (deadline, faults); 201 with the record, its id and time;
- ``GET /<path>?reference=``: every record with that business reference, oldest first (empty:
  none), which is how a caller learns whether an ambiguous create happened;
- ``GET /<path>/references``: every reference the service holds (erasure of a conversation);
- ``POST /<path>/erase``: delete the records with one of ``references`` or of one of the
  owners (``owners``: the body field, the column, whether compared case-insensitively);
  returns ``{"deleted": n}``.

No ``from __future__ import annotations`` here: the route functions are built at runtime
inside ``reference_store`` and FastAPI reads their annotations as objects; postponed ones
would be strings naming this function's locals, which it cannot resolve.
"""

from datetime import datetime, timezone
from typing import Any, NamedTuple

import sqlalchemy as sa
from fastapi import FastAPI, Request
from pydantic import BaseModel, Field, create_model
from sqlalchemy.engine import Connection

from systems.service_kit.effects import Effects
from systems.service_kit.limits import Text

MAX_ERASE_REFERENCES = 10_000
MAX_ERASE_OWNERS = 100


class Owners(NamedTuple):
    """How an erasure names a record's owner: ``field`` of the erase body (a list), the
    table's ``column``, and whether they compare case-insensitively (email addresses)."""

    field: str
    column: str
    case_insensitive: bool = False


def erase_model(name: str, owners: Owners) -> type[BaseModel]:
    """The body of ``POST /<path>/erase``: ``references`` and the ``owners.field`` list."""
    return create_model(
        name,
        references=(list[Text], Field(default_factory=list, max_length=MAX_ERASE_REFERENCES)),
        **{owners.field: (list[Text], Field(default_factory=list, max_length=MAX_ERASE_OWNERS))},
    )


def reference_store(app: FastAPI, effects: Effects, path: str, table: sa.Table, id_column: str,
                    model_in: type[BaseModel], model_out: type[BaseModel], owners: Owners,
                    erase_body: type[BaseModel]) -> None:
    """Add the four routes of the module docstring to ``app`` for ``table`` (its primary key
    ``id_column`` autoincrements; its other columns are ``model_in``'s fields, ``reference``
    among them, and ``created_at``). ``model_out`` is ``model_in`` plus the id and
    ``created_at``; ``erase_body`` has ``references`` and ``owners.field``."""
    key = table.c[id_column]
    owner_column = table.c[owners.column]

    def create(record: model_in, request: Request) -> model_out:  # type: ignore[valid-type]
        """Record ``record`` (always a new one)."""

        def work(conn: Connection) -> Any:
            now = datetime.now(timezone.utc)
            new_id = conn.execute(table.insert().values(**record.model_dump(), created_at=now)
                                  .returning(key)).scalar_one()
            return model_out(**record.model_dump(), **{id_column: new_id}, created_at=now)

        return effects.run(request, work)

    def search(reference: Text) -> list[model_out]:  # type: ignore[valid-type]
        """Every record with this business reference, oldest first (empty: none)."""
        with effects.engine.connect() as conn:
            rows = conn.execute(sa.select(table).where(table.c.reference == reference).order_by(key)).all()
        return [model_out(**row._mapping) for row in rows]

    def references() -> list[str]:
        """Every business reference the service holds (the erasure of a conversation's records)."""
        with effects.engine.connect() as conn:
            return list(conn.execute(sa.select(table.c.reference).distinct()).scalars())

    def erase(body: erase_body) -> dict[str, int]:  # type: ignore[valid-type]
        """Delete the records ``body`` names (a customer's erasure); returns how many."""
        named = getattr(body, owners.field)
        owned = (sa.func.lower(owner_column).in_([o.lower() for o in named]) if owners.case_insensitive
                 else owner_column.in_(named))
        with effects.engine.begin() as conn:
            deleted = conn.execute(table.delete().where(sa.or_(table.c.reference.in_(body.references), owned)))
        return {"deleted": deleted.rowcount}

    app.post(f"/{path}", status_code=201, response_model=model_out)(create)
    app.get(f"/{path}", response_model=list[model_out])(search)
    app.get(f"/{path}/references", response_model=list[str])(references)
    app.post(f"/{path}/erase")(erase)
