"""Keep ``session_memory_state`` and the full-text index's entries in step with Langflow's messages and flows.

A summary is a copy of what users said, so it must not outlive the original. Langflow has
no delete hooks; every deletion path it has (session and message deletes, flow and project
deletes, end-user and builder erasure) ends in a bulk ORM ``DELETE`` on ``message`` or
``flow``, and renames and edits are unit-of-work updates. Two global SQLAlchemy session
events see all of them and fix our rows in the same transaction:

- ``do_orm_execute``: a bulk delete of messages drops the rows whose folded range lost a
  message or whose session has no message left; a bulk delete of flows drops their rows.
- ``after_flush``: a renamed session moves its rows; an edited or deleted folded message
  drops its row's summary (the next turn folds the session again).

A change to a message after the cursor, while a fold holds the session's claim, bumps the
row's ``version`` instead: that fold, whose batch was read before the change, then loses
its compare-and-swap and is redone, so deleted or edited text never reaches a summary.
With no fold in flight the version stays (a fold that starts later reads the change, and
one between its read and its claim sees it under the claim), so a failed turn, whose
Agent deletes its partial answer, does not move it. An Agent answer being completed in
place (its stored state was ``partial``) is not an edit.

Every statement of ours runs in a SAVEPOINT inside Langflow's transaction: if it fails (our
table is missing, say) it is rolled back alone, logged once as
``session_memory_cleanup_failed``, and Langflow's own delete or update commits as it would
without this extension.

``sweep_orphans`` (run at start-up and hourly by the plugin) is the backstop for deletions
made behind Langflow's back, such as raw SQL.
"""

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from langflow.services.database.models.message.model import MessageTable
from lfx.log.logger import logger
from sqlalchemy import Connection, Uuid, and_, any_, delete, event, exists, func, inspect, literal, or_, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DatabaseError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BinaryExpression, BindParameter, ColumnElement

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS
from langflow_session_memory.services.session_memory.storage import search_index, store
from langflow_session_memory.services.session_memory.storage.model import SessionMemorySearchEntry, SessionMemoryState

STATE = SessionMemoryState.__table__
ENTRY = SessionMemorySearchEntry.__table__
MESSAGE = MessageTable.__table__


async def reset(
    session: AsyncSession, flow_id: UUID, *, owner_id: UUID | None, session_id: str, context_id: str | None
) -> int:
    """Delete the rows of one session (one context, or all of them): the next turn folds it again from its start. The
    facts the notes' word limit took go too (in a SAVEPOINT of their own: the index may be missing, logged)."""
    removed = await store.delete_rows(session, flow_id, owner_id=owner_id, session_id=session_id, context_id=context_id)
    try:
        async with session.begin_nested():
            await search_index.forget_dropped_facts(
                session, flow_id, owner_id=owner_id, session_id=session_id, context_id=context_id
            )
    except DatabaseError as error:
        await logger.aerror(f"{log_events.INDEX_FAILED} where=reset reason={describe(error)}")
    return removed


def install_cleanup_listeners() -> None:
    """Register the session events once per process; safe to call again."""
    if not event.contains(Session, "do_orm_execute", _on_orm_execute):
        event.listen(Session, "do_orm_execute", _on_orm_execute)
    if not event.contains(Session, "after_flush", _on_after_flush):
        event.listen(Session, "after_flush", _on_after_flush)


def _isolated(connection: Connection, action: str, work: Callable[[], None]) -> None:
    """Run our statements in a SAVEPOINT; on failure roll back only them, log, and let Langflow go on.

    Nothing is cached about the table, so a dropped and restored table works again at
    once, without a restart.
    """
    try:
        with connection.begin_nested():
            work()
    except Exception as error:  # noqa: BLE001 - ours must never fail Langflow's delete or update; logged, rolled back
        logger.error(f"{log_events.CLEANUP_FAILED} action={action} reason={describe(error)}")


def _on_orm_execute(state: ORMExecuteState):
    if not state.is_delete:
        return None
    table_name = getattr(state.statement.table, "name", None)
    if table_name not in {"message", "flow"}:
        return None
    connection = state.session.connection()
    if table_name == "message":
        return _delete_messages(state, connection)
    return _delete_flows(state, connection)


