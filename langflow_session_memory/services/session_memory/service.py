"""Orchestration of one Agent turn with session memory: read, plan, fold, assemble.

The order of "How a turn works" (docs/design.md) and nothing else: what a turn reads is
``reading``'s, the turn rules ``planner``'s, the history sent ``assembly``'s, folding is
``runner``'s, the tasks of folds after an answer are ``background``'s. Any failure here
degrades to the previous summary or to Langflow's stock history; a turn never fails because
of memory.
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langflow.services.database.models.message.model import MessageTable
from lfx.log.logger import logger
from lfx.schema.message import Message
from sqlalchemy.exc import OperationalError

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.embeddings import EMBEDDED_CHARACTERS, MessageVectors, of_query
from langflow_session_memory.services.session_memory.folding.background import BackgroundFolds
from langflow_session_memory.services.session_memory.folding.runner import FoldRunner
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import meaning, ranking, recall, token_estimate
from langflow_session_memory.services.session_memory.rules.assembly import history_messages
from langflow_session_memory.services.session_memory.rules.planner import TurnPlan, TurnPlanner, Waiting
from langflow_session_memory.services.session_memory.rules.policy import FoldPolicy
from langflow_session_memory.services.session_memory.rules.recall import Excerpt
from langflow_session_memory.services.session_memory.rules.state import Cursor, Reading, SessionKey, SessionState
from langflow_session_memory.services.session_memory.rules.turn import FoldCost, Mode, SessionFactory, Turn
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.settings import embedding_timeout_seconds, fold_policy
from langflow_session_memory.services.session_memory.storage import messages, search_index, store
from langflow_session_memory.services.session_memory.storage.model import utc_now
from langflow_session_memory.services.session_memory.storage.reading import read
from langflow_session_memory.services.session_memory.summary import validation

REMEMBERED_TURNS = 1024
# Of each older message a keyword finds, the part read: an excerpt shows a few hundred characters around its words.
EXCERPT_READ_CHARACTERS = 4_000
# With an embedding model: the newest older messages its vectors rank (a session's first asking turn embeds them).
MEANING_POOL = 500
# Batches of ``search_index.INDEX_BATCH`` indexed after one answer: a session switched on late with 100,000
# messages is indexed over its first answer or two, a few hundred messages a transaction.
INDEX_BATCHES = 100
INDEX_ATTEMPTS = 3
INDEX_RETRY_SECONDS = 0.05


@dataclass(frozen=True)
class History:
    """What the Agent sends as chat history, what folds cost, and the row it was planned from.

    ``fold_usage`` is this turn's folds' plus that of folds that ran after earlier answers
    and were not reported yet. ``fold_due``: a fold should run after this answer. ``summary`` is the summary sent
    (empty when none is, or when it had to be left out to fit the window). ``waiting``: the raw
    messages waiting beyond the window as this turn first read them, against their budget.
    """

    messages: list[Message]
    summary: str = ""
    folded: int = 0
    fold_usage: TokenUsage = field(default_factory=TokenUsage)
    state: SessionState | None = None
    fold_due: bool = False
    waiting: Waiting | None = None
    excerpts: tuple[Excerpt, ...] = ()

    @property
    def excerpt_tokens(self) -> int:
        """The estimated size of the older messages quoted for this turn."""
        return token_estimate.estimated_size(excerpt.text for excerpt in self.excerpts)


class SessionMemoryService:
    """Builds an Agent's history; one instance per process (see ``runtime``).

    The policy is the operator's (``settings.fold_policy``) unless given, fixed for the
    service's life: the planner and the fold runner are built once, with it.
    """

    def __init__(
        self,
        sessions: SessionFactory,
        clock: Callable[[], datetime] = utc_now,
        policy: FoldPolicy | None = None,
        background: BackgroundFolds | None = None,
    ) -> None:
        self.sessions = sessions
        self.planner = TurnPlanner(clock=clock, policy=policy or fold_policy())
        self.folds = FoldRunner(sessions, self.planner)
        self.background = background or BackgroundFolds()
        self._folded_turns: OrderedDict = OrderedDict()
        self.vectors = MessageVectors()
        self.embedding_timeout_seconds = embedding_timeout_seconds()

    @property
    def policy(self) -> FoldPolicy:
        return self.planner.policy

    async def build_history(self, turn: Turn, llm: BaseChatModel, embedder: Embeddings | None = None) -> History:
        """The history for ``turn``; folding at most once per turn, even when the Agent retries it. With an
        ``embedder`` (the builder's "Embedding Model"), the excerpts of older messages are also found by meaning.

        Where the turn says so (a self-hosted server), the folds still running on its model
        server are awaited first, at most one fold timeout: the turn then sends the summary they
        wrote (see :meth:`BackgroundFolds.wait_for_server`).
        """
        if turn.n_messages > 0 and turn.waits_for_folds:
            await self.background.wait_for_server(turn.model_server, self.policy.fold_timeout_seconds)
        return await self._build(turn, llm, Mode.ROUTINE, embedder)

    async def compact(self, turn: Turn, llm: BaseChatModel) -> History:
        """The history after the provider refused the prompt as too long: the summary alone.

        Everything stored before the input is folded first (several batches, the last
        one partial); what does not fold is left out of this retry, not lost.
        """
        return await self._build(turn, llm, Mode.COMPACT)

    async def fold_after_turn(self, turn: Turn, llm: BaseChatModel, go_on: Callable[[], bool] = lambda: False) -> None:
        """Fold every full batch ``turn`` left unfolded, after its answer: the same claim, checks and commit.

        On a self-hosted server (``turn.waits_for_folds``) a fold is one batch, and the next
        follows while ``go_on()`` (no turn waits for that server), at most the policy's
        ``idle_batches``: a backlog folds while the user reads, and a turn that comes waits for
        the batch under way only. Its tokens are kept on the row and reported with the
        session's next turn. It never raises: it runs after the answer, where nobody would see
        an error; a failure is logged.
        """
        for _ in range(self.policy.idle_batches if turn.waits_for_folds else 1):
            if not await self._fold_once_after(turn, llm) or not go_on():
                return

    async def _fold_once_after(self, turn: Turn, llm: BaseChatModel) -> bool:
        """One fold after the answer, as planned from the row now; whether it folded (a failure is logged)."""
        started = time.perf_counter()
        try:
            reading = await self._read(turn)
            plan = self.planner.plan(turn, reading, Mode.AFTER_ANSWER, may_fold=True)
            if not plan.batches:
                return False
            cost = await self.folds.run(turn, reading.state, plan.batches, Mode.AFTER_ANSWER, llm)
            if cost.usage:
                async with self.sessions() as session:
                    await store.add_unreported_usage(session, turn.key, cost.usage)
                    await session.commit()
        except Exception as error:  # noqa: BLE001 - after the answer nobody sees an error; logged, the next turn retries
            latency_ms = round((time.perf_counter() - started) * 1000)
            await self.folds.log_failure(turn.key, error, Mode.AFTER_ANSWER, latency_ms=latency_ms)
            return False
        return cost.folded > 0

    async def record_call_size(self, key: SessionKey, tokens: int | None) -> None:
        """Keep (or clear) the size of the last model call of this key's turn, for the next early-fold check."""
        async with self.sessions() as session:
            if tokens is not None:
                await store.create_if_absent(session, key)
            await store.record_call_size(session, key, tokens)
            await session.commit()

    async def _build(self, turn: Turn, llm: BaseChatModel, mode: Mode, embedder: Embeddings | None = None) -> History:
        """Read, plan, fold if the plan says so, then read again and send what the row now leaves.

        Whoever folded (this turn, or another worker first), the history sent is planned
        from the row as it is after the fold, by the same rules as a turn without a fold.
        """
        if turn.n_messages <= 0:
            return History(messages=[])
        earlier_fold = self._earlier_fold(turn, mode)
        reading = await self._read(turn)
        cost = earlier_fold if earlier_fold is not None else await self._take_unreported_usage(reading.state)
        plan = self.planner.plan(turn, reading, mode, may_fold=earlier_fold is None)
        waiting = plan.waiting  # as read before any fold: the step tells why a fold ran early
        await _log_plan(turn, plan)
        attempted = bool(plan.batches)
        if attempted:
            cost = (await self.folds.run(turn, reading.state, plan.batches, mode, llm)).plus_tokens(cost)
            reading = await self._read(turn)
            plan = self.planner.plan(turn, reading, mode, may_fold=False)
        if cost or attempted:  # a retry of this turn neither folds again nor reports these tokens twice
            self._remember_fold(turn, cost)
        summary = reading.state.summary if plan.send_summary else ""
        await _log_trimmed(turn, plan, summary)
        excerpts = await self.excerpts(turn, summary, plan.raw, embedder) if mode is Mode.ROUTINE else ()
        return History(
            messages=await history_messages(summary, plan.raw, excerpts),
            excerpts=excerpts,
            summary=summary,
            folded=cost.folded,
            fold_usage=cost.usage,
            state=reading.state,
            fold_due=mode is Mode.ROUTINE and self.planner.fold_due(turn, reading),
            waiting=waiting,
        )

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
                limit=ranking.CANDIDATES_PER_WORD,
                read_characters=EXCERPT_READ_CHARACTERS,
            )
            indexed, average_words = await search_index.chat_size(
                session, key, before=before, limit=ranking.INDEXED_COUNTED
            )
            hits = ranking.rank(found, messages=indexed, average_words=average_words)[: ranking.MOST_HITS]
            neighbours = await messages.around(
                session, key, [hit.found.cursor for hit in hits], read_characters=EXCERPT_READ_CHARACTERS
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

    async def index_older(self, turn: Turn, batches: int = INDEX_BATCHES) -> int:
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
                if batch < search_index.INDEX_BATCH:
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
        """One batch of :meth:`index_older`, tried again (at most :data:`INDEX_ATTEMPTS` times in all) where the
        database refused it: on SQLite a fold or another turn that commits after the batch's read began makes its
        write fail at once (the transaction's snapshot is stale, it cannot wait for the lock)."""
        for attempt in range(1, INDEX_ATTEMPTS):
            try:
                return await self._index_one_batch(turn)
            except OperationalError:
                await asyncio.sleep(INDEX_RETRY_SECONDS * attempt)
        return await self._index_one_batch(turn)

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
        messages sent hold, best first past :data:`recall.MIN_EXCERPT_SCORE`, and with an ``embedder`` by meaning
        (:func:`meaning.standouts` among the newest :data:`MEANING_POOL`), the two rankings fused, oldest first;
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
                    limit=recall.CANDIDATES_PER_WORD,
                    read_characters=EXCERPT_READ_CHARACTERS,
                )
                pool = (
                    await messages.older_than(
                        session, turn.key, before=before, limit=MEANING_POOL, read_characters=EMBEDDED_CHARACTERS
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
                query = await of_query(embedder, question)
            # 500 vectors of 1,536 floats read into one matrix: in a thread, so the event loop serves other turns.
            found = await asyncio.to_thread(meaning.standouts, query, vectors)
        except Exception as error:  # noqa: BLE001 - meaning only adds to the words' excerpts; logged, the turn goes on
            await logger.aerror(f"{log_events.EXCERPTS_FAILED} where=embedding_model reason={describe(error)}")
            return []
        rows = {row.message_id: row for row in pool}
        return [(rows[message_id], standing) for message_id, standing in found]

    async def _read(self, turn: Turn) -> Reading:
        """What :func:`reading.read` reads, with a summary that may be sent.

        A stored summary that no fold or edit could have written (over a cap, a control
        character: an older version's, or written by hand) is never sent: the row is reset,
        logged, and the session is folded again from its start.
        """
        reading = await read(self.sessions, turn, self.policy.gap_limit)
        problem = _invalid_summary(reading.state.summary)
        if problem is None:
            return reading
        await self.folds.reset(reading.state, reason=f"summary_invalid detail={problem!r}")
        reading = await read(self.sessions, turn, self.policy.gap_limit)
        if _invalid_summary(reading.state.summary) is not None:  # written again since: leave memory out of this turn
            raise validation.SummaryRejectedError("stored summary is invalid")
        return reading

    async def _take_unreported_usage(self, state: SessionState) -> FoldCost:
        """The tokens of folds that ran after earlier answers, taken off the row so no other turn reports them."""
        if not state.unreported_usage:
            return FoldCost()
        async with self.sessions() as session:
            taken = await store.take_unreported_usage(session, state)
            await session.commit()
        return FoldCost(usage=state.unreported_usage) if taken else FoldCost()

    def _earlier_fold(self, turn: Turn, mode: Mode) -> FoldCost | None:
        """What an earlier attempt of this turn (same stored input) folded; a retry does not fold again."""
        if mode is Mode.COMPACT or turn.input_message_id is None:
            return None
        return self._folded_turns.get((turn.key, turn.input_message_id))

    def _remember_fold(self, turn: Turn, cost: FoldCost) -> None:
        """Note that ``turn`` folded and what it cost: ids and counts only, a bounded number, never text."""
        if turn.input_message_id is None:
            return
        self._folded_turns[(turn.key, turn.input_message_id)] = cost
        while len(self._folded_turns) > REMEMBERED_TURNS:
            self._folded_turns.popitem(last=False)


async def _log_plan(turn: Turn, plan: TurnPlan) -> None:
    waiting = plan.waiting
    if waiting is not None and waiting.over:
        await logger.ainfo(
            f"{log_events.EARLY_FOLD} reason=waiting_tokens waiting_messages={waiting.messages} "
            f"waiting_tokens={waiting.tokens} budget={waiting.budget} folding={bool(plan.batches)} "
            f"session_id={turn.key.session_id!r}"
        )
    if plan.early_fold is not None:
        early = plan.early_fold
        await logger.ainfo(
            f"{log_events.EARLY_FOLD} size_before={early.size_before} size_after={early.size_after} "
            f"context_window={turn.context_window} folded_from_window={early.folded_from_window} "
            f"session_id={turn.key.session_id!r}"
        )


async def _log_trimmed(turn: Turn, plan: TurnPlan, summary: str) -> None:
    if plan.dropped:
        await logger.ainfo(
            f"{log_events.HISTORY_TRIMMED} left_out={plan.dropped} reason={plan.dropped_reason} "
            f"summary_sent={bool(summary)} session_id={turn.key.session_id!r}"
        )


def _invalid_summary(summary: str) -> str | None:
    """Why a stored summary must not be sent (it fails an edit's checks), or None; an empty one is no summary."""
    if not summary:
        return None
    try:
        validation.validate_edited_summary(summary)
    except validation.SummaryRejectedError as error:
        return str(error)
    return None
