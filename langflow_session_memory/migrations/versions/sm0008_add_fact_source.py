"""Add session_memory_search_entry.source_message_id.

Phase: EXPAND
Revision ID: sm0008
Revises: sm0007
Create Date: 2026-12-06

A fact line the notes' word limit takes is kept in the full-text index as an entry of its own,
beside the message it came from: this column names that message, so deleting the message deletes
the fact. NULL on a message's own entry. A nullable column only: code that does not know it keeps
working. Idempotent: the column is added only when missing.
"""

import sqlalchemy as sa

from langflow_session_memory.migrations import nullable_columns

revision = "sm0008"
down_revision = "sm0007"
branch_labels = None
depends_on = None

TABLE = "session_memory_search_entry"
COLUMNS = {"source_message_id": sa.Uuid}


def upgrade() -> None:
    nullable_columns.add(COLUMNS, TABLE)


def downgrade() -> None:
    nullable_columns.drop(COLUMNS, TABLE)