def _deleted_messages(where, dialect: str):
    """Langflow's WHERE clause, or on PostgreSQL its ``id IN (<thousands of ids>)`` as one array parameter.

    Every deletion path of Langflow deletes messages by a list of ids; re-sending that list
    as thousands of bound parameters is what this listener cost on PostgreSQL.
    """
    ids = where.right.value if _is_id_list(where) else None
    if dialect == "postgresql" and ids:
        return MESSAGE.c.id == any_(literal(list(ids), postgresql.ARRAY(Uuid())))
    return where


def _is_id_list(where) -> bool:
    return (
        isinstance(where, BinaryExpression)
        and where.operator is operators.in_op
        and isinstance(where.left, ColumnElement)
        and where.left.compare(MESSAGE.c.id)
        and isinstance(where.right, BindParameter)
        and isinstance(where.right.value, list | tuple)
        and all(isinstance(value, UUID) for value in where.right.value[:1])
    )


def _delete_messages(state: ORMExecuteState, connection: Connection):
    """Note the oldest deleted message of each chat, delete, then drop the summaries that held them."""
    where = state.statement.whereclause
    touched = select(MESSAGE.c.flow_id, MESSAGE.c.user_id, MESSAGE.c.session_id, func.min(MESSAGE.c.timestamp))
    if where is not None:
        touched = touched.where(_deleted_messages(where, connection.dialect.name))
    touched = touched.group_by(MESSAGE.c.flow_id, MESSAGE.c.user_id, MESSAGE.c.session_id)
    oldest_removed: dict[tuple, datetime] = {}

    def read_chats() -> None:
        rows = connection.execute(touched)
        oldest_removed.update({(f, u, s): ts for f, u, s, ts in rows if f is not None and u is not None})

    _isolated(connection, "read_deleted_messages", read_chats)

    def drop_entries() -> None:
        deleted = select(MESSAGE.c.id)
        if where is not None:
            deleted = deleted.where(_deleted_messages(where, connection.dialect.name))
        connection.execute(delete(ENTRY).where(search_index.of_messages(deleted)))

    _isolated(connection, "delete_indexed_messages", drop_entries)
    result = state.invoke_statement()
    if oldest_removed:
        _isolated(connection, "delete_messages", lambda: _follow_changes(connection, oldest_removed))
    return result


def _delete_flows(state: ORMExecuteState, connection: Connection):
    flow_table = state.statement.table
    where = state.statement.whereclause
    flow_ids = select(flow_table.c.id) if where is None else select(flow_table.c.id).where(where)
    ids: list[UUID] = []
    _isolated(connection, "read_deleted_flows", lambda: ids.extend(connection.execute(flow_ids).scalars()))
    result = state.invoke_statement()

    def drop_rows(table) -> None:
        for start in range(0, len(ids), BOUNDS.keys_per_statement):
            connection.execute(delete(table).where(table.c.flow_id.in_(ids[start : start + BOUNDS.keys_per_statement])))

    if ids:
        _isolated(connection, "delete_flows", lambda: drop_rows(STATE))
        _isolated(connection, "delete_indexed_flows", lambda: drop_rows(ENTRY))
    return result


def _chat(flow_id: UUID, owner_id: UUID, session_id: str):
    return and_(STATE.c.flow_id == flow_id, STATE.c.owner_id == owner_id, STATE.c.session_id == session_id)


def _follow_changes(connection: Connection, oldest_changed: dict[tuple, datetime]) -> None:
    """Keep rows in step with changed (deleted or edited) messages, given the oldest change per chat.

    A row whose folded range holds a changed message (at or before the cursor), or whose
    chat lost every message, is deleted. Any other row of the chat with a fold in flight
    (a claim not given back) gets a new version, so that fold, whose batch may hold the
    changed message, cannot commit.
    """
    chats = list(oldest_changed.items())
    for start in range(0, len(chats), BOUNDS.keys_per_statement):
        part = chats[start : start + BOUNDS.keys_per_statement]
        no_message_left = ~store.has_messages(STATE)
        covered = [
            and_(_chat(*chat), or_(STATE.c.cursor_timestamp >= oldest, no_message_left)) for chat, oldest in part
        ]
        connection.execute(delete(STATE).where(or_(*covered)))
        connection.execute(
            update(STATE)
            .where(or_(*(_chat(*chat) for chat, _ in part)), STATE.c.fold_claimed_until.is_not(None))
            .values(version=STATE.c.version + 1)
        )


