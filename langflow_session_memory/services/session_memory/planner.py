"""The fold plan: a pure function from the messages a turn sees to what it folds and sends.

No I/O here, so every rule can be property-tested. Messages are anything with
``timestamp`` and ``id``; order is ``(timestamp, id)`` everywhere.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

FOLD_BATCH_SIZE = 20
MAX_BATCHES_PER_TURN = 3
RAW_GAP_BATCHES = 2


class Positioned(Protocol):
    timestamp: object
    id: object


T = TypeVar("T", bound=Positioned)


def position(message: Positioned) -> tuple:
    return (message.timestamp, message.id)


def gap_fetch_limit(batch_size: int = FOLD_BATCH_SIZE, max_batches: int = MAX_BATCHES_PER_TURN) -> int:
    """Rows of the gap a turn reads: every batch it may fold plus one more batch.

    Reading one batch beyond what can be folded is what tells "fewer than B remain"
    (send them raw) from "a backlog remains" (fold it on later turns), without ever
    counting the whole backlog.
    """
    return max_batches * batch_size + batch_size


@dataclass(frozen=True)
class FoldPlan(Generic[T]):
    """Batches to fold this turn, oldest first, and the gap messages sent as they are."""

    batches: tuple[tuple[T, ...], ...]
    raw_gap: tuple[T, ...]


def raw_gap_limit(batch_size: int = FOLD_BATCH_SIZE) -> int:
    """The most unfolded gap messages a prompt may hold: :data:`RAW_GAP_BATCHES` batches.

    Folds run after the answer, so a turn sends what has not been folded yet rather than
    wait for a fold; beyond this a backlog is folded inside the turn (only the excess).
    """
    return RAW_GAP_BATCHES * batch_size


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
    batch_size: int = FOLD_BATCH_SIZE,
    max_batches: int = MAX_BATCHES_PER_TURN,
    fold_all: bool = False,
    after_answer: bool = False,
    whole_gap: bool = True,
) -> FoldPlan[T]:
    """Plan a fold of ``gap``: the unfolded messages older than the raw part, ascending, as read.

    Normally ``gap`` holds at most :func:`gap_fetch_limit` messages. A turn sends up to
    :func:`raw_gap_limit` of them raw and folds only the excess, in full batches; the fold
    after the answer (``after_answer``) folds every full batch. ``fold_all`` is for a prompt
    that no longer fits the model's context: the last batch may be partial and nothing of
    the gap is sent raw. At most ``max_batches`` either way; none while the key is paused.
    ``whole_gap`` is False when the read stopped at its limit: what follows the folded
    batches is then not known to reach the window, so none of it is sent.
    """
    limit = raw_gap_limit(batch_size)
    if fold_all:
        wanted = math.ceil(len(gap) / batch_size)
    elif after_answer:
        wanted = len(gap) // batch_size
    else:
        wanted = math.ceil(max(len(gap) - limit, 0) / batch_size)
    batch_count = 0 if paused else min(wanted, max_batches)
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
