"""Bounded, indexed reads of Langflow's ``message`` table, scoped as the Agent scopes its history.

Scope = flow, owner, session, and context only when it is non-empty (Langflow's
``_get_variable_query``), error rows excluded. Order is ``(timestamp, id)``: Langflow sets
timestamps in Python, so they may tie or arrive out of order, and ``id`` breaks ties.
Every query seeks one of Langflow's ``(session_id | flow_id, timestamp, id)`` indexes with a
LIMIT or a cursor bound; none loads a session.
"""

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import Integer, Select, String, Uuid, and_, bindparam, func, literal, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel.sql.sqltypes import UTCDateTime

from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey, SessionState
from langflow_session_memory.services.session_memory.storage import store
from langflow_session_memory.services.session_memory.storage.model import SessionMemoryState


@dataclass(frozen=True)
class Candidate:
    """A stored message the database found: position, sender, and (the start of) its text."""

    message_id: object
    timestamp: datetime
    sender: str
    sender_name: str
    text: str


_columns = MessageTable.__table__.c
_state = SessionMemoryState.__table__
_BEFORE_ANY_MESSAGE = datetime(1, 1, 1, tzinfo=UTC)
# Escaped with a backslash in a PostgreSQL regex, where that makes any such character literal.
_NOT_A_WORD_CHARACTER = re.compile(r"\W")


def _scope(key: SessionKey):
    return _scope_of(key.flow_id, key.owner_id, key.session_id, key.context_id or None)


def _scope_of(flow_id, owner_id, session_id, context_id=None):
    """The Agent's history scope from values or bound parameters; ``context_id=None`` leaves context out."""
    conditions = [
        _columns.session_id == session_id,
        _columns.flow_id == flow_id,
        _columns.user_id == owner_id,
        _columns.error.is_(False),
    ]
    if context_id is not None:
        conditions.append(_columns.context_id == context_id)
    return and_(*conditions)


def _after(cursor: Cursor):
    return _after_position(cursor.timestamp, cursor.message_id)


def _after_position(timestamp, message_id):
    """``(timestamp, id) > (timestamp, message_id)``, written so both databases seek the index range.

    Given ``timestamp >= t``, "later, or tied with a larger id" is "later, or a larger id".
    """
    return and_(_columns.timestamp >= timestamp, or_(_columns.timestamp > timestamp, _columns.id > message_id))


def _before(cursor: Cursor):
    """``(timestamp, id) < cursor``, the mirror of :func:`_after_position`."""
    return and_(
        _columns.timestamp <= cursor.timestamp,
        or_(_columns.timestamp < cursor.timestamp, _columns.id < cursor.message_id),
    )


def cursor_of(message: MessageTable) -> Cursor:
    return Cursor(timestamp=message.timestamp, message_id=message.id)


@functools.cache
def _newest_unfolded_statement(scoped_by_context: bool) -> Select:
    """Built once per shape with bound parameters: a turn pays neither building nor cache-keying it."""
    context_id = bindparam("context_id", type_=String()) if scoped_by_context else None
    key = SessionKey(
        flow_id=bindparam("flow_id", type_=Uuid()),
        owner_id=bindparam("owner_id", type_=Uuid()),
        session_id=bindparam("session_id", type_=String()),
        context_id="" if context_id is None else context_id,
    )
    row_of_key = store.key_filter(key)
    cursor_timestamp = func.coalesce(
        select(_state.c.cursor_timestamp).where(row_of_key).correlate(None).scalar_subquery(),
        literal(_BEFORE_ANY_MESSAGE, UTCDateTime()),
    )
    cursor_message_id = select(_state.c.cursor_message_id).where(row_of_key).correlate(None).scalar_subquery()
    return (
        select(MessageTable, *store.STATE_COLUMNS)
        .outerjoin(_state, row_of_key)
        .where(
            _scope_of(key.flow_id, key.owner_id, key.session_id, context_id),
            _after_position(cursor_timestamp, cursor_message_id),
        )
        .order_by(_columns.timestamp.desc(), _columns.id.desc())
        .limit(bindparam("limit", type_=Integer()))
    )


async def newest_unfolded(
    session: AsyncSession, key: SessionKey, limit: int
) -> tuple[list[MessageTable], SessionState | None]:
    """The newest ``limit`` messages after the fold cursor (ascending) and the state row, in one statement.

    A turn without a fold needs nothing else, so it costs one round trip like the stock
    Agent's history query. The cursor comes from uncorrelated scalar subqueries (evaluated
    once, so both databases seek the index from it); the row itself comes through a LEFT
    JOIN on its unique key. With no message after the cursor the row is not returned:
    ``None`` then means "unknown", not "absent".
    """
    parameters = {
        "flow_id": key.flow_id,
        "owner_id": key.owner_id,
        "session_id": key.session_id,
        "context_id": key.context_id,
        "limit": limit,
    }
    rows = (await session.execute(_newest_unfolded_statement(bool(key.context_id)), parameters)).all()
    if not rows:
        return [], None
    newest_row = rows[0]
    state = store.to_state(key, newest_row) if newest_row.version is not None else SessionState(key=key)
    return [row[0] for row in reversed(rows)], state


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


