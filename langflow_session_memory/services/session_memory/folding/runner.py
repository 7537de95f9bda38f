"""Folding what a plan says, safely across workers: claim, check, fold, compare-and-swap, release.

The one fold path: a turn's inline fold (a backlog, an early fold, a compaction) and the
fold after an answer both go through :meth:`FoldRunner.run`. Any failure of a batch (the
model, the validation, the write) keeps the previous summary and pauses folding for the
session, stored in the row so every worker obeys it; it never fails the turn.
"""

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from langchain_core.language_models import BaseChatModel
from langflow.services.database.models.message.model import MessageTable
from lfx.log.logger import logger
from sqlalchemy.exc import DatabaseError

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import retry
from langflow_session_memory.services.session_memory.rules.planner import TurnPlanner
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS, FoldPolicy
from langflow_session_memory.services.session_memory.rules.retry import Refused, Send
from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey, SessionState
from langflow_session_memory.services.session_memory.rules.turn import FoldCost, Mode, SessionFactory, Turn
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.storage import messages, search_index, store
from langflow_session_memory.services.session_memory.storage.reading import read
from langflow_session_memory.services.session_memory.summary import model_call
from langflow_session_memory.services.session_memory.summary.prompt import ChatLine, speaker
from langflow_session_memory.services.session_memory.summary.validation import SummaryRejectedError, word_count

Batches = Sequence[Sequence[MessageTable]]


