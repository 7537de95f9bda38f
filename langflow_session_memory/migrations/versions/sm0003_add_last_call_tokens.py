"""Add session_memory_state.last_call_tokens.

Phase: EXPAND
Revision ID: sm0003
Revises: sm0002
Create Date: 2026-11-30

last_call_tokens: what the provider reported (input plus output tokens) for the last single
model call of a turn that came near the context window, so that the early fold of the next
turn, on any worker, measures the prompt rather than the sum of a turn's tool-loop calls.
A nullable column only: code that does not know it keeps working. Idempotent: the column
is added only when missing.
"""

import sqlalchemy as sa
from alembic import op

revision = "sm0003"
down_revision = "sm0002"
branch_labels = None
depends_on = None

TABLE = "session_memory_state"
COLUMNS = {"last_call_tokens": sa.Integer}


def _existing_columns() -> set[str] | None:
    """Our columns on the table now; None when the table itself is missing."""
    inspector = sa.inspect(op.get_bind())
    if TABLE not in inspector.get_table_names():
        return None
    return {column["name"] for column in inspector.get_columns(TABLE)}


def upgrade() -> None:
    existing = _existing_columns()
    missing = [name for name in COLUMNS if existing is not None and name not in existing]
    if missing:
        with op.batch_alter_table(TABLE) as batch:
            for name in missing:
                batch.add_column(sa.Column(name, COLUMNS[name](), nullable=True))


def downgrade() -> None:
    existing = _existing_columns() or set()
    present = [name for name in COLUMNS if name in existing]
    if present:
        with op.batch_alter_table(TABLE) as batch:
            for name in present:
                batch.drop_column(name)
