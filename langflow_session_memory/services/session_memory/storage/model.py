"""The ``session_memory_state`` table (the values read from it, :class:`rules.state.SessionState`, travel apart).

The table lives in its own SQLModel registry: Langflow's startup schema check compares
``SQLModel.metadata`` with the database and refuses to start on any table it does not
expect, so our table must never be registered there.
"""

from datetime import UTC, datetime
from uuid import UUID

from sqlalchemy import Column, Index, Integer, Text, UniqueConstraint, Uuid, text
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import UTCDateTime

from langflow_session_memory.services.session_memory.rules.state import TABLE_NAME

session_memory_registry = registry()
session_memory_metadata = session_memory_registry.metadata


def utc_now() -> datetime:
    return datetime.now(UTC)


class SessionMemoryBase(SQLModel, registry=session_memory_registry):
    """Base for tables owned by this extension (kept out of ``SQLModel.metadata``)."""


class SessionMemoryState(SessionMemoryBase, table=True):
    """One summary per chat history, keyed exactly as Langflow scopes the Agent's history.

    ``context_id`` is ``""`` when the Agent has none: a NULL in a unique key never
    collides, so two workers could insert the same key twice.
    """

    __tablename__ = TABLE_NAME
    # The unique key also serves lookups by flow_id (its leading column).
    __table_args__ = (
        UniqueConstraint("flow_id", "owner_id", "session_id", "context_id", name="uq_session_memory_state_key"),
        Index("ix_session_memory_state_session_id", "session_id"),
        Index("ix_session_memory_state_owner_id", "owner_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    flow_id: UUID = Field(sa_column=Column(Uuid, nullable=False))
    owner_id: UUID = Field(sa_column=Column(Uuid, nullable=False))
    session_id: str = Field(sa_column=Column(Text, nullable=False))
    context_id: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=text("''")))
    summary: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=text("''")))
    cursor_timestamp: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    cursor_message_id: UUID | None = Field(default=None, sa_column=Column(Uuid, nullable=True))
    folded_count: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    version: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    paused_until: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    fold_claimed_until: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    last_call_tokens: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    unreported_input_tokens: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    unreported_output_tokens: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    unreported_cached_input_tokens: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    fold_batch_limit: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    created_at: datetime = Field(default_factory=utc_now, sa_column=Column(UTCDateTime(), nullable=False))
    updated_at: datetime = Field(default_factory=utc_now, sa_column=Column(UTCDateTime(), nullable=False))


SEARCH_TABLE_NAME = "session_memory_search_entry"
# Made by migration sm0007 for one database's engine, so not declared here: PostgreSQL's stored ``tsvector`` column
# of the entries and its GIN index (SQLite's FTS5 table and its triggers are not tables of this registry either).
ENGINE_INDEXES = frozenset({"ix_session_memory_search_entry_body"})
ENGINE_COLUMNS = frozenset({"document"})


class SessionMemorySearchEntry(SessionMemoryBase, table=True):
    """One older message as the full-text index holds it: its chat, position and speaker, and the text searched.

    The database's engine indexes ``body`` (SQLite: the FTS5 table ``session_memory_search_fts`` over this one,
    kept by triggers; PostgreSQL: a GIN index on its ``tsvector``, migration ``sm0007``). ``scope`` is one
    digits-only token naming the chat (:func:`storage.search_index.scope_token`), so an FTS5 query narrows to
    one chat inside the engine; ``words`` is the body's length in words, for BM25's length normalisation. A fact
    the notes dropped is an entry too, said by ``ranking.NOTES_SENDER``, beside its ``source_message_id``.
    """

    __tablename__ = SEARCH_TABLE_NAME
    __table_args__ = (
        UniqueConstraint("message_id", name="uq_session_memory_search_entry_message_id"),
        Index("ix_session_memory_search_entry_chat", "flow_id", "session_id", "timestamp", "message_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    message_id: UUID = Field(sa_column=Column(Uuid, nullable=False))
    flow_id: UUID = Field(sa_column=Column(Uuid, nullable=False))
    owner_id: UUID = Field(sa_column=Column(Uuid, nullable=False))
    session_id: str = Field(sa_column=Column(Text, nullable=False))
    context_id: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    timestamp: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    sender: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=text("''")))
    sender_name: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=text("''")))
    scope: str = Field(sa_column=Column(Text, nullable=False))
    body: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=text("''")))
    words: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    # Set on a fact line the notes' word limit took (sender ``ranking.NOTES_SENDER``): the message it came from,
    # whose deletion takes it (sm0008). NULL on a message's entry, and on a fact whose source was not found.
    source_message_id: UUID | None = Field(default=None, sa_column=Column(Uuid, nullable=True))
