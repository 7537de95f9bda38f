"""Orchestration of one Agent turn with session memory: read, plan, fold, assemble.

This is the only place that knows the order of "How a turn works" in DESIGN.md. SQL lives
in ``store``/``messages``, decisions in ``planner``, the model call in ``summarizer``, the
tasks of folds that run after an answer in ``background``. Any failure here degrades to the
previous summary or to Langflow's stock history; a user's turn never fails because of memory.
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from uuid import UUID

from langchain_core.language_models import BaseChatModel
from langflow.services.database.models.message.model import MessageTable
from lfx.log.logger import logger
from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI, MESSAGE_SENDER_USER
from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory.services.session_memory import context_size, messages, store, summarizer
from langflow_session_memory.services.session_memory.background import BackgroundFolds
from langflow_session_memory.services.session_memory.model import SessionKey, SessionState, utc_now
from langflow_session_memory.services.session_memory.planner import (
    FOLD_BATCH_SIZE,
    MAX_BATCHES_PER_TURN,
    FoldPlan,
    gap_fetch_limit,
    plan_fold,
    raw_window_start,
)
from langflow_session_memory.services.session_memory.reasons import describe

FOLD_PAUSE = timedelta(minutes=10)
CLAIM_MARGIN = timedelta(seconds=5)
CLAIM_POLL_SECONDS = 0.1
# A turn the provider refused as too long waits at most this for another worker's fold before it
# compacts with the summary as it is: its user waits already, and a dead worker's claim holds minutes.
COMPACTION_WAIT_SECONDS = 5.0
REMEMBERED_TURNS = 1024
SUMMARY_SENDER_NAME = "Session memory"
SUMMARY_FRAME = (
    "Notes on the earlier part of this conversation (older messages are summarized here "
    "instead of being repeated):\n\n{summary}"
)
SUMMARY_ACKNOWLEDGEMENT = "Understood. I will use these notes as context for the rest of the conversation."
HISTORY_START_NOTE = "(Earlier messages of this conversation are not shown here.)"

COMPACTION_MAX_BATCHES = 10
# Messages a turn adds behind the window it read: its answer (the input was stored before the read), and a margin.
MESSAGES_ADDED_BY_A_TURN = 2

SessionFactory = Callable[[], AbstractAsyncContextManager[AsyncSession]]


@dataclass(frozen=True)
class Turn:
    """One Agent turn: whose history, how many raw messages, and the stored input message.

    ``context_window`` (tokens, None when unknown) and ``fixed_tokens`` (the estimated
    system prompt, tools and input) let a turn that would not fit fold early, and keep its
    request within the window. ``fold_context_window`` is the window of the model that folds
    (the Agent's, or the Summary Model's). ``provider`` is the Langflow provider of the model
    that folds, for Langflow's remediation of refused parameters.
    ``folds_after_turn``: a long-lived event loop runs folds after the answer, so routine
    folds leave the turn (see :class:`BackgroundFolds`); otherwise they run inside it.
    """

    key: SessionKey
    n_messages: int
    input_message_id: UUID | None
    context_window: int | None = None
    fixed_tokens: int = 0
    provider: str | None = None
    folds_after_turn: bool = False
    fold_context_window: int | None = None


@dataclass(frozen=True)
class History:
    """What the Agent sends as chat history, what folds cost, and the row it was planned from.

    The tokens are this turn's folds plus those of folds that ran after earlier answers
    and were not reported yet; ``tokens_estimated`` when a provider reported no usage for
    some of them. ``fold_due``: a fold should run after this answer. ``summary`` is the
    summary sent (empty when none is, or when it had to be left out to fit the window).
    """

    messages: list[Message]
    summary: str = ""
    folded: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    state: SessionState | None = None
    fold_due: bool = False
    tokens_estimated: bool = False


class Mode(Enum):
    """Why a plan is made: a turn as usual, a retry after a "prompt too long" refusal, or a fold after an answer."""

    ROUTINE = "routine"
    COMPACT = "compact"
    BACKGROUND = "background"

    @property
    def runs(self) -> str:
        """Where a fold of this mode runs, for the log: inside the user's turn, or after its answer."""
        return "background" if self is Mode.BACKGROUND else "inline"


