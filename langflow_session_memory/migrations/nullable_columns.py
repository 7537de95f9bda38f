"""The one change our EXPAND revisions after the first make: nullable columns on session_memory_state.

Idempotent both ways (a column is added only when missing, dropped only when present), and
nothing happens when the table itself is missing: the runner replays every revision then.
"""

import sqlalchemy as sa
from alembic import op

TABLE = "session_memory_state"


def _existing_columns() -> set[str] | None:
    """The table's columns now; None when the table itself is missing."""
    inspector = sa.inspect(op.get_bind())
    if TABLE not in inspector.get_table_names():
        return None
    return {column["name"] for column in inspector.get_columns(TABLE)}


def add(columns: dict[str, type[sa.types.TypeEngine]]) -> None:
    existing = _existing_columns()
    missing = [name for name in columns if existing is not None and name not in existing]
    if missing:
        with op.batch_alter_table(TABLE) as batch:
            for name in missing:
                batch.add_column(sa.Column(name, columns[name](), nullable=True))


def drop(columns: dict[str, type[sa.types.TypeEngine]]) -> None:
    existing = _existing_columns() or set()
    present = [name for name in columns if name in existing]
    if present:
        with op.batch_alter_table(TABLE) as batch:
            for name in present:
                batch.drop_column(name)
