"""The full-text index of a chat's older messages: filling it, and what each word matches in it.

``session_memory_search_entry`` (:class:`model.SessionMemorySearchEntry`) holds a copy of each indexed
message's key, position, speaker and text; the database's own engine indexes it (migration ``sm0007``):
SQLite's FTS5 with the porter stemmer, PostgreSQL's ``tsvector`` with the ``english`` configuration
and a GIN index. The engine matches a word stemmed ("painting" finds "paint") and narrows to one chat
inside the index; the ranking over what it matched is ``rules.ranking``'s, the same on both databases.

The index is filled after an answer, in bounded batches (:func:`index_batch`), never inside a turn; a
turn asks :func:`is_ready` first and, behind or missing, searches the way it did before the index.
``storage.cleanup`` keeps it in step with every edit and deletion, as it does the summaries.

A fact the notes' word limit pushes out (``summary.notes``) is kept here too (:func:`keep_dropped_facts`), as said
by :data:`ranking.NOTES_SENDER` beside the message it came from, and found as a message is: nothing the notes ever
held is lost.
"""

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import (
    Integer,
    and_,
    column,
    delete,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory.services.session_memory.rules import ranking
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.ranking import NOTES_SENDER, word_count
from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey
from langflow_session_memory.services.session_memory.storage import messages
from langflow_session_memory.services.session_memory.storage.model import SessionMemorySearchEntry

ENTRY = SessionMemorySearchEntry.__table__
FTS_TABLE = "session_memory_search_fts"
_fts = table(FTS_TABLE, column("rowid", Integer), column(FTS_TABLE))
# PostgreSQL's stored ``tsvector`` of an entry (speaker's name and body), GIN-indexed: a generated column of sm0007
# that only PostgreSQL has, so the model does not declare it.
POSTGRES_DOCUMENT = f"{ENTRY.name}.document"


def scope_token(flow_id, owner_id, session_id) -> str:
    """One token naming a chat (flow, owner, session) in the FTS5 index: digits only, which no stemmer changes."""
    digest = hashlib.sha256(f"{flow_id}\x1f{owner_id}\x1f{session_id}".encode()).digest()
    return str(int.from_bytes(digest[:8], "big"))


def body_of(text: str | None) -> str:
    return (text or "")[: RETRIEVAL.indexed_characters]


def words_of(sender_name: str, body: str) -> int:
    """The length in words of what is searched: the speaker's name and the body."""
    return word_count(f"{sender_name} {body}")


@dataclass(frozen=True)
class Indexed:
    """An indexed message a word matched: its position, speaker, (the start of) its text and its length in words."""

    message_id: object
    timestamp: datetime
    sender: str
    sender_name: str
    text: str
    words: int

    @property
    def cursor(self) -> Cursor:
        return Cursor(timestamp=self.timestamp, message_id=self.message_id)


def _chat(key: SessionKey):
    """The entries of the Agent's history scope: its chat, and its context only when it has one."""
    conditions = [
        ENTRY.c.flow_id == key.flow_id,
        ENTRY.c.owner_id == key.owner_id,
        ENTRY.c.session_id == key.session_id,
    ]
    if key.context_id:
        conditions.append(ENTRY.c.context_id == key.context_id)
    return and_(*conditions)


def _before(cursor: Cursor):
    """``(timestamp, message_id) < cursor`` on entries, as ``messages`` writes it on Langflow's rows."""
    return and_(
        ENTRY.c.timestamp <= cursor.timestamp,
        or_(ENTRY.c.timestamp < cursor.timestamp, ENTRY.c.message_id < cursor.message_id),
    )


async def newest_indexed(session: AsyncSession, key: SessionKey) -> Cursor | None:
    """The position of the chat's newest indexed message (one seek of the entries' chat index), None if none."""
    statement = (
        select(ENTRY.c.timestamp, ENTRY.c.message_id)
        .where(_chat(key), ENTRY.c.sender != NOTES_SENDER)
        .order_by(ENTRY.c.timestamp.desc(), ENTRY.c.message_id.desc())
        .limit(1)
    )
    row = (await session.execute(statement)).first()
    return None if row is None else Cursor(timestamp=row.timestamp, message_id=row.message_id)


async def is_ready(session: AsyncSession, key: SessionKey, *, before: Cursor) -> bool:
    """Whether every message of the chat before ``before`` (the window's oldest) is indexed: no stored message
    lies between the newest indexed one and ``before``. Two seeks, whatever the chat's size."""
    newest = await newest_indexed(session, key)
    return not await messages.between(session, key, after=newest, before=before, limit=1, read_characters=0)


async def index_batch(
    session: AsyncSession, key: SessionKey, *, before: Cursor | None, limit: int = RETRIEVAL.index_batch
) -> int:
    """Index the next ``limit`` messages of the chat after its newest indexed one and before ``before`` (None: up
    to the newest stored); how many were read. A message indexed meanwhile by another worker is kept as it is."""
    after = await newest_indexed(session, key)
    rows = await messages.between(
        session, key, after=after, before=before, limit=limit, read_characters=RETRIEVAL.indexed_characters
    )
    if not rows:
        return 0
    scope = scope_token(key.flow_id, key.owner_id, key.session_id)
    values = [
        {
            "message_id": row.message_id,
            "flow_id": row.flow_id,
            "owner_id": row.owner_id,
            "session_id": row.session_id,
            "context_id": row.context_id,
            "timestamp": row.timestamp,
            "sender": row.sender,
            "sender_name": row.sender_name,
            "scope": scope,
            "body": row.text,
            "words": words_of(row.sender_name, row.text),
        }
        for row in rows
    ]
    dialect = postgresql if session.bind.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(ENTRY).values(values).on_conflict_do_nothing(index_elements=["message_id"])
    await session.execute(statement)
    return len(rows)


def _phrase(word: str) -> str:
    """``word`` as an FTS5 string, which the table's tokenizer splits and stems as it did the text."""
    return '"' + word.replace('"', '""') + '"'


def _matching(word: str, index: int, key: SessionKey, before: Cursor, limit: int, read_characters: int, dialect: str):
    """The newest ``limit`` entries of the chat before ``before`` that the engine matches ``word`` in."""
    columns = (
        literal(index).label("word"),
        ENTRY.c.message_id,
        ENTRY.c.timestamp,
        ENTRY.c.sender,
        ENTRY.c.sender_name,
        func.substr(ENTRY.c.body, 1, read_characters).label("text"),
        ENTRY.c.words,
    )
    conditions = [_chat(key), _before(before)]
    if dialect == "postgresql":
        query = func.phraseto_tsquery(literal_column("'english'::regconfig"), word)
        statement = select(*columns).where(*conditions, literal_column(POSTGRES_DOCUMENT).op("@@")(query))
        statement = statement.order_by(ENTRY.c.timestamp.desc(), ENTRY.c.message_id.desc())
    else:
        scope = scope_token(key.flow_id, key.owner_id, key.session_id)
        query = f"scope : {_phrase(scope)} AND {{sender_name body}} : {_phrase(word)}"
        match = literal_column(FTS_TABLE).op("MATCH")(query)
        statement = select(*columns).join_from(_fts, ENTRY, ENTRY.c.id == _fts.c.rowid).where(match, *conditions)
        statement = statement.order_by(_fts.c.rowid.desc())
    return statement.limit(limit).subquery()


async def matching_each(
    session: AsyncSession, key: SessionKey, *, before: Cursor, words: Sequence[str], limit: int, read_characters: int
) -> dict[str, list[Indexed]]:
    """For each of ``words``, the newest ``limit`` indexed messages before ``before`` the engine matches it in.

    One statement (a UNION ALL of one bounded search per word): how many each word found tells how rare
    it is in the chat, and a rare word's old messages are found however many newer ones hold a common one.
    """
    found: dict[str, list[Indexed]] = {word: [] for word in words}
    if not words:
        return found
    dialect = session.bind.dialect.name
    per_word = [
        _matching(word, index, key, before, limit, read_characters, dialect) for index, word in enumerate(words)
    ]
    statement = union_all(*(select(*subquery.c) for subquery in per_word))
    for row in await session.execute(statement):
        found[words[row.word]].append(
            Indexed(
                message_id=row.message_id,
                timestamp=row.timestamp,
                sender=row.sender,
                sender_name=row.sender_name,
                text=row.text or "",
                words=row.words,
            )
        )
    return found


async def chat_size(session: AsyncSession, key: SessionKey, *, before: Cursor, limit: int) -> tuple[int, float]:
    """How many indexed messages of the chat lie before ``before`` (at most ``limit``, the newest) and their mean
    length in words: BM25's document count and average length."""
    newest = (
        select(ENTRY.c.words)
        .where(_chat(key), _before(before))
        .order_by(ENTRY.c.timestamp.desc(), ENTRY.c.message_id.desc())
        .limit(limit)
        .subquery()
    )
    count, average = (await session.execute(select(func.count(), func.avg(newest.c.words)))).one()
    return count, float(average or 0.0)


async def keep_dropped_facts(session: AsyncSession, key: SessionKey, facts: Sequence[str], *, before: Cursor) -> int:
    """Index ``facts``, lines the notes' word limit took, each beside the message it came from: the indexed message
    before ``before`` (the first message of the fold that dropped them) that ranks best for the fact's words, whose
    deletion takes the fact with it. A fact no message matches stands at ``before``, its source unknown. A fact kept
    already is kept once. Returns how many found their source."""
    scope = scope_token(key.flow_id, key.owner_id, key.session_id)
    indexed, average_words = await chat_size(session, key, before=before, limit=RETRIEVAL.indexed_counted)
    values, sourced = [], 0
    for fact in facts:
        source = await _source_of(session, key, fact, before=before, chat=(indexed, average_words))
        sourced += source is not None
        values.append(
            {
                "message_id": uuid.uuid5(uuid.NAMESPACE_OID, f"{scope}\x1f{key.context_id or ''}\x1f{fact}"),
                "flow_id": key.flow_id,
                "owner_id": key.owner_id,
                "session_id": key.session_id,
                "context_id": key.context_id or None,  # as a message without a context is indexed
                "timestamp": before.timestamp if source is None else source.timestamp,
                "sender": NOTES_SENDER,
                "sender_name": "",
                "scope": scope,
                "body": body_of(fact),
                "words": words_of("", fact),
                "source_message_id": None if source is None else source.message_id,
            }
        )
    if values:
        dialect = postgresql if session.bind.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(ENTRY).values(values).on_conflict_do_nothing(index_elements=["message_id"])
        await session.execute(statement)
    return sourced


async def _source_of(
    session: AsyncSession, key: SessionKey, fact: str, *, before: Cursor, chat: tuple[int, float]
) -> Indexed | None:
    """The indexed message before ``before`` that ranks best for ``fact``'s words (a kept fact is not a source);
    ``chat``: the messages before ``before`` as BM25 counts them (:func:`chat_size`)."""
    found = await matching_each(
        session,
        key,
        before=before,
        words=ranking.query_words(fact),
        limit=RETRIEVAL.indexed_per_word,
        read_characters=0,
    )
    hits = ranking.rank(found, messages=chat[0], average_words=chat[1])
    return next((hit.found for hit in hits if hit.found.sender != NOTES_SENDER), None)


async def forget_dropped_facts(
    session: AsyncSession, flow_id, *, owner_id, session_id: str, context_id: str | None
) -> int:
    """Delete the facts kept for a chat (one context, "" the Agent without one, None all of them; every owner when
    ``owner_id`` is None): a reset forgets the notes, and what they lost with them."""
    conditions = [ENTRY.c.flow_id == flow_id, ENTRY.c.session_id == session_id, ENTRY.c.sender == NOTES_SENDER]
    if owner_id is not None:
        conditions.append(ENTRY.c.owner_id == owner_id)
    if context_id is not None:
        conditions.append(ENTRY.c.context_id == context_id if context_id else ENTRY.c.context_id.is_(None))
    return (await session.execute(delete(ENTRY).where(*conditions))).rowcount


def of_messages(message_ids):
    """The entries of these messages, and the facts kept from them (``message_ids``: a list or a subquery)."""
    return or_(ENTRY.c.message_id.in_(message_ids), ENTRY.c.source_message_id.in_(message_ids))


async def sweep_orphans(session: AsyncSession, limit: int) -> int:
    """Delete up to ``limit`` entries whose message is gone (deleted behind Langflow's back: raw SQL, a restore), and
    the facts kept from such a message; a fact whose source was never known stays with its chat."""
    message = MessageTable.__table__.c
    source = func.coalesce(ENTRY.c.source_message_id, ENTRY.c.message_id)
    known = or_(ENTRY.c.sender != NOTES_SENDER, ENTRY.c.source_message_id.is_not(None))
    orphans = select(ENTRY.c.id).where(known, ~exists().where(message.id == source)).limit(limit)
    ids = list((await session.execute(orphans)).scalars())
    if not ids:
        return 0
    return (await session.execute(delete(ENTRY).where(ENTRY.c.id.in_(ids)))).rowcount
