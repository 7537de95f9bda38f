"""Add session_memory_state.unreported_input_tokens and unreported_output_tokens.

Phase: EXPAND
Revision ID: sm0004
Revises: sm0003
Create Date: 2026-11-30

A fold that runs after an Agent's answer (in the background) has no turn to report its
tokens to; they are kept here until the session's next turn adds them to its usage and
clears them. Nullable columns only (NULL reads as 0): code that does not know them keeps
working. Idempotent: a column is added only when missing.
"""

import sqlalchemy as sa

from langflow_session_memory.migrations import nullable_columns

revision = "sm0004"
down_revision = "sm0003"
branch_labels = None
depends_on = None

COLUMNS = {"unreported_input_tokens": sa.Integer, "unreported_output_tokens": sa.Integer}


def upgrade() -> None:
    nullable_columns.add(COLUMNS)


def downgrade() -> None:
    nullable_columns.drop(COLUMNS)
