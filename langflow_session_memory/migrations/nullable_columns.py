"""The one change our EXPAND revisions after a table's first make: nullable columns on one of our tables.

Idempotent both ways (a column is added only when missing, dropped only when present), and
nothing happens when the table itself is missing: the runner replays every revision then.
"""

import sqlalchemy as sa
from alembic import op

TABLE = "session_memory_state"


def _existing_columns(table: str) -> set[str] | None:
    """The table's columns now; None when the table itself is missing."""
    inspector = sa.inspect(op.get_bind())
    if table not in inspector.get_table_names():
        return None
    return {column["name"] for column in inspector.get_columns(table)}


def add(columns: dict[str, type[sa.types.TypeEngine]], table: str = TABLE) -> None:
    existing = _existing_columns(table)
    missing = [name for name in columns if existing is not None and name not in existing]
    for name in missing:
        op.add_column(table, sa.Column(name, columns[name](), nullable=True))


def drop(columns: dict[str, type[sa.types.TypeEngine]], table: str = TABLE) -> None:
    """Drop the columns present. SQLite's own ``ALTER TABLE ... DROP COLUMN`` (3.35+): no copy of the table, so its
    triggers (the full-text index's) and its rows' ids stay."""
    existing = _existing_columns(table) or set()
    for name in (name for name in columns if name in existing):
        op.drop_column(table, name)
