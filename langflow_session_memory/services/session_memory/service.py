"""Orchestration of one Agent turn with session memory: read, plan, fold, assemble.

The order of "How a turn works" (docs/design.md) and nothing else: what a turn reads is
``reading``'s, the turn rules ``planner``'s, the history sent ``assembly``'s, folding is
``runner``'s, the tasks of folds after an answer are ``background``'s. Any failure here
degrades to the previous summary or to Langflow's stock history; a turn never fails because
of memory.
"""

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from lfx.log.logger import logger
from lfx.schema.message import Message

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.folding.background import BackgroundFolds
from langflow_session_memory.services.session_memory.folding.runner import FoldRunner
from langflow_session_memory.services.session_memory.retrieval import Retrieval
from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.assembly import history_messages, summary_messages
from langflow_session_memory.services.session_memory.rules.planner import TurnPlan, TurnPlanner, Waiting
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS, SUMMARY, FoldPolicy
from langflow_session_memory.services.session_memory.rules.recall import Excerpt
from langflow_session_memory.services.session_memory.rules.state import Reading, SessionKey, SessionState
from langflow_session_memory.services.session_memory.rules.turn import FoldCost, Mode, SessionFactory, Turn
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.settings import embedding_timeout_seconds, fold_policy
from langflow_session_memory.services.session_memory.storage import store
from langflow_session_memory.services.session_memory.storage.model import utc_now
from langflow_session_memory.services.session_memory.storage.reading import read
from langflow_session_memory.services.session_memory.summary import notes, validation


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

    def with_newest_notes(self, fits: Callable[[str], bool]) -> "History | None":
        """This summary-only history with as many of its newest notes as ``fits`` allows (a 300-word summary on a
        2,048-token window with a pasted message); None when not even the message alone fits."""
        summary = notes.newest_within(self.summary, fits, SUMMARY.word_limit)
        if summary is None:
            return None
        return replace(self, messages=summary_messages(summary, []), summary=summary)


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
        self.retrieval = Retrieval(sessions, embedding_timeout_seconds())

    @property
    def policy(self) -> FoldPolicy:
        return self.planner.policy

    async def build_history(
        self,
        turn: Turn,
        llm: BaseChatModel,
        embedder: Embeddings | None = None,
        on_wait: Callable[[], Awaitable[None]] | None = None,
    ) -> History:
        """The history for ``turn``; folding at most once per turn, even when the Agent retries it. With an
        ``embedder`` (the builder's "Embedding Model"), the excerpts of older messages are also found by meaning.

        Where the turn says so (a self-hosted server), the folds still running on its model
        server are awaited first, at most one fold timeout: the turn then sends the summary they
        wrote (see :meth:`BackgroundFolds.wait_for_server`). ``on_wait`` is awaited when the turn
        does wait, before it waits (the Playground's waiting step); it must not raise.
        """
        if turn.n_messages > 0 and turn.waits_for_folds:
            await self.background.wait_for_server(turn.model_server, self.policy.fold_timeout_seconds, on_wait)
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
            reading, plan = await self._planned(turn, Mode.AFTER_ANSWER, may_fold=True)
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
        reading, plan = await self._planned(turn, mode, may_fold=earlier_fold is None)
        cost = earlier_fold if earlier_fold is not None else await self._take_unreported_usage(reading.state)
        waiting = plan.waiting  # as read before any fold: the step tells why a fold ran early
        await _log_plan(turn, plan)
        attempted = bool(plan.batches)
        if attempted:
            cost = (await self.folds.run(turn, reading.state, plan.batches, mode, llm)).plus_tokens(cost)
            reading, plan = await self._planned(turn, mode, may_fold=False)
        if cost or attempted:  # a retry of this turn neither folds again nor reports these tokens twice
            self._remember_fold(turn, cost)
        summary = reading.state.summary if plan.send_summary else ""
        await _log_trimmed(turn, plan, summary)
        excerpts = await self.retrieval.excerpts(turn, summary, plan.raw, embedder) if mode is Mode.ROUTINE else ()
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

    async def _planned(self, turn: Turn, mode: Mode, *, may_fold: bool) -> tuple[Reading, TurnPlan]:
        """The row and messages as they are now, and the turn rules' plan for them: the one place a turn plans."""
        reading = await self._read(turn)
        return reading, self.planner.plan(turn, reading, mode, may_fold=may_fold)

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
        while len(self._folded_turns) > BOUNDS.remembered_turns:
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
