"""Alembic environment of the journal's database: always run through
``activities.store.migrate`` on a connection it passes in (``config.attributes``)."""

from alembic import context

from activities.store.schema import owned_metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the journal's migrations with `statekeeper migrate` (activities.store.migrate)")
context.configure(connection=connection, target_metadata=owned_metadata(),
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
