"""Finding what was said in a session: one place for the full-text index, the question's words, the ranking, the
neighbours of a hit and the fusion with an Embedding Model.

A turn's excerpts (:meth:`Retrieval.excerpts`) and the search tool (:meth:`Retrieval.passages_before`) ask the same
index with the same ranking (``rules.ranking``); filling the index (:meth:`Retrieval.index_older`) runs after an
answer, never inside a turn. The pure rules are ``rules.ranking``, ``rules.recall`` and ``rules.meaning``; the
queries are ``storage.search_index`` and ``storage.messages``. Nothing here fails a turn: a failure is logged and
the turn goes on with fewer excerpts, or none.
"""

import asyncio
import time

from langchain_core.embeddings import Embeddings
from langflow.services.database.models.message.model import MessageTable
from lfx.log.logger import logger
from sqlalchemy.exc import OperationalError

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.embeddings import MessageVectors, of_query
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import meaning, ranking, recall, retry
from langflow_session_memory.services.session_memory.rules.policy import EMBEDDING, RETRIEVAL
from langflow_session_memory.services.session_memory.rules.recall import Excerpt, Match
from langflow_session_memory.services.session_memory.rules.retry import Refused, Send
from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey
from langflow_session_memory.services.session_memory.rules.turn import SessionFactory, Turn
from langflow_session_memory.services.session_memory.storage import messages, search_index