async def newest(session: AsyncSession, key: SessionKey, limit: int) -> list[MessageTable]:
    """The newest ``limit`` messages whatever the cursor, ascending: the raw window as the stock Agent reads it.

    Needed only when the fold cursor lies inside the window (another Agent of the flow
    with a smaller N folded, or this one folded early), where :func:`newest_unfolded`
    stops at the cursor.
    """
    statement = (
        select(MessageTable).where(_scope(key)).order_by(_columns.timestamp.desc(), _columns.id.desc()).limit(limit)
    )
    return list(reversed((await session.execute(statement)).scalars().all()))


async def still_stored(session: AsyncSession, batch: Sequence[MessageTable]) -> bool:
    """Whether every message of ``batch`` is still stored with the text it was read with.

    On PostgreSQL the rows are share-locked, so a delete or an edit still in flight is
    waited for and then seen; SQLite serialises writers, which gives the same.
    """
    statement = select(_columns.id, _columns.text).where(_columns.id.in_([row.id for row in batch]))
    if session.bind.dialect.name == "postgresql":
        statement = statement.with_for_update(read=True)
    stored = dict((await session.execute(statement)).all())
    return all(row.id in stored and stored[row.id] == row.text for row in batch)


def _at_or_before_position(timestamp, message_id):
    """``(timestamp, id) <= (timestamp, message_id)``, the complement of :func:`_after_position`."""
    return and_(_columns.timestamp <= timestamp, or_(_columns.timestamp < timestamp, _columns.id <= message_id))


async def window_start(
    session: AsyncSession, key: SessionKey, n_messages: int, *, input_message_id: UUID | None
) -> Cursor | None:
    """The oldest of the newest ``n_messages`` (the raw window), None when the session holds no more.

    Counted from the turn's stored input, as the window was read: an answer stored while the
    turn runs (the Agent's partial message) does not move it. Without a stored input, from
    the newest message.
    """
    conditions = [_scope(key)]
    if input_message_id is not None:
        input_timestamp = select(_columns.timestamp).where(_columns.id == input_message_id).scalar_subquery()
        conditions.append(_at_or_before_position(input_timestamp, input_message_id))
    statement = (
        select(_columns.timestamp, _columns.id)
        .where(*conditions)
        .order_by(_columns.timestamp.desc(), _columns.id.desc())
        .offset(n_messages - 1)
        .limit(1)
    )
    row = (await session.execute(statement)).first()
    return None if row is None else Cursor(timestamp=row.timestamp, message_id=row.id)


def _holds_any(words: Sequence[str], dialect: str):
    """Text holding any of ``words``, any case: one case-insensitive regex on PostgreSQL, else ORed LIKEs.

    No index serves a substring match, so every message of the scanned range is tested; on
    PostgreSQL one ``~*`` per message took half the time of one ``ILIKE`` per word
    (``benchmarks.search``). SQLite has no regex operator; its ``lower()`` folds ASCII only.
    """
    if dialect == "postgresql":
        return _columns.text.regexp_match("|".join(_NOT_A_WORD_CHARACTER.sub(r"\\\g<0>", w) for w in words), flags="i")
    return or_(*(_columns.text.icontains(word, autoescape=True) for word in words))


async def older_than_window_matching(
    session: AsyncSession, key: SessionKey, *, before: Cursor, words: Sequence[str], limit: int, read_characters: int
) -> list[Candidate]:
    """The newest ``limit`` messages before the window holding any of ``words`` (any case), newest first.

    Wildcards in a word match literally. Only the first ``read_characters`` of each text are
    read, so a pasted log cannot make a search large.
    """
    statement = (
        select(*_candidate_columns(read_characters))
        .where(_scope(key), _before(before), _holds_any(words, session.bind.dialect.name))
        .order_by(_columns.timestamp.desc(), _columns.id.desc())
        .limit(limit)
    )
    return [_candidate(row) for row in await session.execute(statement)]


async def older_than(
    session: AsyncSession, key: SessionKey, *, before: Cursor, limit: int, read_characters: int
) -> list[Candidate]:
    """The newest ``limit`` messages with text before ``before``, newest first; only the first ``read_characters``
    of each text are read (the pool an embedding model ranks, ``rules.meaning``)."""
    statement = (
        select(*_candidate_columns(read_characters))
        .where(_scope(key), _before(before), _columns.text != "")
        .order_by(_columns.timestamp.desc(), _columns.id.desc())
        .limit(limit)
    )
    return [_candidate(row) for row in await session.execute(statement)]


def _at_word_start(word: str, dialect: str):
    """Text holding ``word`` where a word starts, any case (``\\m`` on PostgreSQL; on SQLite at the text's
    start, or after a space or a line break), so that a short word ("car") is not found inside others
    ("scarf") and the newest matches are the word's own."""
    if dialect == "postgresql":
        return _columns.text.regexp_match(r"\m" + _NOT_A_WORD_CHARACTER.sub(r"\\\g<0>", word), flags="i")
    return or_(
        _columns.text.istartswith(word, autoescape=True),
        _columns.text.icontains(f" {word}", autoescape=True),
        _columns.text.icontains(f"\n{word}", autoescape=True),
    )