@dataclass(frozen=True)
class _Reading:
    """What one read gives: the newest N messages, the state row, and the unfolded messages before the window."""

    window: list[MessageTable]
    state: SessionState
    gap: list[MessageTable]


@dataclass(frozen=True)
class _TurnPlan:
    """The messages sent raw, the batches to fold first, and whether the summary is sent.

    ``dropped``: unfolded messages older than the window that are neither folded nor sent
    this turn (a paused session's backlog, or a gap left out to fit the window), and why.
    """

    raw: list[MessageTable]
    batches: tuple[tuple[MessageTable, ...], ...]
    send_summary: bool = True
    dropped: int = 0
    dropped_reason: str = ""


@dataclass
class _FoldCost:
    folded: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False

    def __bool__(self) -> bool:
        return bool(self.folded or self.input_tokens or self.output_tokens)


@dataclass
class SessionMemoryService:
    """Builds an Agent's history; one instance per process (see :func:`get_session_memory_service`)."""

    sessions: SessionFactory
    clock: Callable[[], datetime] = utc_now
    batch_size: int = FOLD_BATCH_SIZE
    max_batches: int = MAX_BATCHES_PER_TURN
    fold_timeout: float = summarizer.FOLD_TIMEOUT_SECONDS
    background: BackgroundFolds = field(default_factory=BackgroundFolds)
    _folded_turns: OrderedDict = field(default_factory=OrderedDict, repr=False)

    @property
    def longest_claim(self) -> timedelta:
        """The longest claim a worker can legitimately hold: a hard compaction's batches, one timeout each."""
        return timedelta(seconds=self.fold_timeout * COMPACTION_MAX_BATCHES) + CLAIM_MARGIN

    async def build_history(self, turn: Turn, llm: BaseChatModel) -> History:
        """The history for ``turn``; folding at most once per turn, even when the Agent retries it.

        A fold of this session still running after an earlier answer is cancelled first, so
        the user is answered before it (see :meth:`BackgroundFolds.cancel`).
        """
        if turn.n_messages > 0:
            await self.background.cancel(turn.key)
        return await self._build(turn, llm, Mode.ROUTINE)

    async def compact(self, turn: Turn, llm: BaseChatModel) -> History:
        """The history after the provider refused the prompt as too long: the summary alone.

        Everything stored before the input is folded first (several batches, the last
        one partial); what does not fold is left out of this retry, not lost.
        """
        return await self._build(turn, llm, Mode.COMPACT)

    async def fold_after_turn(self, turn: Turn, llm: BaseChatModel) -> None:
        """Fold what ``turn`` left unfolded, after its answer: the claim, checks and commit of a fold in a turn.

        Its tokens are kept on the row and reported with the session's next turn.
        """
        reading = await self._read(turn)
        plan = self._plan(turn, reading, Mode.BACKGROUND, may_fold=True)
        if not plan.batches:
            return
        cost = await self._fold(turn, reading, plan.batches, Mode.BACKGROUND, llm)
        if cost.input_tokens or cost.output_tokens:
            async with self.sessions() as session:
                await store.add_unreported_usage(session, turn.key, cost.input_tokens, cost.output_tokens)
                await session.commit()

    async def _build(self, turn: Turn, llm: BaseChatModel, mode: Mode) -> History:
        """Read, plan, fold if the plan says so, then read again and send what the row now leaves.

        Whoever folded (this turn, or another worker first), the history sent is planned
        from the row as it is after the fold, by the same rules as a turn without a fold.
        """
        if turn.n_messages <= 0:
            return History(messages=[])
        earlier_fold = self._earlier_fold(turn, mode)
        reading = await self._read(turn)
        cost = earlier_fold if earlier_fold is not None else await self._take_unreported_usage(reading.state)
        plan = self._plan(turn, reading, mode, may_fold=earlier_fold is None)
        attempted = bool(plan.batches)
        if attempted:
            folded = await self._fold(turn, reading, plan.batches, mode, llm)
            cost = _FoldCost(
                folded=folded.folded,
                input_tokens=cost.input_tokens + folded.input_tokens,
                output_tokens=cost.output_tokens + folded.output_tokens,
                estimated=cost.estimated or folded.estimated,
            )
            reading = await self._read(turn)
            plan = self._plan(turn, reading, mode, may_fold=False)
        if cost or attempted:  # a retry of this turn neither folds again nor reports these tokens twice
            self._remember_fold(turn, cost)
        summary = reading.state.summary if plan.send_summary else ""
        if plan.dropped:
            await logger.ainfo(
                f"session_memory_history_trimmed left_out={plan.dropped} reason={plan.dropped_reason} "
                f"summary_sent={bool(summary)} session_id={turn.key.session_id!r}"
            )
        history = [
            *summary_messages(summary, plan.raw),
            *[await _to_message(row) for row in plan.raw],
        ]
        return History(
            messages=history,
            summary=summary,
            folded=cost.folded,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens,
            state=reading.state,
            fold_due=self._fold_due(turn, reading, mode),
            tokens_estimated=cost.estimated,
        )

    def _fold_due(self, turn: Turn, reading: _Reading, mode: Mode) -> bool:
        """Whether a fold should run after this answer: the gap will reach a batch once the answer is stored."""
        return (
            mode is Mode.ROUTINE
            and turn.folds_after_turn
            and not reading.state.is_paused(self.clock())
            and len(reading.gap) + MESSAGES_ADDED_BY_A_TURN >= self.batch_size
        )

    async def _take_unreported_usage(self, state: SessionState) -> _FoldCost:
        """The tokens of folds that ran after earlier answers, taken off the row so no other turn reports them."""
        if not (state.unreported_input_tokens or state.unreported_output_tokens):
            return _FoldCost()
        async with self.sessions() as session:
            taken = await store.take_unreported_usage(session, state)
            await session.commit()
        if not taken:
            return _FoldCost()
        return _FoldCost(input_tokens=state.unreported_input_tokens, output_tokens=state.unreported_output_tokens)

    async def record_call_size(self, key: SessionKey, tokens: int | None) -> None:
        """Keep (or clear) the size of the last model call of this key's turn, for the next early-fold check."""
        async with self.sessions() as session:
            if tokens is not None:
                await store.create_if_absent(session, key)
            await store.record_call_size(session, key, tokens)
            await session.commit()

    def _earlier_fold(self, turn: Turn, mode: Mode) -> _FoldCost | None:
        """What an earlier attempt of this turn (same stored input) folded; a retry does not fold again."""
        if mode is Mode.COMPACT or turn.input_message_id is None:
            return None
        return self._folded_turns.get((turn.key, turn.input_message_id))

    def _remember_fold(self, turn: Turn, cost: _FoldCost) -> None:
        """Note that ``turn`` folded and what it cost: ids and counts only, a bounded number, never text."""
        if turn.input_message_id is None:
            return
        self._folded_turns[(turn.key, turn.input_message_id)] = cost
        while len(self._folded_turns) > REMEMBERED_TURNS:
            self._folded_turns.popitem(last=False)

    def _plan(self, turn: Turn, reading: _Reading, mode: Mode, *, may_fold: bool) -> _TurnPlan:
        """What to send raw and what to fold: the one place that applies the turn rules.

        Routine: the window is sent; the gap is folded in full batches, or sent when fewer
        than a batch remain; when folds run after the turn, the gap is sent up to two
        batches and only a longer backlog is folded here. Background: the gap's full
        batches, nothing else. Near the context window (early fold) or after the provider
        refused the prompt (compaction), the oldest part of the window is folded too (the
        last batch may be partial) and nothing of the gap is sent; window messages the
        summary already covers are then simply not sent. A routine request that would still
        not fit leaves out the gap, then the summary (see :meth:`_fitted`).
        """
        visible = _visible(turn, reading.window)
        state = reading.state
        paused = state.is_paused(self.clock()) or not may_fold
        gap_is_complete = len(reading.gap) < gap_fetch_limit(self.batch_size, self.max_batches)
        batching = {"paused": paused, "batch_size": self.batch_size, "whole_gap": gap_is_complete}
        if mode is Mode.BACKGROUND:
            return _TurnPlan(raw=[], batches=plan_fold(reading.gap, max_batches=self.max_batches, **batching).batches)
        if mode is Mode.COMPACT:
            return self._folding_before(reading, visible, len(visible), COMPACTION_MAX_BATCHES, batching)
        routine = plan_fold(
            reading.gap, max_batches=self.max_batches, folds_after_turn=turn.folds_after_turn, **batching
        )
        near, raw_start = self._early_fold(turn, state, routine.raw_gap, visible)
        unfolded_before = any(not _is_folded(row, state) for row in visible[:raw_start])
        if paused or not near or not (unfolded_before or reading.gap):
            return self._fitted(turn, state, reading.gap, routine, visible, raw_start)
        return self._folding_before(reading, visible, raw_start, self.max_batches, batching)

    def _folding_before(
        self, reading: _Reading, visible: list[MessageTable], raw_start: int, max_batches: int, batching: dict
    ) -> _TurnPlan:
        """Fold everything older than ``visible[raw_start]`` (the last batch may be partial); send the rest."""
        to_fold = [row for row in visible[:raw_start] if not _is_folded(row, reading.state)]
        complete = batching["whole_gap"]
        fold = plan_fold(
            [*reading.gap, *to_fold] if complete else reading.gap, max_batches=max_batches, fold_all=True, **batching
        )
        return _TurnPlan(raw=visible[raw_start:], batches=fold.batches)

    def _fitted(
        self,
        turn: Turn,
        state: SessionState,
        gap: Sequence[MessageTable],
        routine: FoldPlan,
        visible: list[MessageTable],
        raw_start: int,
    ) -> _TurnPlan:
        """A routine request that fits the context window: never beyond the stock Agent's where that fits.

        With the window known, the first of these that fits is sent: the summary, raw gap and
        window (less what the summary covers before ``raw_start``); the same without the gap;
        the stock Agent's own window alone; the summary and the window's newest part from
        ``raw_start``, older messages left out of this turn (a fold could not run for them).
        """
        tail = visible[min(raw_start, _folded_prefix(visible, state)) :]
        newest = visible[raw_start:]
        choices = [(True, routine.raw_gap, tail), (True, (), tail), (False, (), visible), (True, (), newest)]
        send_summary, raw_gap, rows = choices[0]
        if turn.context_window:
            limit = context_size.EARLY_FOLD_RATIO * turn.context_window
            send_summary, raw_gap, rows = next(
                (
                    (send, raw, kept)
                    for send, raw, kept in choices
                    if self._request_tokens(turn, state.summary if send else "", [*raw, *kept]) <= limit
                ),
                choices[-1],
            )
        sent = {row.id for row in rows}
        left_out_of_window = sum(1 for row in visible if row.id not in sent and not _is_folded(row, state))
        left_out_of_gap = len(gap) - sum(len(batch) for batch in routine.batches) - len(raw_gap)
        if left_out_of_window or len(raw_gap) < len(routine.raw_gap):
            reason = "context_window"
        elif state.is_paused(self.clock()):
            reason = "paused"
        else:
            reason = "backlog"
        return _TurnPlan(
            raw=[*raw_gap, *rows],
            batches=routine.batches,
            send_summary=send_summary,
            dropped=left_out_of_gap + left_out_of_window,
            dropped_reason=reason,
        )

    def _request_tokens(self, turn: Turn, summary: str, rows: Sequence[MessageTable]) -> int:
        """The estimated size of the whole request: instructions, tools and input, the notes, the messages."""
        notes = [message.text for message in summary_messages(summary, rows)]
        return turn.fixed_tokens + context_size.estimated_size([*notes, *(row.text for row in rows)])

    def _early_fold(
        self, turn: Turn, state: SessionState, raw_gap: Sequence[MessageTable], visible: list[MessageTable]
    ) -> tuple[bool, int]:
        """Whether the request nears the context window, and where the raw part of the window then starts.

        Near the window, everything older than the window is folded, and the window's oldest
        part too where the rest would still not fit.
        """
        if not turn.context_window or not visible:
            return False, 0
        estimate = self._request_tokens(turn, state.summary, [*raw_gap, *visible])
        # The provider's figure for the last model call is exact but a turn old; the estimate sees a message since.
        size = max(state.last_call_tokens or 0, estimate)
        if size <= context_size.EARLY_FOLD_RATIO * turn.context_window:
            return False, 0
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
        return True, start

    async def _read(self, turn: Turn) -> _Reading:
        """What :meth:`_read_rows` reads, with a summary that may be sent.

        A stored summary that no fold or edit could have written (over a cap, a control
        character: an older version's, or written by hand) is never sent: the row is reset,
        logged, and the session is folded again from its start.
        """
        reading = await self._read_rows(turn)
        problem = _invalid_summary(reading.state.summary)
        if problem is None:
            return reading
        await self._reset(reading.state, reason=f"summary_invalid detail={problem!r}")
        reading = await self._read_rows(turn)
        if _invalid_summary(reading.state.summary) is not None:  # written again since: leave memory out of this turn
            raise summarizer.SummaryRejectedError("stored summary is invalid")
        return reading

    async def _read_rows(self, turn: Turn) -> _Reading:
        """The window (the newest N messages), the state row and the unfolded gap before the window.

        One statement reads the newest N + gap-limit unfolded messages with the row, so a turn
        without a fold costs one round trip like the stock Agent's. A second query runs only
        for a backlog (the gap may be longer than its limit and must start at the cursor),
        when the cursor lies inside the window (the window is then read whatever the
        cursor: an Agent always sends its own N), or when no message follows the cursor
        (the row was not returned).
        """
        gap_limit = gap_fetch_limit(self.batch_size, self.max_batches)
        n = turn.n_messages
        async with self.sessions() as session:
            unfolded, state = await messages.newest_unfolded(session, turn.key, n + gap_limit)
            if state is None:
                state = await store.load(session, turn.key) or SessionState(key=turn.key)
            if len(unfolded) < n and state.cursor is not None:
                return _Reading(window=await messages.newest(session, turn.key, n), state=state, gap=[])
            window, gap = unfolded[-n:], unfolded[:-n]
            if len(gap) == gap_limit:
                gap = await messages.gap(
                    session, turn.key, after=state.cursor, before=messages.cursor_of(window[0]), limit=gap_limit
                )
            return _Reading(window=window, state=state, gap=gap)

    async def _folded_range_changed(self, turn: Turn, state: SessionState) -> bool:
        """Whether messages were added behind the cursor or removed from the folded range.

        Counting grows with the folded part of the session, so it runs only on turns that
        fold (about one in ten): a late message is then folded in at most one batch later,
        never lost. Deletions and edits are handled at once by the cleanup listeners.
        """
        async with self.sessions() as session:
            return await messages.count_through(session, turn.key, state.cursor) != state.folded_count

    async def _reset(self, state: SessionState, reason: str) -> bool:
        """Drop a summary whose folded messages changed, or an invalid one: the session is folded again from its start.

        A compare-and-swap on the row as read: it loses to any change since (another
        worker's fold, an edit, a cleanup listener), and then the row changed anyway.
        """
        empty = SessionState(key=state.key, paused_until=state.paused_until, last_error=state.last_error)
        async with self.sessions() as session:
            won = await store.compare_and_swap(session, state, empty)
            await session.commit()
        if won:
            await logger.awarning(
                f"session_summary_reset reason={reason} folded_count={state.folded_count} "
                f"session_id={state.key.session_id!r}"
            )
        return won

    async def _fold(
        self, turn: Turn, reading: _Reading, batches: Sequence[Sequence[MessageTable]], mode: Mode, llm: BaseChatModel
    ) -> _FoldCost:
        """Claim the session's fold; under the claim, check the folded range and the batches, then fold.

        Without the claim (another worker is folding, or the row moved on since it was
        read) no model is called: a turn that folds inside itself waits for that fold and
        uses its row; a turn whose routine folds run after the answer, and a background
        fold, go on without waiting. Every
        change to the row while the claim holds is this worker's, or a cleanup listener's,
        which makes the fold's compare-and-swap fail.
        """
        state = reading.state
        until = await self._claim(state, mode)
        if until is None:
            if mode is Mode.COMPACT or not turn.folds_after_turn:
                await self._wait_for_fold_elsewhere(state.key, self._longest_wait(mode))
            return _FoldCost()
        try:
            if state.cursor is not None and await self._folded_range_changed(turn, state):
                if not await self._reset(state, reason="folded_range_changed"):
                    return _FoldCost()
                reading = await self._read(turn)
                state, batches = reading.state, self._plan(turn, reading, mode, may_fold=True).batches
            if not batches:
                return _FoldCost()
            if not await self._still_stored(batches):
                await logger.ainfo(
                    f"session_summary_fold_discarded reason=messages_changed session_id={state.key.session_id!r}"
                )
                return _FoldCost()
            return await self._fold_claimed(state, batches, llm, turn, mode)
        finally:
            async with self.sessions() as session:
                await store.release_fold(session, state.key, until)
                await session.commit()

    async def _fold_claimed(
        self,
        state: SessionState,
        batches: Sequence[Sequence[MessageTable]],
        llm: BaseChatModel,
        turn: Turn,
        mode: Mode,
    ) -> _FoldCost:
        cost, seen = _FoldCost(), state
        for batch in batches:
            started = time.perf_counter()
            lines = [summarizer.ChatLine(role=row.sender, text=row.text or "") for row in batch]
            try:
                result = await summarizer.fold(
                    llm,
                    seen.summary,
                    lines,
                    timeout_seconds=self.fold_timeout,
                    provider=turn.provider,
                    context_window=turn.fold_context_window,
                )
                folded = replace(
                    seen,
                    summary=result.summary,
                    cursor=messages.cursor_of(batch[-1]),
                    folded_count=seen.folded_count + len(batch),
                    paused_until=None,
                    last_error=None,
                )
                won, current = await self._commit(seen, folded)
            except Exception as error:  # noqa: BLE001 - any model, validation or write failure pauses folding, never the turn
                await self._pause(seen.key, error, mode, latency_ms=round((time.perf_counter() - started) * 1000))
                return cost
            cost.input_tokens += result.input_tokens
            cost.output_tokens += result.output_tokens
            cost.estimated = cost.estimated or result.estimated
            if not won:
                await self._log_lost(seen, current)
                return cost
            cost.folded += len(batch)
            await logger.ainfo(
                f"session_summary_fold latency_ms={round((time.perf_counter() - started) * 1000)} "
                f"folded={len(batch)} summary_words_before={summarizer.word_count(seen.summary)} "
                f"summary_words_after={summarizer.word_count(result.summary)} version={current.version} "
                f"mode={mode.runs} session_id={seen.key.session_id!r}"
            )
            seen = current
        return cost

    async def _log_lost(self, seen: SessionState, current: SessionState | None) -> None:
        """Another worker's fold won, or a message of the batch changed (the cleanup listener moved the version)."""
        session_id = seen.key.session_id
        if current is not None and current.cursor != seen.cursor:
            await logger.ainfo(
                f"session_summary_lost_race session_id={session_id!r} "
                f"seen_version={seen.version} winner_version={current.version}"
            )
        else:
            await logger.ainfo(f"session_summary_fold_discarded reason=messages_changed session_id={session_id!r}")

    async def _claim(self, state: SessionState, mode: Mode) -> datetime | None:
        """Claim the fold for as long as this mode's model calls may take; None when another worker has it.

        With the claim held, any later delete or edit of the session's messages moves the
        row's version (cleanup listener), so the fold cannot commit.
        """
        now = self.clock()
        batches = COMPACTION_MAX_BATCHES if mode is Mode.COMPACT else self.max_batches
        until = now + timedelta(seconds=self.fold_timeout * batches) + CLAIM_MARGIN
        async with self.sessions() as session:
            if state.version == 0:
                await store.create_if_absent(session, state.key)
            claimed = await store.claim_fold(session, state, until, now, self.longest_claim)
            await session.commit()
        return until if claimed else None

    async def _still_stored(self, batches: Sequence[Sequence[MessageTable]]) -> bool:
        """Whether the batches are still stored as read: a change between this turn's read and its claim."""
        async with self.sessions() as session:
            unchanged = await messages.still_stored(session, [row for batch in batches for row in batch])
            await session.commit()
        return unchanged

    def _longest_wait(self, mode: Mode) -> float:
        """How long a fold inside a turn waits for another worker's: one fold timeout, a compaction a few seconds."""
        return min(self.fold_timeout, COMPACTION_WAIT_SECONDS) if mode is Mode.COMPACT else self.fold_timeout

    async def _wait_for_fold_elsewhere(self, key: SessionKey, longest: float) -> None:
        """Wait while another worker's claim holds, at most ``longest`` seconds; then the turn reads its row.

        A claim still held then (a slow fold, or a dead worker's, which runs out by itself) is logged as such.
        """
        started = time.perf_counter()
        claimed = True
        while claimed and time.perf_counter() - started < longest:
            async with self.sessions() as session:
                current = await store.load(session, key)
            claimed = current is not None and current.is_claimed(self.clock(), self.longest_claim)
            if claimed:
                await asyncio.sleep(CLAIM_POLL_SECONDS)
        await logger.ainfo(
            f"session_summary_fold_elsewhere waited_ms={round((time.perf_counter() - started) * 1000)} "
            f"still_claimed={str(claimed).lower()} session_id={key.session_id!r}"
        )

    async def _commit(self, seen: SessionState, new: SessionState) -> tuple[bool, SessionState | None]:
        """Compare-and-swap ``new`` over ``seen``; returns whether we won and the row as it now is.

        The claim created the row; if it is gone now, its session was deleted while the
        model ran, and the summary of deleted messages must not bring it back.
        """
        async with self.sessions() as session:
            won = await store.compare_and_swap(session, seen, new)
            await session.commit()
            if won:
                return True, replace(new, version=seen.version + 1)
            return False, await store.load(session, seen.key)

    async def _pause(self, key: SessionKey, error: Exception, mode: Mode, *, latency_ms: int) -> None:
        reason = describe(error)
        until = self.clock() + FOLD_PAUSE
        await logger.awarning(
            f"session_summary_fold_failed mode={mode.runs} latency_ms={latency_ms} session_id={key.session_id!r} "
            f"reason={reason!r}"
        )
        async with self.sessions() as session:
            await store.pause(session, key, until, reason)
            await session.commit()
        await logger.awarning(f"session_summary_paused session_id={key.session_id!r} until={until.isoformat()}")