@dataclass(frozen=True)
class FoldRunner:
    """Runs folds for one process; every worker runs its own on the shared table.

    It plans again with the turn's ``planner`` where the row changed under it (a reset).
    """

    sessions: SessionFactory
    planner: TurnPlanner

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.planner.clock

    @property
    def policy(self) -> FoldPolicy:
        return self.planner.policy

    async def run(self, turn: Turn, state: SessionState, batches: Batches, mode: Mode, llm: BaseChatModel) -> FoldCost:
        """Claim the session's fold; under the claim, check the folded range and the batches, then fold.

        Without the claim (another worker is folding, or the row moved on since it was read)
        no model is called; a compaction waits a few seconds for that fold and uses its row.
        Every change to the row while the claim holds is this worker's, or a cleanup
        listener's, which makes the fold's compare-and-swap fail.
        """
        until = await self._claim(state, mode)
        if until is None:
            if mode is Mode.COMPACT:
                wait = min(self.policy.fold_timeout_seconds, BOUNDS.compaction_wait_seconds)
                await self.wait_for_fold_elsewhere(state.key, wait)
            return FoldCost()
        try:
            if state.cursor is not None and await self._folded_range_changed(turn, state):
                if not await self.reset(state, reason="folded_range_changed"):
                    return FoldCost()
                state, batches = await self._planned_again(turn, mode)
            if not batches:
                return FoldCost()
            if not await self._still_stored(batches):
                await logger.ainfo(
                    f"{log_events.FOLD_DISCARDED} reason=messages_changed session_id={state.key.session_id!r}"
                )
                return FoldCost()
            return await self._fold_batches(state, batches, llm, turn, mode)
        finally:
            async with self.sessions() as session:
                await store.release_fold(session, state.key, until)
                await session.commit()

    async def reset(self, state: SessionState, reason: str) -> bool:
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
                f"{log_events.RESET} reason={reason} folded_count={state.folded_count} "
                f"session_id={state.key.session_id!r}"
            )
        return won

    async def _planned_again(self, turn: Turn, mode: Mode) -> tuple[SessionState, Batches]:
        """The row after a reset (no summary: nothing of it to check) and the batches planned from a fresh read."""
        reading = await read(self.sessions, turn, self.policy.gap_limit)
        return reading.state, self.planner.plan(turn, reading, mode, may_fold=True).batches

    async def wait_for_fold_elsewhere(self, key: SessionKey, longest: float) -> None:
        """Wait while another worker's claim holds, at most ``longest`` seconds; then the turn reads its row.

        A claim still held then (a slow fold, or a dead worker's, which runs out by itself) is logged as such.
        """
        started = time.perf_counter()
        claimed = True
        while claimed and time.perf_counter() - started < longest:
            async with self.sessions() as session:
                current = await store.load(session, key)
            claimed = current is not None and current.is_claimed(self.clock(), self.policy.longest_claim)
            if claimed:
                await asyncio.sleep(BOUNDS.claim_poll_seconds)
        await logger.ainfo(
            f"{log_events.FOLD_ELSEWHERE} waited_ms={round((time.perf_counter() - started) * 1000)} "
            f"still_claimed={str(claimed).lower()} session_id={key.session_id!r}"
        )

    async def _fold_batches(
        self, state: SessionState, batches: Batches, llm: BaseChatModel, turn: Turn, mode: Mode
    ) -> FoldCost:
        """Fold the batches in order, in requests of at most the session's ``fold_batch_limit`` messages, each
        committed on its own; stop at a failure or a lost race.

        A failed request pauses folding; what the fold after the pause asks is ``rules.retry``'s (a refused summary
        or a fold out of time: half its messages, so the attempt after the pause asks something else). A lone
        message whose summary is still refused is passed over with the summary unchanged: no message stalls a
        session (its text stays in the table, where excerpts and the search tool still find it).
        """
        cost, seen, limit = FoldCost(), state, state.fold_batch_limit
        for request in self.policy.requests(batches, limit, most=self._claimed_batches(mode)):
            started, folded = time.perf_counter(), None
            try:
                folded = await self._folded_summary(seen, request, llm, turn, mode, started)
                next_state = _folded(
                    seen, request, folded.summary, retry.limit_after_fold(limit, self.policy.batch_size)
                )
                won, current = await self._commit(seen, next_state, folded.dropped_facts, before=request[0])
            except Exception as error:  # noqa: BLE001 - any model, validation or write failure pauses folding, never the turn
                refused = (
                    Refused.FOLD_SUMMARY if isinstance(error, SummaryRejectedError | TimeoutError) else Refused.FOLD
                )
                then = retry.after(refused, messages=len(request), limit=limit)
                await self._pause(
                    seen.key, error, mode, latency_ms=_milliseconds_since(started), batch_limit=then.limit
                )
                return FoldCost(folded=cost.folded, usage=cost.usage + _spent(folded, error))
            cost = FoldCost(folded=cost.folded, usage=cost.usage + folded.usage)
            if not won:
                await self._log_lost(seen, current)
                return cost
            cost = FoldCost(folded=cost.folded + len(request), usage=cost.usage)
            await logger.ainfo(
                f"{log_events.FOLD} latency_ms={_milliseconds_since(started)} "
                f"folded={len(request)} summary_words_before={word_count(seen.summary)} "
                f"summary_words_after={word_count(folded.summary)} version={current.version} "
                f"mode={mode.runs} session_id={seen.key.session_id!r}"
            )
            seen, limit = current, current.fold_batch_limit
        return cost

    async def _folded_summary(
        self, seen: SessionState, request: Sequence[MessageTable], llm: BaseChatModel, turn: Turn, mode: Mode, started
    ) -> model_call.FoldResult:
        """The summary with ``request`` folded in, its tokens and the facts it dropped; for a lone message whose
        summary the checks refuse or whose fold runs out of time, the summary as it was (logged as
        ``session_summary_fold_skipped``: it is never asked again as it was), unless the server only cut the
        answer's stream (nothing about the message: it is asked again after the pause)."""
        try:
            result = await model_call.fold(
                llm,
                seen.summary,
                [ChatLine(role=speaker(row.sender, row.sender_name), text=row.text or "") for row in request],
                timeout_seconds=self.policy.fold_timeout_seconds,
                provider=turn.provider,
                context_window=turn.fold_context_window,
                tracing=turn.tracing,
            )
        except (SummaryRejectedError, TimeoutError) as error:
            skipped = retry.after(Refused.FOLD_SUMMARY, messages=len(request)).send is Send.SKIP
            if not skipped or isinstance(error, model_call.StreamInterruptedError):
                raise
            reason = await self.log_failure(seen.key, error, mode, latency_ms=_milliseconds_since(started))
            await logger.ainfo(
                f"{log_events.FOLD_SKIPPED} messages=1 reason={reason!r} session_id={seen.key.session_id!r}"
            )
            return model_call.FoldResult(seen.summary, usage=model_call.spent_before(error))
        return result

    async def _claim(self, state: SessionState, mode: Mode) -> datetime | None:
        """Claim the fold for as long as this mode's model calls may take; None when another worker has it.

        With the claim held, any later delete or edit of the session's messages moves the
        row's version (cleanup listener), so the fold cannot commit.
        """
        now = self.clock()
        until = now + self.policy.claim(self._claimed_batches(mode))
        async with self.sessions() as session:
            if state.version == 0:
                await store.create_if_absent(session, state.key)
            claimed = await store.claim_fold(session, state, until, now, self.policy.longest_claim)
            await session.commit()
        return until if claimed else None

    def _claimed_batches(self, mode: Mode) -> int:
        """How many fold requests one claim of this mode covers (one fold timeout each)."""
        return self.policy.compaction_max_batches if mode is Mode.COMPACT else self.policy.max_batches

    async def _folded_range_changed(self, turn: Turn, state: SessionState) -> bool:
        """Whether messages were added behind the cursor or removed from the folded range.

        Counting grows with the folded part of the session, so it runs only on turns that
        fold (about one in ten): a late message is then folded in at most one batch later,
        never lost. Deletions and edits are handled at once by the cleanup listeners.
        """
        async with self.sessions() as session:
            return await messages.count_through(session, turn.key, state.cursor) != state.folded_count

    async def _still_stored(self, batches: Batches) -> bool:
        """Whether the batches are still stored as read: a change between this turn's read and its claim."""
        async with self.sessions() as session:
            unchanged = await messages.still_stored(session, [row for batch in batches for row in batch])
            await session.commit()
        return unchanged

    async def _commit(
        self, seen: SessionState, new: SessionState, dropped_facts: Sequence[str] = (), *, before: MessageTable
    ) -> tuple[bool, SessionState | None]:
        """Compare-and-swap ``new`` over ``seen``, with the facts the new notes dropped kept in the index (found from
        the messages before ``before``, the fold's first); returns whether we won and the row as it now is.

        The claim created the row; if it is gone now, its session was deleted while the
        model ran, and the summary of deleted messages must not bring it back.
        """
        async with self.sessions() as session:
            won = await store.compare_and_swap(session, seen, new)
            if won and dropped_facts:
                await _keep_dropped_facts(session, seen.key, dropped_facts, before=messages.cursor_of(before))
            await session.commit()
            if won:
                return True, replace(new, version=seen.version + 1)
            return False, await store.load(session, seen.key)

    async def _log_lost(self, seen: SessionState, current: SessionState | None) -> None:
        """Another worker's fold won, or a message of the batch changed (the cleanup listener moved the version)."""
        session_id = seen.key.session_id
        if current is not None and current.cursor != seen.cursor:
            await logger.ainfo(
                f"{log_events.LOST_RACE} session_id={session_id!r} "
                f"seen_version={seen.version} winner_version={current.version}"
            )
        else:
            await logger.ainfo(f"{log_events.FOLD_DISCARDED} reason=messages_changed session_id={session_id!r}")

    async def log_failure(self, key: SessionKey, error: BaseException, mode: Mode, *, latency_ms: int) -> str:
        """The one place a failed fold is logged: its mode, how long it took, and its kind (never its text)."""
        reason = describe(error)
        await logger.awarning(
            f"{log_events.FOLD_FAILED} mode={mode.runs} latency_ms={latency_ms} session_id={key.session_id!r} "
            f"reason={reason!r}"
        )
        return reason

    async def _pause(
        self, key: SessionKey, error: Exception, mode: Mode, *, latency_ms: int, batch_limit: int | None
    ) -> None:
        """Pause folding for the session; its next fold requests hold at most ``batch_limit`` messages."""
        reason = await self.log_failure(key, error, mode, latency_ms=latency_ms)
        until = self.clock() + self.policy.pause
        async with self.sessions() as session:
            await store.pause(session, key, until, reason, fold_batch_limit=batch_limit)
            await session.commit()
        await logger.awarning(
            f"{log_events.PAUSED} session_id={key.session_id!r} until={until.isoformat()} "
            f"next_request_messages={batch_limit or self.policy.batch_size}"
        )


