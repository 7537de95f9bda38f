"""Bounded, indexed reads of Langflow's ``message`` table, scoped as the Agent scopes its history.

Scope = flow, owner, session, and context only when it is non-empty (Langflow's
``_get_variable_query``), error rows excluded. Order is ``(timestamp, id)``: Langflow sets
timestamps in Python, so they may tie or arrive out of order, and ``id`` breaks ties.
Every query walks ``ix_message_session_id_timestamp_id`` with a LIMIT; none loads a session.
"""

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory.services.session_memory.model import Cursor, SessionKey

_columns = MessageTable.__table__.c


def _scope(key: SessionKey):
    conditions = [
        _columns.session_id == key.session_id,
        _columns.flow_id == key.flow_id,
        _columns.user_id == key.owner_id,
        _columns.error.is_(False),
    ]
    if key.context_id:
        conditions.append(_columns.context_id == key.context_id)
    return and_(*conditions)


def _after(cursor: Cursor):
    """``(timestamp, id) > cursor``; the plain ``>=`` on timestamp lets SQLite seek the index range."""
    return and_(
        _columns.timestamp >= cursor.timestamp,
        or_(
            _columns.timestamp > cursor.timestamp,
            and_(_columns.timestamp == cursor.timestamp, _columns.id > cursor.message_id),
        ),
    )


def _before(cursor: Cursor):
    """``(timestamp, id) < cursor``, with the same sargable bound."""
    return and_(
        _columns.timestamp <= cursor.timestamp,
        or_(
            _columns.timestamp < cursor.timestamp,
            and_(_columns.timestamp == cursor.timestamp, _columns.id < cursor.message_id),
        ),
    )


def is_after(message: MessageTable, cursor: Cursor | None) -> bool:
    """Whether a loaded row lies after the fold cursor (the summary does not cover it)."""
    return cursor is None or (message.timestamp, message.id) > (cursor.timestamp, cursor.message_id)


def cursor_of(message: MessageTable) -> Cursor:
    return Cursor(timestamp=message.timestamp, message_id=message.id)


async def newest(session: AsyncSession, key: SessionKey, n_messages: int) -> list[MessageTable]:
    """The newest ``n_messages`` in ascending order: the Agent's window, current input included."""
    statement = (
        select(MessageTable)
        .where(_scope(key))
        .order_by(_columns.timestamp.desc(), _columns.id.desc())
        .limit(n_messages)
    )
    rows = (await session.execute(statement)).scalars().all()
    return list(reversed(rows))


async def gap(
    session: AsyncSession, key: SessionKey, *, after: Cursor | None, before: Cursor, limit: int
) -> list[MessageTable]:
    """Messages strictly after the fold cursor and strictly before the window, ascending, at most ``limit``."""
    conditions = [_scope(key), _before(before)]
    if after is not None:
        conditions.append(_after(after))
    statement = select(MessageTable).where(*conditions).order_by(_columns.timestamp, _columns.id).limit(limit)
    return list((await session.execute(statement)).scalars().all())


async def count_through(session: AsyncSession, key: SessionKey, cursor: Cursor) -> int:
    """How many messages sit at or before the cursor now; differs from ``folded_count`` when the range changed."""
    statement = select(func.count()).select_from(MessageTable.__table__).where(_scope(key), ~_after(cursor))
    return await session.scalar(statement)
