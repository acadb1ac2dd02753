"""``PlanBook``: the stand-in model's own table of plans, keyed by conversation id.

A benchmark run registers each task's ground-truth plan here before the conversation
starts (``{"user": {...}, "actions": [...]}``, see ``scripted.py``); the server looks it
up by the request's ``metadata.user_id``. The table lives in whatever database the
engine points at; every process serving the model must use the same database, so that a
plan registered by one is seen by all (on SQLite use WAL and a busy timeout, as
statekeeper's engines do).
"""

from __future__ import annotations

import json
from typing import Any, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from systems.model.scripted import normalise_plan
from systems.model.wire import MAX_USER_ID_CHARS

metadata = sa.MetaData()
plans_table = sa.Table(
    "offline_model_plans",
    metadata,
    sa.Column("conversation_id", sa.String(MAX_USER_ID_CHARS), primary_key=True),
    sa.Column("plan", sa.Text, nullable=False),
)


class PlanBook:
    """Plans of the offline model, one per conversation id, in ``engine``'s database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create_schema(self) -> None:
        """Create the table if missing; safe when several processes do it at once."""
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.schema.CreateTable(plans_table, if_not_exists=True))
        except DBAPIError:
            # Two PostgreSQL sessions creating the table at once can still collide;
            # the loser finds the winner's table.
            if not sa.inspect(self.engine).has_table(plans_table.name):
                raise

    def put(self, conversation_id: str, plan: dict[str, Any]) -> None:
        """Register ``plan`` for ``conversation_id``, replacing any earlier one.

        Raises ``ValueError`` for an empty or over-long id or a plan of the wrong shape.
        """
        if not conversation_id or len(conversation_id) > MAX_USER_ID_CHARS:
            raise ValueError(f"conversation id must have 1 to {MAX_USER_ID_CHARS} characters")
        text = json.dumps(normalise_plan(plan), sort_keys=True)
        table = plans_table
        with self.engine.begin() as conn:
            updated = conn.execute(
                table.update().where(table.c.conversation_id == conversation_id).values(plan=text)
            ).rowcount
            if updated:
                return
        try:
            with self.engine.begin() as conn:
                conn.execute(table.insert().values(conversation_id=conversation_id, plan=text))
        except IntegrityError:  # registered concurrently in between: the newer plan wins
            with self.engine.begin() as conn:
                conn.execute(table.update().where(table.c.conversation_id == conversation_id).values(plan=text))

    def get(self, conversation_id: str) -> Optional[dict[str, Any]]:
        """The plan registered for ``conversation_id``, or None."""
        with self.engine.connect() as conn:
            text = conn.execute(
                sa.select(plans_table.c.plan).where(plans_table.c.conversation_id == conversation_id)
            ).scalar_one_or_none()
        return None if text is None else json.loads(text)

    def delete(self, conversation_id: str) -> bool:
        """Forget the plan of ``conversation_id``; True if there was one."""
        with self.engine.begin() as conn:
            return bool(
                conn.execute(plans_table.delete().where(plans_table.c.conversation_id == conversation_id)).rowcount
            )
