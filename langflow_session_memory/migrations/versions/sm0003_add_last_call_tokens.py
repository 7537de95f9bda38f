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

from langflow_session_memory.migrations import nullable_columns

revision = "sm0003"
down_revision = "sm0002"
branch_labels = None
depends_on = None

COLUMNS = {"last_call_tokens": sa.Integer}


def upgrade() -> None:
    nullable_columns.add(COLUMNS)


def downgrade() -> None:
    nullable_columns.drop(COLUMNS)
