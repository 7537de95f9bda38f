"""Create the full-text index of older messages: session_memory_search_entry and its engine's index.

Phase: EXPAND
Revision ID: sm0007
Revises: sm0006
Create Date: 2026-12-06

One row per indexed message (its key, position, speaker and text), in a table of ours; Langflow's
own tables are not touched. The database's own full-text engine indexes it:

- SQLite: an FTS5 table over it (external content, the porter stemmer over unicode61), kept in step
  by triggers on our table, so every insert, update and delete of an entry updates the index;
- PostgreSQL: a stored ``tsvector`` column ``document`` (``to_tsvector('english', sender_name || ' ' || body)``),
  a GIN index on it, and extended statistics on the chat's columns.

Idempotent: every object is created only when it is missing.
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import UTCDateTime

revision = "sm0007"
down_revision = "sm0006"
branch_labels = None
depends_on = None

TABLE = "session_memory_search_entry"
FTS_TABLE = "session_memory_search_fts"
INDEXES = {
    "ix_session_memory_search_entry_chat": ["flow_id", "session_id", "timestamp", "message_id"],
}
SQLITE_OBJECTS = (
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(
        scope, sender_name, body, content='{TABLE}', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_insert AFTER INSERT ON {TABLE} BEGIN
        INSERT INTO {FTS_TABLE}(rowid, scope, sender_name, body) VALUES (new.id, new.scope, new.sender_name, new.body);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_delete AFTER DELETE ON {TABLE} BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, scope, sender_name, body)
            VALUES ('delete', old.id, old.scope, old.sender_name, old.body);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_update AFTER UPDATE ON {TABLE} BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, scope, sender_name, body)
            VALUES ('delete', old.id, old.scope, old.sender_name, old.body);
        INSERT INTO {FTS_TABLE}(rowid, scope, sender_name, body) VALUES (new.id, new.scope, new.sender_name, new.body);
    END""",
)
# PostgreSQL: each entry's ``tsvector`` stored (a filter re-parsing the text of 100,000 entries took 1.3-1.7 s, the
# stored one 18 ms; docs/benchmarks.md), the speaker's name searched with the text ("What did Caroline paint?"), a
# GIN index on it, and statistics that tell the planner a chat's flow, owner and session go together (without them
# it guessed 1,875 entries for a chat of 100,000 and read the whole chat for a common word).
POSTGRES_OBJECTS = (
    f"""ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS document tsvector
        GENERATED ALWAYS AS (to_tsvector('english'::regconfig, sender_name || ' ' || body)) STORED""",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_body ON {TABLE} USING gin (document)",
    f"CREATE STATISTICS IF NOT EXISTS {TABLE}_chat (dependencies, mcv) ON flow_id, owner_id, session_id FROM {TABLE}",
)


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    if TABLE not in inspector.get_table_names():
        op.create_table(
            TABLE,
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("message_id", sa.Uuid(), nullable=False),
            sa.Column("flow_id", sa.Uuid(), nullable=False),
            sa.Column("owner_id", sa.Uuid(), nullable=False),
            sa.Column("session_id", sa.Text(), nullable=False),
            sa.Column("context_id", sa.Text(), nullable=True),
            sa.Column("timestamp", UTCDateTime(), nullable=False),
            sa.Column("sender", sa.Text(), nullable=False, server_default=sa.text("''")),
            sa.Column("sender_name", sa.Text(), nullable=False, server_default=sa.text("''")),
            sa.Column("scope", sa.Text(), nullable=False),
            sa.Column("body", sa.Text(), nullable=False, server_default=sa.text("''")),
            sa.Column("words", sa.Integer(), nullable=False, server_default=sa.text("0")),
            sa.UniqueConstraint("message_id", name="uq_session_memory_search_entry_message_id"),
        )
        inspector = sa.inspect(bind)
    existing = {index["name"] for index in inspector.get_indexes(TABLE)}
    for name, columns in INDEXES.items():
        if name not in existing:
            op.create_index(name, TABLE, columns)
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_OBJECTS:
            op.execute(statement)
        # Replayed after the entries' table was dropped, the FTS5 index would still hold the old rows' words.
        op.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
    elif bind.dialect.name == "postgresql":
        for statement in POSTGRES_OBJECTS:
            op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")
    if TABLE in sa.inspect(bind).get_table_names():
        op.drop_table(TABLE)
