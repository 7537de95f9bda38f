"""Add session_memory_state.unreported_cached_input_tokens.

Phase: EXPAND
Revision ID: sm0005
Revises: sm0004
Create Date: 2026-12-01

Of a background fold's unreported input tokens (sm0004), the part the provider served from
its prompt cache, which it bills at a discount: reported with the session's next turn like
the rest. A nullable column only (NULL reads as 0): code that does not know it keeps working.
Idempotent: the column is added only when missing.
"""

import sqlalchemy as sa

from langflow_session_memory.migrations import nullable_columns

revision = "sm0005"
down_revision = "sm0004"
branch_labels = None
depends_on = None

COLUMNS = {"unreported_cached_input_tokens": sa.Integer}


def upgrade() -> None:
    nullable_columns.add(COLUMNS)


def downgrade() -> None:
    nullable_columns.drop(COLUMNS)
