"""``statekeeper migrate``: bring statekeeper's own database (the journal's:
``Settings.journal_url``) to the newest schema with its Alembic migrations
(``activities.store.migrate``). The compose ``migrate`` job runs it before the worker and
the API start; ``statekeeper dev`` and every store opening the database run it too."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from activities.store.migrate import current_revision, head_revision, upgrade
from activities.store.tables import make_engine
from settings import Settings

console = Console(stderr=True)


def migrate_journal(settings: Settings) -> tuple[str | None, str]:
    """Migrate ``settings``' journal database to the newest revision; returns (revision
    before, revision after). Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database fails."""
    engine = make_engine(settings.resolved_journal_url())
    try:
        before = current_revision(engine)
        upgrade(engine)
        return before, current_revision(engine) or head_revision()
    finally:
        engine.dispose()


async def migrate_for_dev(settings: Settings) -> None:
    """``statekeeper dev``: migrate the journal database first; if it is unreachable, say so and
    go on (the journal is an audit record: the stores migrate on first use once it is back)."""
    import asyncio

    try:
        await asyncio.to_thread(migrate_journal, settings)
    except Exception as err:  # noqa: BLE001 - the database's error text may hold its URL
        from starter.runtime.problems import storage_problem

        problem = storage_problem(err) or "it failed"
        console.print(f"[yellow]statekeeper dev: the journal database is not migrated yet ({escape(problem)}); "
                      "it will be on first use[/]", highlight=False)


def migrate() -> None:
    """Migrate statekeeper's own database (journal, audit log, API keys) to the newest schema."""
    from starter.cli.support import interruptible
    from starter.cli.refusals import command_settings
    from starter.cli.refusals import storage_refusals

    with interruptible(130):
        settings = command_settings()
        # worded from the failure's kind (not its class name, nor its text, which may hold the URL)
        with storage_refusals(settings):
            before, after = migrate_journal(settings)
    if before == after:
        console.print(f"journal database already at revision {after}")
    else:
        console.print(f"journal database migrated from {before or 'empty'} to revision {after}")
