"""The turn rules: pure functions from what a turn read to what it folds and what it sends raw.

No I/O here, so every rule can be property-tested. :func:`plan_fold` splits the unfolded
messages into batches and a raw tail (messages are anything with ``timestamp`` and ``id``;
order is ``(timestamp, id)`` everywhere); :class:`TurnPlanner` applies it to a
:class:`Reading`: which messages a turn folds first and which it sends raw, whether the
request nears the context window, and what is left out so it fits. Folding itself (what
is stored) is ``folding.runner``'s job; the messages sent are ``assembly``'s.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from langflow.services.database.models.message.model import MessageTable
from lfx.utils.constants import MESSAGE_SENDER_USER

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.assembly import summary_messages
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY, FoldPolicy
from langflow_session_memory.services.session_memory.rules.state import Reading, SessionState
from langflow_session_memory.services.session_memory.rules.turn import Mode, Turn


class Positioned(Protocol):
    timestamp: object
    id: object


T = TypeVar("T", bound=Positioned)


@dataclass(frozen=True)
class FoldPlan(Generic[T]):
    """Batches to fold this turn, oldest first, and the gap messages sent as they are."""

    batches: tuple[tuple[T, ...], ...]
    raw_gap: tuple[T, ...]


def unfolded_tail(gap: Sequence[T], folded: int, limit: int) -> tuple[T, ...]:
    """What of the gap is sent raw once ``folded`` messages are folded: all of it up to ``limit``, else none.

    A longer backlog is left out rather than sent, so the prompt stays bounded; it is
    folded on the next turns.
    """
    remaining = tuple(gap[folded:])
    return remaining if len(remaining) <= limit else ()


def plan_fold(
    gap: Sequence[T],
    *,
    paused: bool,
    policy: FoldPolicy = DEFAULT_POLICY,
    max_batches: int | None = None,
    fold_all: bool = False,
    after_answer: bool = False,
    whole_gap: bool = True,
) -> FoldPlan[T]:
    """Plan a fold of ``gap``: the unfolded messages older than the raw part, ascending, as read.

    Normally ``gap`` holds at most the policy's ``gap_limit`` messages. A turn sends up to its
    ``raw_gap_limit`` of them raw and folds only the excess, in full batches; the fold after
    the answer (``after_answer``) folds every full batch. ``fold_all`` is for a prompt that no
    longer fits the model's context: the last batch may be partial and nothing of the gap is
    sent raw. At most ``max_batches`` (the policy's unless given) either way; none while the
    key is paused.
    ``whole_gap`` is False when the read stopped at its limit: what follows the folded
    batches is then not known to reach the window, so none of it is sent.
    """
    batch_size, limit = policy.batch_size, policy.raw_gap_limit
    if fold_all:
        wanted = math.ceil(len(gap) / batch_size)
    elif after_answer:
        wanted = len(gap) // batch_size
    else:
        wanted = math.ceil(max(len(gap) - limit, 0) / batch_size)
    batch_count = 0 if paused else min(wanted, policy.max_batches if max_batches is None else max_batches)
    batches = tuple(tuple(gap[i * batch_size : (i + 1) * batch_size]) for i in range(batch_count))
    raw_gap = () if fold_all or not whole_gap else unfolded_tail(gap, batch_count * batch_size, limit)
    return FoldPlan(batches=batches, raw_gap=raw_gap)


def raw_window_start(sizes: Sequence[int], opens_turn: Sequence[bool], budget: int) -> int:
    """Where the raw part of the window must start to fit ``budget`` tokens.

    The longest suffix of the window whose sizes fit, moved forward to a message that
    opens a turn (a user message) so the model never sees an answer without its question.
    Returns ``len(sizes)`` when not even the newest turn fits.
    """
    start, total = len(sizes), 0
    for index in range(len(sizes) - 1, -1, -1):
        total += sizes[index]
        if total > budget:
            break
        if opens_turn[index]:
            start = index
    return start


@dataclass(frozen=True)
class EarlyFold:
    """The request neared the context window: its estimated size before, and after folding ``folded_from_window``."""

    size_before: int
    size_after: int
    folded_from_window: int


@dataclass(frozen=True)
class Waiting:
    """The raw messages waiting to be folded beyond the window (the raw gap): how many, their estimated
    tokens, and the budget past which they are folded at once (``FoldPolicy.waiting_budget``)."""

    messages: int
    tokens: int
    budget: int

    @property
    def over(self) -> bool:
        return self.tokens > self.budget


@dataclass(frozen=True)
class TurnPlan:
    """The messages sent raw, the batches to fold first, and whether the summary is sent.

    ``dropped``: unfolded messages older than the window that are neither folded nor sent
    this turn (a paused session's backlog, or a gap left out to fit the window), and why.
    """

    raw: list[MessageTable]
    batches: tuple[tuple[MessageTable, ...], ...]
    send_summary: bool = True
    dropped: int = 0
    dropped_reason: str = ""
    early_fold: EarlyFold | None = None
    waiting: Waiting | None = None


@dataclass(frozen=True)
class TurnPlanner:
    """The turn rules of docs/design.md ("How a turn works"), in one place."""

    clock: Callable[[], datetime]
    policy: FoldPolicy = DEFAULT_POLICY

    def plan(self, turn: Turn, reading: Reading, mode: Mode, *, may_fold: bool) -> TurnPlan:
        """What to send raw and what to fold first.

        A turn sends the window and up to two batches of the gap raw, and folds only a longer
        backlog's excess; after the answer, every full batch of the gap is folded. Near the
        context window (early fold) or after the provider refused the prompt (compaction),
        everything older than the raw part is folded (the last batch may be partial) and
        nothing of the gap is sent. A request that still would not fit is trimmed
        (:meth:`_fitted`).
        """
        visible = _visible(turn, reading.window)
        state = reading.state
        paused = state.is_paused(self.clock()) or not may_fold
        policy = self.policy
        batching = {"paused": paused, "policy": policy, "whole_gap": len(reading.gap) < policy.gap_limit}
        # A turn that waits for the folds on its model server (a one-slot local server) folds a backlog only after
        # its answers, one batch each: the user reads the answer while it folds, and the next turn waits for one
        # fold at most (issue 38: a batch folded inside the turn made each of a backlog's turns a fold slower).
        if mode is Mode.AFTER_ANSWER:
            over = self.waiting(turn, reading.gap).over
            most = 1 if turn.waits_for_folds else policy.max_batches
            fold = plan_fold(reading.gap, after_answer=True, fold_all=over, max_batches=most, **batching)
            return TurnPlan(raw=[], batches=fold.batches)
        if mode is Mode.COMPACT:
            return self._folding_before(reading, visible, len(visible), policy.compaction_max_batches, batching)
        routine = plan_fold(reading.gap, max_batches=0 if turn.waits_for_folds else policy.max_batches, **batching)
        waiting = self.waiting(turn, routine.raw_gap)
        early, raw_start = self._early_fold(turn, state, routine.raw_gap, visible)
        if early is None and waiting.over and not paused:
            plan = self._folding_before(reading, visible, _folded_prefix(visible, state), policy.max_batches, batching)
            return TurnPlan(raw=plan.raw, batches=plan.batches, waiting=waiting)
        unfolded_before = any(not _is_folded(row, state) for row in visible[:raw_start])
        if paused or early is None or not (unfolded_before or reading.gap):
            return self._fitted(turn, state, reading.gap, routine, visible, raw_start, early, waiting)
        plan = self._folding_before(reading, visible, raw_start, policy.max_batches, batching)
        return TurnPlan(raw=plan.raw, batches=plan.batches, early_fold=early, waiting=waiting)

    def waiting(self, turn: Turn, rows: Sequence[MessageTable]) -> Waiting:
        """The raw messages ``rows`` waiting beyond the window, against the turn's budget for them."""
        budget = self.policy.waiting_budget(turn.context_window)
        return Waiting(
            messages=len(rows), tokens=token_estimate.estimated_size(row.text for row in rows), budget=budget
        )

    def fold_due(self, turn: Turn, reading: Reading) -> bool:
        """Whether a fold should run after this answer: the gap reaches a batch, or its budget in tokens,
        once the answer is stored.

        Storing the answer moves the window's oldest message into the gap: one more unfolded
        message than this turn read (none when an early fold already took it).
        """
        if reading.state.is_paused(self.clock()):
            return False
        leaving = [row for row in reading.window[:1] if not _is_folded(row, reading.state)]
        return len(reading.gap) + 1 >= self.policy.batch_size or self.waiting(turn, [*reading.gap, *leaving]).over

    def request_tokens(self, turn: Turn, summary: str, rows: Sequence[MessageTable]) -> int:
        """The estimated size of the whole request: instructions, tools and input, the summary, the messages."""
        opening = [message.text for message in summary_messages(summary, rows)]
        return turn.fixed_tokens + token_estimate.estimated_size([*opening, *(row.text for row in rows)])

    def _folding_before(
        self, reading: Reading, visible: list[MessageTable], raw_start: int, max_batches: int, batching: dict
    ) -> TurnPlan:
        """Fold everything older than ``visible[raw_start]`` (the last batch may be partial); send the rest."""
        to_fold = [row for row in visible[:raw_start] if not _is_folded(row, reading.state)]
        complete = batching["whole_gap"]
        fold = plan_fold(
            [*reading.gap, *to_fold] if complete else reading.gap, max_batches=max_batches, fold_all=True, **batching
        )
        return TurnPlan(raw=visible[raw_start:], batches=fold.batches)

    def _early_fold(
        self, turn: Turn, state: SessionState, raw_gap: Sequence[MessageTable], visible: list[MessageTable]
    ) -> tuple[EarlyFold | None, int]:
        """Whether the request nears the context window, and where the raw part of the window then starts.

        The larger of the provider's figure for the last model call (exact, but a turn old)
        and the estimate of this request (it sees the messages since) is compared with
        the policy's ``early_fold_share`` of the window; the raw part is then cut to fit
        the policy's ``early_fold_target_share`` of it, from a user message.
        """
        if not turn.context_window or not visible:
            return None, 0
        size = max(state.last_call_tokens or 0, self.request_tokens(turn, state.summary, [*raw_gap, *visible]))
        if size <= self.policy.early_fold_share * turn.context_window:
            return None, 0
        budget = int(self.policy.early_fold_target_share * turn.context_window) - turn.fixed_tokens
        start = raw_window_start(
            [token_estimate.estimate_tokens(row.text) for row in visible],
            [row.sender == MESSAGE_SENDER_USER for row in visible],
            budget - self.policy.summary_reserve_tokens,
        )
        size_after = turn.fixed_tokens + token_estimate.estimated_size(row.text for row in visible[start:])
        return EarlyFold(size_before=size, size_after=size_after, folded_from_window=start), start

    def _fitted(
        self,
        turn: Turn,
        state: SessionState,
        gap: Sequence[MessageTable],
        routine: FoldPlan,
        visible: list[MessageTable],
        raw_start: int,
        early: EarlyFold | None,
        waiting: Waiting,
    ) -> TurnPlan:
        """A routine request that fits the context window: never beyond the stock Agent's where that fits.

        With the window known, the first of these that fits is sent: the summary, raw gap and
        window (less what the summary covers before ``raw_start``); the same without the gap;
        the stock Agent's own window alone; the summary and the window's newest part from
        ``raw_start``, older messages left out of this turn (a fold could not run for them).
        A raw gap over its budget in tokens is never sent (it could not be folded: paused).
        """
        tail = visible[min(raw_start, _folded_prefix(visible, state)) :]
        newest = visible[raw_start:]
        with_gap = [] if waiting.over else [(True, routine.raw_gap, tail)]
        choices = [*with_gap, (True, (), tail), (False, (), visible), (True, (), newest)]
        send_summary, raw_gap, rows = choices[0]

        def fits(send: bool, raw, kept) -> bool:
            limit = self.policy.early_fold_share * turn.context_window
            return self.request_tokens(turn, state.summary if send else "", [*raw, *kept]) <= limit

        if turn.context_window:
            send_summary, raw_gap, rows = next((choice for choice in choices if fits(*choice)), choices[-1])
        # The gap left out for its budget alone: it would have fitted the window (or the window is unknown).
        for_budget = waiting.over and (not turn.context_window or fits(True, routine.raw_gap, tail))
        dropped, reason = self._left_out(state, gap, routine, visible, raw_gap, rows, for_budget)
        return TurnPlan(
            raw=[*raw_gap, *rows],
            batches=routine.batches,
            send_summary=send_summary,
            dropped=dropped,
            dropped_reason=reason,
            early_fold=early,
            waiting=waiting,
        )

    def _left_out(self, state, gap, routine: FoldPlan, visible, raw_gap, rows, for_budget: bool) -> tuple[int, str]:
        """How many unfolded messages older than the input this turn neither folds nor sends, and why."""
        sent = {row.id for row in rows}
        left_out_of_window = sum(1 for row in visible if row.id not in sent and not _is_folded(row, state))
        left_out_of_gap = len(gap) - sum(len(batch) for batch in routine.batches) - len(raw_gap)
        if for_budget:
            reason = "waiting_tokens"
        elif left_out_of_window or len(raw_gap) < len(routine.raw_gap):
            reason = "context_window"
        elif state.is_paused(self.clock()):
            reason = "paused"
        else:
            reason = "backlog"
        return left_out_of_gap + left_out_of_window, reason


def _folded_prefix(rows: Sequence[MessageTable], state: SessionState) -> int:
    """How many of ``rows`` (ascending) the summary covers: those at or before the cursor."""
    return next((index for index, row in enumerate(rows) if not _is_folded(row, state)), len(rows))


def _is_folded(row: MessageTable, state: SessionState) -> bool:
    cursor = state.cursor
    return cursor is not None and (row.timestamp, row.id) <= (cursor.timestamp, cursor.message_id)


def _visible(turn: Turn, window: Sequence[MessageTable]) -> list[MessageTable]:
    """The window as history: the stored input message is sent as the input, not repeated."""
    return [row for row in window if row.id != turn.input_message_id]
