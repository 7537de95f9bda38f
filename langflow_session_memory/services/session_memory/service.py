"""Orchestration of one Agent turn with session memory: read, plan, fold, assemble.

This is the only place that knows the order of "How a turn works" in DESIGN.md. SQL lives
in ``store``/``messages``, decisions in ``planner``, the model call in ``summarizer``. Any
failure here degrades to the previous summary or to Langflow's stock history; a user's
turn never fails because of memory.
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from uuid import UUID

from langchain_core.language_models import BaseChatModel
from langflow.services.database.models.message.model import MessageTable
from lfx.log.logger import logger
from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI, MESSAGE_SENDER_USER
from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory.services.session_memory import context_size, messages, store, summarizer
from langflow_session_memory.services.session_memory.model import SessionKey, SessionState, utc_now
from langflow_session_memory.services.session_memory.planner import (
    FOLD_BATCH_SIZE,
    MAX_BATCHES_PER_TURN,
    FoldPlan,
    gap_fetch_limit,
    plan_fold,
    raw_window_start,
    unfolded_tail,
)

FOLD_PAUSE = timedelta(minutes=10)
CLAIM_MARGIN = timedelta(seconds=5)
CLAIM_POLL_SECONDS = 0.1
REMEMBERED_TURNS = 1024
SUMMARY_SENDER_NAME = "Session memory"
SUMMARY_FRAME = (
    "Notes on the earlier part of this conversation (older messages are summarized here "
    "instead of being repeated):\n\n{summary}"
)
SUMMARY_ACKNOWLEDGEMENT = "Understood. I will use these notes as context for the rest of the conversation."

COMPACTION_MAX_BATCHES = 10

SessionFactory = Callable[[], AbstractAsyncContextManager[AsyncSession]]


@dataclass(frozen=True)
class Turn:
    """One Agent turn: whose history, how many raw messages, and the stored input message.

    ``context_window`` (tokens, None when unknown) and ``fixed_tokens`` (the estimated
    system prompt and input) let a turn that would not fit fold early.
    """

    key: SessionKey
    n_messages: int
    input_message_id: UUID | None
    context_window: int | None = None
    fixed_tokens: int = 0


@dataclass(frozen=True)
class History:
    """What the Agent sends as chat history, plus what the fold cost."""

    messages: list[Message]
    summary: str = ""
    folded: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class _FoldOutcome:
    state: SessionState
    folded: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    folded_elsewhere: bool = False  # another worker's fold (claimed, or won the compare-and-swap) is used


@dataclass
class SessionMemoryService:
    """Builds an Agent's history; one instance per process (see :func:`get_session_memory_service`)."""

    sessions: SessionFactory
    clock: Callable[[], datetime] = utc_now
    batch_size: int = FOLD_BATCH_SIZE
    max_batches: int = MAX_BATCHES_PER_TURN
    fold_timeout: float = summarizer.FOLD_TIMEOUT_SECONDS
    _turns: OrderedDict = field(default_factory=OrderedDict, repr=False)

    async def build_history(self, turn: Turn, llm: BaseChatModel) -> History:
        """The history for ``turn``; the same result again if the Agent retries the turn.

        A turn is recognised by its stored input message; without one it cannot be told
        from the next, so it is not remembered.
        """
        if turn.n_messages <= 0:
            return History(messages=[])
        remembered = self._turns.get((turn.key, turn.input_message_id))
        if remembered is not None:
            return remembered
        history = await self._build(turn, llm, compact=False)
        if turn.input_message_id is None:
            return history
        self._turns[(turn.key, turn.input_message_id)] = history
        while len(self._turns) > REMEMBERED_TURNS:
            self._turns.popitem(last=False)
        return history

    async def compact(self, turn: Turn, llm: BaseChatModel) -> History:
        """The history after the provider refused the prompt as too long: the summary alone.

        Everything stored before the input is folded first (several batches, the last
        one partial); what does not fold is left out of this retry, not lost.
        """
        return await self._build(turn, llm, compact=True)

    async def _build(self, turn: Turn, llm: BaseChatModel, *, compact: bool) -> History:
        window, state, gap = await self._read(turn)
        visible, overflow, plan = self._plan(turn, window, state, gap, compact=compact)
        if plan.batches and state.cursor is not None and await self._folded_range_changed(turn, state):
            await self._reset(state)
            window, state, gap = await self._read(turn)
            visible, overflow, plan = self._plan(turn, window, state, gap, compact=compact)
        outcome = await self._fold_batches(state, plan.batches, llm) if plan.batches else _FoldOutcome(state=state)
        if outcome.folded_elsewhere:
            # Another worker folded first: send what its row leaves unfolded, as a turn without a fold would.
            window, sent_state, gap = await self._read(turn)
            history_rows = [*unfolded_tail(gap, 0, self.batch_size), *_visible(turn, window)]
        else:
            sent_state = outcome.state
            raw = () if overflow else unfolded_tail(gap, outcome.folded, self.batch_size)
            history_rows = [*raw, *visible[len(overflow) :]]
        history = [
            *summary_messages(sent_state.summary, history_rows),
            *[await _to_message(r) for r in history_rows],
        ]
        return History(
            messages=history,
            summary=sent_state.summary,
            folded=outcome.folded,
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
        )

    def _plan(
        self, turn: Turn, window: list[MessageTable], state: SessionState, gap: list[MessageTable], *, compact: bool
    ) -> tuple[list[MessageTable], list[MessageTable], FoldPlan]:
        """The raw window without the input, its part to fold early, and the fold plan."""
        visible = _visible(turn, window)
        overflow = visible if compact else self._overflow(turn, state, window, visible)
        gap_is_complete = len(gap) < gap_fetch_limit(self.batch_size, self.max_batches)
        plan = plan_fold(
            [*gap, *overflow] if overflow and gap_is_complete else gap,
            paused=state.is_paused(self.clock()),
            batch_size=self.batch_size,
            max_batches=COMPACTION_MAX_BATCHES if compact else self.max_batches,
            fold_all=bool(overflow),
        )
        return visible, overflow, plan

    def _overflow(
        self, turn: Turn, state: SessionState, window: list[MessageTable], visible: list[MessageTable]
    ) -> list[MessageTable]:
        """The oldest raw messages that must be folded now because the prompt nears the context window."""
        if not turn.context_window or not visible:
            return []
        estimate = (
            turn.fixed_tokens
            + context_size.estimate_tokens(state.summary)
            + context_size.estimated_size(row.text for row in visible)
        )
        # The provider's figure is exact but a turn old; the estimate sees a message stored since.
        size = max(context_size.reported_size(window) or 0, estimate)
        if size <= context_size.EARLY_FOLD_RATIO * turn.context_window:
            return []
        budget = int(context_size.TARGET_RATIO * turn.context_window) - turn.fixed_tokens
        start = raw_window_start(
            [context_size.estimate_tokens(row.text) for row in visible],
            [row.sender == MESSAGE_SENDER_USER for row in visible],
            budget - context_size.SUMMARY_RESERVE_TOKENS,
        )
        size_after = turn.fixed_tokens + context_size.estimated_size(row.text for row in visible[start:])
        logger.info(
            f"session_context_early_fold size_before={size} size_after={size_after} "
            f"context_window={turn.context_window} folded_from_window={start} session_id={turn.key.session_id!r}"
        )
        return visible[:start]

    async def _read(self, turn: Turn) -> tuple[list[MessageTable], SessionState, list[MessageTable]]:
        """The window (newest N messages after the cursor), the state row and the gap before the window.

        One statement reads the newest N + gap-limit unfolded messages with the row, so a turn
        without a fold costs one round trip like the stock Agent's. A second query runs only
        when the gap may be longer than its limit (a backlog: the gap must then start at the
        cursor) or when no message follows the cursor (the row was not returned).
        """
        gap_limit = gap_fetch_limit(self.batch_size, self.max_batches)
        async with self.sessions() as session:
            unfolded, state = await messages.newest_unfolded(session, turn.key, turn.n_messages + gap_limit)
            if state is None:
                state = await store.load(session, turn.key) or SessionState(key=turn.key)
            window, gap = unfolded[-turn.n_messages :], unfolded[: -turn.n_messages]
            if len(gap) == gap_limit:
                gap = await messages.gap(
                    session, turn.key, after=state.cursor, before=messages.cursor_of(window[0]), limit=gap_limit
                )
            return window, state, gap

    async def _folded_range_changed(self, turn: Turn, state: SessionState) -> bool:
        """Whether messages were added behind the cursor or removed from the folded range.

        Counting grows with the folded part of the session, so it runs only on turns that
        fold (about one in ten): a late message is then folded in at most one batch later,
        never lost. Deletions and edits are handled at once by the cleanup listeners.
        """
        async with self.sessions() as session:
            return await messages.count_through(session, turn.key, state.cursor) != state.folded_count

    async def _reset(self, state: SessionState) -> None:
        """Drop a summary whose folded messages changed, so they are folded again from the start.

        Losing this compare-and-swap is fine: the row changed anyway, and the turn reads it again.
        """
        await logger.awarning(
            f"session_summary_reset reason=folded_range_changed folded_count={state.folded_count} "
            f"session_id={state.key.session_id!r}"
        )
        empty = SessionState(key=state.key, paused_until=state.paused_until, last_error=state.last_error)
        async with self.sessions() as session:
            await store.compare_and_swap(session, state, empty)
            await session.commit()

    async def _fold_batches(
        self, state: SessionState, batches: Sequence[Sequence[MessageTable]], llm: BaseChatModel
    ) -> _FoldOutcome:
        """Claim the session's fold, then fold batch by batch, committing each with compare-and-swap.

        Without the claim (another worker is folding, or the row moved on since it was
        read) no model is called: the turn waits for that fold and uses its row.
        """
        claim = await self._claim(state, len(batches))
        if claim is None:
            await self._wait_for_fold_elsewhere(state.key)
            return _FoldOutcome(state=state, folded_elsewhere=True)
        try:
            return await self._fold_claimed(state, batches, llm)
        finally:
            async with self.sessions() as session:
                await store.release_fold(session, state.key, claim)
                await session.commit()

    async def _fold_claimed(
        self, state: SessionState, batches: Sequence[Sequence[MessageTable]], llm: BaseChatModel
    ) -> _FoldOutcome:
        outcome = _FoldOutcome(state=state)
        for batch in batches:
            started, summary_before = time.perf_counter(), outcome.state.summary
            lines = [summarizer.ChatLine(role=row.sender, text=row.text or "") for row in batch]
            try:
                result = await summarizer.fold(llm, outcome.state.summary, lines, timeout_seconds=self.fold_timeout)
            except Exception as error:  # noqa: BLE001 - any model or validation failure pauses folding, never the turn
                await self._pause(outcome.state.key, error)
                return outcome
            outcome.input_tokens += result.input_tokens
            outcome.output_tokens += result.output_tokens
            folded_state = replace(
                outcome.state,
                summary=result.summary,
                cursor=messages.cursor_of(batch[-1]),
                folded_count=outcome.state.folded_count + len(batch),
                paused_until=None,
                last_error=None,
            )
            won, current = await self._commit(outcome.state, folded_state)
            if not won:
                await logger.ainfo(
                    f"session_summary_lost_race session_id={state.key.session_id!r} "
                    f"seen_version={outcome.state.version} winner_version={current.version}"
                )
                outcome.state, outcome.folded_elsewhere = current, True
                return outcome
            outcome.state = current
            outcome.folded += len(batch)
            await logger.ainfo(
                f"session_summary_fold latency_ms={round((time.perf_counter() - started) * 1000)} "
                f"folded={len(batch)} summary_words_before={summarizer.word_count(summary_before)} "
                f"summary_words_after={summarizer.word_count(result.summary)} version={current.version}"
            )
        return outcome

    async def _claim(self, state: SessionState, batch_count: int) -> datetime | None:
        """Claim the fold for as long as its model calls may take; None when another worker has it."""
        now = self.clock()
        until = now + timedelta(seconds=self.fold_timeout * batch_count) + CLAIM_MARGIN
        async with self.sessions() as session:
            if state.version == 0:
                await store.create_if_absent(session, state.key)
            claimed = await store.claim_fold(session, state, until, now)
            await session.commit()
        return until if claimed else None

    async def _wait_for_fold_elsewhere(self, key: SessionKey) -> None:
        """Wait while another worker's claim holds, at most one fold timeout; then the turn reads its row."""
        started = time.perf_counter()
        while time.perf_counter() - started < self.fold_timeout:
            async with self.sessions() as session:
                current = await store.load(session, key)
            if current is None or not current.is_claimed(self.clock()):
                break
            await asyncio.sleep(CLAIM_POLL_SECONDS)
        await logger.ainfo(
            f"session_summary_fold_elsewhere waited_ms={round((time.perf_counter() - started) * 1000)} "
            f"session_id={key.session_id!r}"
        )

    async def _commit(self, seen: SessionState, new: SessionState) -> tuple[bool, SessionState]:
        """Compare-and-swap ``new`` over ``seen``; returns whether we won and the row as it now is.

        The claim created the row; if it is gone now, its session was deleted while the
        model ran, and the summary of deleted messages must not bring it back.
        """
        async with self.sessions() as session:
            won = await store.compare_and_swap(session, seen, new)
            await session.commit()
            if won:
                return True, replace(new, version=seen.version + 1)
            return False, await store.load(session, seen.key) or SessionState(key=seen.key)

    async def _pause(self, key: SessionKey, error: Exception) -> None:
        reason = f"{type(error).__name__}: {error}"[:500]
        until = self.clock() + FOLD_PAUSE
        await logger.awarning(f"session_summary_fold_failed session_id={key.session_id!r} reason={reason!r}")
        async with self.sessions() as session:
            await store.pause(session, key, until, reason)
            await session.commit()
        await logger.awarning(f"session_summary_paused session_id={key.session_id!r} until={until.isoformat()}")


def _visible(turn: Turn, window: Sequence[MessageTable]) -> list[MessageTable]:
    """The window as history: the stored input message is sent as the input, not repeated."""
    return [row for row in window if row.id != turn.input_message_id]


def summary_messages(summary: str, following: Sequence[MessageTable]) -> list[Message]:
    """The summary as a user-role message that is never stored, first in the history.

    When the next message sent is the user's (a stored one, or the current input when
    nothing follows), a short assistant acknowledgement keeps roles alternating for
    providers that reject two user messages in a row.
    """
    if not summary:
        return []
    notes = Message(
        text=SUMMARY_FRAME.format(summary=summary), sender=MESSAGE_SENDER_USER, sender_name=SUMMARY_SENDER_NAME
    )
    next_sender = following[0].sender if following else MESSAGE_SENDER_USER
    if next_sender != MESSAGE_SENDER_USER:
        return [notes]
    ack = Message(text=SUMMARY_ACKNOWLEDGEMENT, sender=MESSAGE_SENDER_AI, sender_name=SUMMARY_SENDER_NAME)
    return [notes, ack]


async def _to_message(row: MessageTable) -> Message:
    """The same conversion Langflow's own history query applies to a stored row."""
    return await Message.create(**row.model_dump())
