"""statekeeper's own database (SQLite or PostgreSQL through SQLAlchemy, migrated by Alembic):
the journal (decision log and transcript), the audit log, the API keys and the effect
dispatch log. Only activities and starters use it; workflows never do."""