async def older_matching_each(
    session: AsyncSession, key: SessionKey, *, before: Cursor, words: Sequence[str], limit: int, read_characters: int
) -> dict[str, list[Candidate]]:
    """For each of ``words``, the newest ``limit`` messages before ``before`` holding it at a word start.

    One statement (a UNION ALL of one bounded keyset scan per word): a rare word's old messages are
    found however many newer ones hold a common word, and how many each word found tells how rare it
    is. Only the first ``read_characters`` of each text are read.
    """
    dialect = session.bind.dialect.name
    per_word = [
        select(
            literal(index).label("word"),
            _columns.id,
            _columns.timestamp,
            _columns.sender,
            _columns.sender_name,
            func.substr(_columns.text, 1, read_characters).label("text"),
        )
        .where(_scope(key), _before(before), _at_word_start(word, dialect))
        .order_by(_columns.timestamp.desc(), _columns.id.desc())
        .limit(limit)
        .subquery()
        for index, word in enumerate(words)
    ]
    found: dict[str, list[Candidate]] = {word: [] for word in words}
    if not per_word:
        return found
    statement = union_all(*(select(*subquery.c) for subquery in per_word))
    for row in await session.execute(statement):
        found[words[row.word]].append(_candidate(row))
    return found


def _candidate_columns(read_characters: int) -> tuple:
    """What a :class:`Candidate` is read from: its position, sender and the first ``read_characters`` of its text."""
    return (
        _columns.id,
        _columns.timestamp,
        _columns.sender,
        _columns.sender_name,
        func.substr(_columns.text, 1, read_characters).label("text"),
    )


def _candidate(row) -> Candidate:
    return Candidate(
        message_id=row.id, timestamp=row.timestamp, sender=row.sender, sender_name=row.sender_name, text=row.text or ""
    )


async def around(
    session: AsyncSession, key: SessionKey, positions: Sequence[Cursor], *, read_characters: int
) -> dict[Cursor, tuple[Candidate | None, Candidate | None]]:
    """For each position, the message just before it and the one just after it in the chat (None at an end).

    One statement: two one-row keyset seeks per position, so quoting a found message with its neighbours
    costs a round trip whatever the chat's size. Only the first ``read_characters`` of each text are read.
    """
    neighbours: dict[Cursor, list[Candidate | None]] = {position: [None, None] for position in positions}
    seeks = []
    for index, position in enumerate(positions):
        for side, (condition, order) in enumerate(
            (
                (_before(position), (_columns.timestamp.desc(), _columns.id.desc())),
                (_after(position), (_columns.timestamp, _columns.id)),
            )
        ):
            labels = (literal(index).label("position"), literal(side).label("side"))
            seek = (
                select(*labels, *_candidate_columns(read_characters))
                .where(_scope(key), condition)
                .order_by(*order)
                .limit(1)
                .subquery()
            )
            seeks.append(select(*seek.c))
    if seeks:
        for row in await session.execute(union_all(*seeks)):
            neighbours[positions[row.position]][row.side] = _candidate(row)
    return {position: (before, after) for position, (before, after) in neighbours.items()}


@dataclass(frozen=True)
class ToIndex:
    """A stored message as the full-text index copies it: its key, position, speaker and (the start of) its text."""

    message_id: UUID
    flow_id: UUID
    owner_id: UUID
    session_id: str
    context_id: str | None
    timestamp: datetime
    sender: str
    sender_name: str
    text: str


async def between(
    session: AsyncSession,
    key: SessionKey,
    *,
    after: Cursor | None,
    before: Cursor | None,
    limit: int,
    read_characters: int,
) -> list[ToIndex]:
    """The chat's messages strictly between ``after`` and ``before`` (None: from its first, to its newest), ascending,
    at most ``limit``, the first ``read_characters`` of each text: a pasted log is never read whole."""
    conditions = [_scope(key)]
    if after is not None:
        conditions.append(_after(after))
    if before is not None:
        conditions.append(_before(before))
    statement = (
        select(
            _columns.id,
            _columns.flow_id,
            _columns.user_id,
            _columns.session_id,
            _columns.context_id,
            _columns.timestamp,
            _columns.sender,
            _columns.sender_name,
            func.substr(_columns.text, 1, read_characters).label("text"),
        )
        .where(*conditions)
        .order_by(_columns.timestamp, _columns.id)
        .limit(limit)
    )
    return [
        ToIndex(
            message_id=row.id,
            flow_id=row.flow_id,
            owner_id=row.user_id,
            session_id=row.session_id,
            context_id=row.context_id,
            timestamp=row.timestamp,
            sender=row.sender or "",
            sender_name=row.sender_name or "",
            text=row.text or "",
        )
        for row in await session.execute(statement)
    ]