class Retrieval:
    """The older messages of a session that a question refers to; one instance per service (its vectors are
    kept between turns). ``embedding_timeout_seconds``: the operator's one deadline for a turn's embedding calls."""

    def __init__(self, sessions: SessionFactory, embedding_timeout_seconds: float) -> None:
        self.sessions = sessions
        self.vectors = MessageVectors(
            max_floats=EMBEDDING.cached_floats, characters=EMBEDDING.embedded_characters, batch=EMBEDDING.batch
        )
        self.embedding_timeout_seconds = embedding_timeout_seconds

    async def excerpts(
        self, turn: Turn, summary: str, raw: list[MessageTable], embedder: Embeddings | None = None
    ) -> tuple[Excerpt, ...]:
        """The older messages a user's message that asks something (:func:`recall.asks`) refers to.

        Older means older than the oldest message sent, read once. From the full-text index when it holds every
        such message (:meth:`passages_before`); behind (a session switched on late), missing or broken (logged),
        or finding nothing where an ``embedder`` may find by meaning, by the words and meaning as before the index
        (:meth:`_matched`). None on any other failure (logged: the turn goes on without them, as without a fold).
        """
        if not recall.asks(turn.input_text):
            return ()
        try:
            before = await self._oldest_sent(turn, raw)
        except Exception as error:  # noqa: BLE001 - excerpts only add to a turn; logged, the turn goes on without
            await logger.aerror(f"{log_events.EXCERPTS_FAILED} reason={describe(error)}")
            return ()
        if before is None:
            return ()
        tokens = ranking.passage_budget(turn.context_window)
        passages = await self.passages_before(turn.key, turn.input_text, before=before, tokens=tokens)
        if passages or (passages is not None and embedder is None):
            return passages
        return await self._matched(turn, summary, raw, before, embedder)

    async def passages_before(
        self, key: SessionKey, question: str, *, before: Cursor, tokens: int
    ) -> tuple[Excerpt, ...] | None:
        """The best messages of the full-text index before ``before`` for ``question`` (``rules.ranking``: its
        rarest words, BM25), each with its neighbours, within ``tokens``, oldest first; None when the index does
        not hold every message before ``before`` yet, or is missing or broken (logged): the caller then searches by
        words as before the index. The excerpts of a turn and the search tool both ask this."""
        try:
            return await self._indexed_passages(key, question, before=before, tokens=tokens)
        except Exception as error:  # noqa: BLE001 - a missing or broken index: the caller searches by words, logged
            await logger.aerror(f"{log_events.INDEX_FAILED} where=search reason={describe(error)}")
            return None

    async def earlier(self, turn: Turn, query: str) -> tuple[list[Match], tuple[str, ...]]:
        """The messages of ``turn.key`` older than its raw window that the search tool's ``query`` finds, and the
        words it searched: the full-text index's passages, as a turn's excerpts find them (:meth:`passages_before`),
        or where the index is behind or missing, the newest messages holding its words, best first
        (:func:`recall.rank`)."""
        started = time.perf_counter()
        async with self.sessions() as session:
            boundary = await messages.window_start(
                session, turn.key, turn.n_messages, input_message_id=turn.input_message_id
            )
        if boundary is None:
            return [], ranking.query_words(query)
        passages = await self.passages_before(
            turn.key, query, before=boundary, tokens=ranking.tool_budget(turn.context_window)
        )
        if passages is not None:
            matches = [
                Match(
                    sender=line.sender,
                    sender_name=line.sender_name,
                    timestamp=line.timestamp,
                    excerpt=line.text,
                    keywords_found=int(line.score > 0),
                )
                for line in passages
            ]
            words, candidates = ranking.query_words(query), len(passages)
        else:
            words = recall.keywords(query)
            async with self.sessions() as session:
                found = (
                    await messages.older_than_window_matching(
                        session,
                        turn.key,
                        before=boundary,
                        words=words,
                        limit=RETRIEVAL.tool_candidates,
                        read_characters=RETRIEVAL.tool_read_characters,
                    )
                    if words
                    else []
                )
            matches, candidates = recall.rank(found, words), len(found)
        await logger.ainfo(
            f"{log_events.SEARCH} keywords={len(words)} candidates={candidates} matches={len(matches)} "
            f"latency_ms={round((time.perf_counter() - started) * 1000)}"
        )
        return matches, words

    async def _indexed_passages(
        self, key: SessionKey, question: str, *, before: Cursor, tokens: int
    ) -> tuple[Excerpt, ...] | None:
        started = time.perf_counter()
        words = ranking.query_words(question)
        async with self.sessions() as session:
            if not await search_index.is_ready(session, key, before=before):
                await logger.ainfo(f"{log_events.INDEX_BEHIND} session_id={key.session_id!r}")
                return None
            if not words:
                return ()
            found = await search_index.matching_each(
                session,
                key,
                before=before,
                words=words,
                limit=RETRIEVAL.indexed_per_word,
                read_characters=RETRIEVAL.read_characters,
            )
            indexed, average_words = await search_index.chat_size(
                session, key, before=before, limit=RETRIEVAL.indexed_counted
            )
            hits = ranking.rank(found, messages=indexed, average_words=average_words)[: RETRIEVAL.most_hits]
            neighbours = await messages.around(
                session, key, [hit.found.cursor for hit in hits], read_characters=RETRIEVAL.read_characters
            )
        passages = ranking.passages(hits, neighbours, before=before, words=words, tokens=tokens)
        await logger.ainfo(
            f"{log_events.PASSAGES} words={len(words)} searched={len(ranking.rarest(found))} "
            f"matched={len({row.message_id for rows in found.values() for row in rows})} quoted={len(passages)} "
            f"hits={len(hits)} best_score={hits[0].score if hits else 0} "
            f"latency_ms={round((time.perf_counter() - started) * 1000)} session_id={key.session_id!r}"
        )
        return tuple(passages)

    async def _oldest_sent(self, turn: Turn, raw: list[MessageTable]) -> Cursor | None:
        """The position of the oldest message the turn sends as it is (what is older may be quoted); None when the
        chat holds nothing older than the input."""
        if raw:
            return messages.cursor_of(raw[0])
        async with self.sessions() as session:
            return await messages.window_start(session, turn.key, 1, input_message_id=turn.input_message_id)

    async def index_older(self, turn: Turn, batches: int = RETRIEVAL.index_batches) -> int:
        """Add to the full-text index the chat's messages that the next turn's window leaves out (all but the newest
        ``n_messages - 1``: the next input comes in), one bounded batch a transaction; how many were indexed.

        Run after an answer (``agent.component_hooks``), never inside a turn. It never raises: a failure is logged
        and the next answer takes up where it stopped, since the index's newest entry is where it goes on from.
        """
        if turn.n_messages <= 0:
            return 0
        started, indexed, done = time.perf_counter(), 0, 0
        try:
            while done < batches:
                done += 1
                batch = await self._index_batch(turn)
                indexed += batch
                if batch < RETRIEVAL.index_batch:
                    break
        except Exception as error:  # noqa: BLE001 - after the answer nobody sees an error; logged, the next answer retries
            await logger.aerror(f"{log_events.INDEX_FAILED} where=indexing reason={describe(error)}")
        if indexed:
            await logger.ainfo(
                f"{log_events.INDEXED} messages={indexed} batches={done} "
                f"latency_ms={round((time.perf_counter() - started) * 1000)} session_id={turn.key.session_id!r}"
            )
        return indexed

    async def _index_batch(self, turn: Turn) -> int:
        """One batch of :meth:`index_older`, tried again (``RETRIEVAL.index_attempts`` times in all) where the
        database refused it: on SQLite a fold or another turn that commits after the batch's read began makes its
        write fail at once (the transaction's snapshot is stale, it cannot wait for the lock)."""
        tries = 1
        while True:
            try:
                return await self._index_one_batch(turn)
            except OperationalError:
                then = retry.after(Refused.INDEX_BATCH, tries=tries, most_tries=RETRIEVAL.index_attempts)
                if then.send is Send.GIVE_UP:
                    raise
                await asyncio.sleep(RETRIEVAL.index_retry_seconds * tries)
                tries += 1

    async def _index_one_batch(self, turn: Turn) -> int:
        async with self.sessions() as session:
            before = None
            if turn.n_messages > 1:
                before = await messages.window_start(session, turn.key, turn.n_messages - 1, input_message_id=None)
                if before is None:  # the next window holds the whole chat
                    return 0
            batch = await search_index.index_batch(session, turn.key, before=before)
            await session.commit()
            return batch

    async def _matched(
        self, turn: Turn, summary: str, raw: list[MessageTable], before: Cursor, embedder: Embeddings | None = None
    ) -> tuple[Excerpt, ...]:
        """The older messages found as before the full-text index: by words that neither the summary nor the
        messages sent hold, best first past ``RETRIEVAL.min_excerpt_score``, and with an ``embedder`` by meaning
        (:func:`meaning.standouts` among the newest ``EMBEDDING.pool``), the two rankings fused, oldest first;
        none on any failure (logged), words alone when only the embedding model fails."""
        words = recall.unheld(recall.keywords(turn.input_text), [summary, *(row.text or "" for row in raw)])
        if not words and embedder is None:
            return ()
        started = time.perf_counter()
        try:
            async with self.sessions() as session:
                found = await messages.older_matching_each(
                    session,
                    turn.key,
                    before=before,
                    words=words,
                    limit=RETRIEVAL.unindexed_per_word,
                    read_characters=RETRIEVAL.read_characters,
                )
                pool = (
                    await messages.older_than(
                        session,
                        turn.key,
                        before=before,
                        limit=EMBEDDING.pool,
                        read_characters=EMBEDDING.embedded_characters,
                    )
                    if embedder is not None
                    else []
                )
        except Exception as error:  # noqa: BLE001 - excerpts only add to a turn; logged, the turn goes on without them
            await logger.aerror(f"{log_events.EXCERPTS_FAILED} reason={describe(error)}")
            return ()
        meant = await self._meant(embedder, turn.input_text, pool) if pool else []
        excerpts = recall.best_excerpts(found, meant=meant, tokens=recall.excerpt_budget(turn.context_window))
        if excerpts:
            await logger.ainfo(
                f"{log_events.EXCERPTS} words={len(words)} candidates={sum(map(len, found.values()))} "
                f"quoted={len(excerpts)} best_score={max(excerpt.score for excerpt in excerpts)} "
                f"meant={sum(excerpt.standout is not None for excerpt in excerpts)} pool={len(pool)} "
                f"latency_ms={round((time.perf_counter() - started) * 1000)} session_id={turn.key.session_id!r}"
            )
        return tuple(excerpts)

    async def _meant(self, embedder: Embeddings, question: str, pool: list[messages.Candidate]) -> list:
        """The pool's messages whose meaning stands out for ``question``, best first; none when the embedding model
        fails or does not answer within the turn's one deadline (logged: the turn keeps its word excerpts)."""
        try:
            async with asyncio.timeout(self.embedding_timeout_seconds):  # one deadline for the turn's calls
                vectors = await self.vectors.of_messages(embedder, [(row.message_id, row.text) for row in pool])
                query = await of_query(embedder, question, self.vectors.characters)
            # 500 vectors of 1,536 floats read into one matrix: in a thread, so the event loop serves other turns.
            found = await asyncio.to_thread(meaning.standouts, query, vectors)
        except Exception as error:  # noqa: BLE001 - meaning only adds to the words' excerpts; logged, the turn goes on
            await logger.aerror(f"{log_events.EXCERPTS_FAILED} where=embedding_model reason={describe(error)}")
            return []
        rows = {row.message_id: row for row in pool}
        return [(rows[message_id], standing) for message_id, standing in found]