def _folded(seen: SessionState, batch: Sequence[MessageTable], summary: str, batch_limit: int | None) -> SessionState:
    """The row after ``batch`` is folded into ``summary``: the cursor on its last message, no pause."""
    return replace(
        seen,
        summary=summary,
        cursor=messages.cursor_of(batch[-1]),
        folded_count=seen.folded_count + len(batch),
        paused_until=None,
        last_error=None,
        fold_batch_limit=batch_limit,
    )


async def _keep_dropped_facts(session, key: SessionKey, facts: Sequence[str], *, before: Cursor) -> None:
    """Keep ``facts`` in the full-text index, in a SAVEPOINT of their own: a missing or broken index never undoes a
    fold (logged)."""
    try:
        async with session.begin_nested():
            sourced = await search_index.keep_dropped_facts(session, key, facts, before=before)
    except DatabaseError as error:
        await logger.aerror(f"{log_events.INDEX_FAILED} where=notes reason={describe(error)}")
        return
    await logger.ainfo(f"{log_events.FACTS_KEPT} facts={len(facts)} sourced={sourced} session_id={key.session_id!r}")


def _spent(folded: model_call.FoldResult | None, error: BaseException) -> TokenUsage:
    """The tokens a failed fold request cost: its answer's when the model answered (the write failed after it),
    else what the fold had spent before it raised (``model_call.spent_before``)."""
    return folded.usage if folded is not None else model_call.spent_before(error)


def _milliseconds_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
