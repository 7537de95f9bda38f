"""Create session_memory_state: one summary per (flow, owner, session, context).

Phase: EXPAND
Revision ID: sm0001
Revises:
Create Date: 2026-11-30

A new table only; Langflow's own tables are not touched. No foreign key to flow.id:
shared playground runs use virtual flow ids, and SQLite does not enforce foreign keys.
Idempotent: every object is created only when it is missing.
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import UTCDateTime

revision = "sm0001"
down_revision = None
branch_labels = None
depends_on = None

TABLE = "session_memory_state"
INDEXES = {
    "ix_session_memory_state_session_id": ["session_id"],
    "ix_session_memory_state_owner_id": ["owner_id"],
}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if TABLE not in inspector.get_table_names():
        op.create_table(
            TABLE,
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("flow_id", sa.Uuid(), nullable=False),
            sa.Column("owner_id", sa.Uuid(), nullable=False),
            sa.Column("session_id", sa.Text(), nullable=False),
            sa.Column("context_id", sa.Text(), nullable=False, server_default=sa.text("''")),
            sa.Column("summary", sa.Text(), nullable=False, server_default=sa.text("''")),
            sa.Column("cursor_timestamp", UTCDateTime(), nullable=True),
            sa.Column("cursor_message_id", sa.Uuid(), nullable=True),
            sa.Column("folded_count", sa.Integer(), nullable=False, server_default=sa.text("0")),
            sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("0")),
            sa.Column("paused_until", UTCDateTime(), nullable=True),
            sa.Column("last_error", sa.Text(), nullable=True),
            sa.Column("created_at", UTCDateTime(), nullable=False),
            sa.Column("updated_at", UTCDateTime(), nullable=False),
            sa.UniqueConstraint("flow_id", "owner_id", "session_id", "context_id", name="uq_session_memory_state_key"),
        )
        inspector = sa.inspect(op.get_bind())
    existing = {index["name"] for index in inspector.get_indexes(TABLE)}
    for name, columns in INDEXES.items():
        if name not in existing:
            op.create_index(name, TABLE, columns)


def downgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if TABLE in inspector.get_table_names():
        op.drop_table(TABLE)