def _on_after_flush(session: Session, _flush_context) -> None:
    """Renames, edits and single deletes of messages, seen once per flush rather than per row."""
    renamed: set[tuple] = set()
    oldest_changed: dict[tuple, datetime] = {}
    edited: dict[UUID, str] = {}
    removed: set[UUID] = set()
    for message in (*session.dirty, *session.deleted):
        if not isinstance(message, MessageTable) or message.flow_id is None or message.user_id is None:
            continue
        attributes = inspect(message).attrs
        old_session_id = attributes.session_id.history.deleted
        if old_session_id and old_session_id[0] != message.session_id:
            renamed.add((message.flow_id, message.user_id, old_session_id[0], message.session_id))
        if message in session.deleted:
            removed.add(message.id)
        elif _is_edit(attributes):
            edited[message.id] = message.text
        if message in session.deleted or _is_edit(attributes):
            chat = (message.flow_id, message.user_id, message.session_id)
            oldest_changed[chat] = min(message.timestamp, oldest_changed.get(chat, message.timestamp))
    if not renamed and not oldest_changed:
        return
    connection = session.connection()

    def follow() -> None:
        for flow_id, owner_id, old, new in renamed:
            _rename(connection, flow_id, owner_id, old, new)
        if oldest_changed:
            _follow_changes(connection, oldest_changed)

    _isolated(connection, "update_messages", follow)
    if renamed or edited or removed:
        _isolated(connection, "update_indexed_messages", lambda: _follow_in_index(connection, renamed, edited, removed))


def _is_edit(attributes) -> bool:
    """A changed text, unless the message was an answer still being written (stored state ``partial``)."""
    if not attributes.text.history.has_changes():
        return False
    properties = attributes.properties.history
    before = properties.deleted[0] if properties.deleted else attributes.properties.value
    return not (isinstance(before, dict) and before.get("state") == "partial")


def _follow_in_index(connection: Connection, renamed: set[tuple], edited: dict[UUID, str], removed: set[UUID]) -> None:
    """A renamed chat's entries move with it, an edited message is searched by its new text, a deleted one no
    longer, nor the facts kept from it (a no-op for one never indexed). Apart from the state rows' statements: either
    table may be missing."""
    for flow_id, owner_id, old, new in renamed:
        connection.execute(
            update(ENTRY)
            .where(ENTRY.c.flow_id == flow_id, ENTRY.c.owner_id == owner_id, ENTRY.c.session_id == old)
            .values(session_id=new, scope=search_index.scope_token(flow_id, owner_id, new))
        )
    if removed:
        connection.execute(delete(ENTRY).where(search_index.of_messages(list(removed))))
    for message_id, new_text in edited.items():
        sender_name = connection.execute(select(ENTRY.c.sender_name).where(ENTRY.c.message_id == message_id)).scalar()
        if sender_name is None:
            continue
        body = search_index.body_of(new_text)
        connection.execute(
            update(ENTRY)
            .where(ENTRY.c.message_id == message_id)
            .values(body=body, words=search_index.words_of(sender_name, body))
        )


def _rename(connection: Connection, flow_id: UUID, owner_id: UUID, old: str, new: str) -> None:
    """Move a chat's rows to its new session id; where the new id already has a row, that one stays."""
    target = STATE.alias("target")
    taken = exists().where(
        target.c.flow_id == STATE.c.flow_id,
        target.c.owner_id == STATE.c.owner_id,
        target.c.context_id == STATE.c.context_id,
        target.c.session_id == new,
    )
    connection.execute(delete(STATE).where(_chat(flow_id, owner_id, old), taken))
    connection.execute(update(STATE).where(_chat(flow_id, owner_id, old)).values(session_id=new))


async def sweep(sessions) -> int:
    """Delete every orphaned row and index entry, one bounded batch per transaction; returns how many went."""
    removed = 0
    for sweep_batch in (store.sweep_orphans, search_index.sweep_orphans):
        while True:
            async with sessions() as session:
                batch = await sweep_batch(session, BOUNDS.sweep_batch)
                await session.commit()
            removed += batch
            if batch < BOUNDS.sweep_batch:
                break
    return removed
