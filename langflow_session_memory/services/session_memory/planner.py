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


def unfolded_tail(gap: Sequence[T], folded: int, batch_size: int = FOLD_BATCH_SIZE) -> tuple[T, ...]:
    """What of the gap is sent raw once ``folded`` messages are folded: all of it if fewer than B, else none.

    A backlog of B or more is left out rather than sent, so the prompt stays bounded; it
    is folded on the next turns.
    """
    remaining = tuple(gap[folded:])
    return remaining if len(remaining) < batch_size else ()


def plan_fold(
    gap: Sequence[T],
    *,
    paused: bool,
    batch_size: int = FOLD_BATCH_SIZE,
    max_batches: int = MAX_BATCHES_PER_TURN,
    fold_all: bool = False,
) -> FoldPlan[T]:
    """Plan one turn for ``gap``: the unfolded messages older than the raw part, ascending, as read.

    Normally ``gap`` holds at most :func:`gap_fetch_limit` messages and only full batches
    are folded. ``fold_all`` is for a prompt that no longer fits the model's context: the
    last batch may be partial and nothing of the gap is sent raw. At most ``max_batches``
    either way; none while the key is paused.
    """
    if fold_all:
        batch_count = 0 if paused else min(math.ceil(len(gap) / batch_size), max_batches)
    else:
        batch_count = 0 if paused else min(len(gap) // batch_size, max_batches)
    batches = tuple(tuple(gap[i * batch_size : (i + 1) * batch_size]) for i in range(batch_count))
    raw_gap = () if fold_all else unfolded_tail(gap, batch_count * batch_size, batch_size)
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
