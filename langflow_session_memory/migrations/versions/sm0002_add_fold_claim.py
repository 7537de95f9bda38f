"""Add session_memory_state.fold_claimed_until: one worker folds a session's batch at a time.

Phase: EXPAND
Revision ID: sm0002
Revises: sm0001
Create Date: 2026-11-30

A nullable column only: code that does not know it keeps working (it never claims), and
a row without a claim reads as unclaimed. Idempotent: the column is added only when
missing.
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import UTCDateTime

revision = "sm0002"
down_revision = "sm0001"
branch_labels = None
depends_on = None

TABLE = "session_memory_state"
COLUMN = "fold_claimed_until"


def _has_column() -> bool:
    inspector = sa.inspect(op.get_bind())
    return TABLE in inspector.get_table_names() and COLUMN in {c["name"] for c in inspector.get_columns(TABLE)}


def upgrade() -> None:
    if not _has_column():
        with op.batch_alter_table(TABLE) as batch:
            batch.add_column(sa.Column(COLUMN, UTCDateTime(), nullable=True))


def downgrade() -> None:
    if _has_column():
        with op.batch_alter_table(TABLE) as batch:
            batch.drop_column(COLUMN)