def _folded_prefix(rows: Sequence[MessageTable], state: SessionState) -> int:
    """How many of ``rows`` (ascending) the summary covers: those at or before the cursor."""
    return next((index for index, row in enumerate(rows) if not _is_folded(row, state)), len(rows))


def _invalid_summary(summary: str) -> str | None:
    """Why a stored summary must not be sent (it fails an edit's checks), or None; an empty one is no summary."""
    if not summary:
        return None
    try:
        summarizer.validate_edited_summary(summary)
    except summarizer.SummaryRejectedError as error:
        return str(error)
    return None


def _is_folded(row: MessageTable, state: SessionState) -> bool:
    cursor = state.cursor
    return cursor is not None and (row.timestamp, row.id) <= (cursor.timestamp, cursor.message_id)


def _visible(turn: Turn, window: Sequence[MessageTable]) -> list[MessageTable]:
    """The window as history: the stored input message is sent as the input, not repeated."""
    return [row for row in window if row.id != turn.input_message_id]


def summary_messages(summary: str, following: Sequence[MessageTable]) -> list[Message]:
    """What opens the history: the summary as a user-role message that is never stored.

    Roles alternate from a user message, as strict chat templates (Gemma, Mistral) require:
    when the next message sent is a user message (a stored one, or the current input when
    nothing with text follows), a short assistant acknowledgement follows the notes. Without
    notes, a history whose window starts with an answer opens with a short user-role line
    saying earlier messages are not shown, so the answer is not the first message.
    """
    first = next((row for row in following if (row.text or "").strip()), None)
    if not summary:
        if _sent_as_user(first):
            return []
        return [Message(text=HISTORY_START_NOTE, sender=MESSAGE_SENDER_USER, sender_name=SUMMARY_SENDER_NAME)]
    notes = Message(
        text=SUMMARY_FRAME.format(summary=summary), sender=MESSAGE_SENDER_USER, sender_name=SUMMARY_SENDER_NAME
    )
    if not _sent_as_user(first):
        return [notes]
    ack = Message(text=SUMMARY_ACKNOWLEDGEMENT, sender=MESSAGE_SENDER_AI, sender_name=SUMMARY_SENDER_NAME)
    return [notes, ack]


def _sent_as_user(row: MessageTable | None) -> bool:
    """Whether lfx sends this row as a user message: the user's, or one without a sender (None: the input).

    lfx leaves out rows with blank text, so the caller passes the first row with text.
    """
    return row is None or row.sender in (MESSAGE_SENDER_USER, "", None)


async def _to_message(row: MessageTable) -> Message:
    """The same conversion Langflow's own history query applies to a stored row."""
    return await Message.create(**row.model_dump())
