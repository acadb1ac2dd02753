"""The effect dispatch log's table, ``effect_dispatches``, in statekeeper's own database (under
its migrations, revision 0003): one row per effect key sent to an external system, with its
status and result, so an ambiguous send is reconciled before any retry
(``activities.reconcile.DispatchLog``)."""

import sqlalchemy as sa

_metadata = sa.MetaData()
dispatches = sa.Table(
    "effect_dispatches", _metadata,
    sa.Column("effect_key", sa.String(64), primary_key=True),  # SHA-256 hex of the key
    sa.Column("system", sa.String(50), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)
