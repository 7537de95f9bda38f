"""Add session_memory_state.fold_batch_limit.

Phase: EXPAND
Revision ID: sm0006
Revises: sm0005
Create Date: 2026-12-05

How many messages the session's next fold request may carry after a refused fold (an answer cut
at the output cap, a summary refused, a time-out): half the refused request's, so the attempt
after the pause is never the refused request again. NULL: the policy's batch size. A nullable
column only: code that does not know it keeps working. Idempotent: the column is added only
when missing.
"""

import sqlalchemy as sa

from langflow_session_memory.migrations import nullable_columns

revision = "sm0006"
down_revision = "sm0005"
branch_labels = None
depends_on = None

COLUMNS = {"fold_batch_limit": sa.Integer}


def upgrade() -> None:
    nullable_columns.add(COLUMNS)


def downgrade() -> None:
    nullable_columns.drop(COLUMNS)
