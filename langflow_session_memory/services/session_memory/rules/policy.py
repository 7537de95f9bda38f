"""How folding goes, in one value: the batch, how many batches a turn may fold, what waits unfolded, how long
a fold may take, how long folding pauses after a failure, and when a turn near the window folds early.

Built once from the operator's settings (``settings.fold_policy``) and handed to the service, which
gives it to the planner and the fold runner; the component's info text reads the default. Changing
the batch size is one line here, and the tests read it from here too.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

FOLD_PAUSE = timedelta(minutes=10)
CLAIM_MARGIN = timedelta(seconds=5)

T = TypeVar("T")


@dataclass(frozen=True)
class FoldPolicy:
    """``batch_size`` messages are folded at a time; a turn (or the fold after its answer) folds at most
    ``max_batches``, a compaction ``compaction_max_batches``; a turn sends at most ``raw_gap_batches``
    batches of unfolded messages raw. On a self-hosted server a fold after an answer folds one batch after
    another while no turn waits, at most ``idle_batches``. Each batch must fold within
    ``fold_timeout_seconds``; a failure pauses folding for the session for ``pause``. A turn whose request
    would pass ``early_fold_share`` of the known window folds first. Raw messages waiting beyond the window
    fold at once past ``waiting_tokens`` (the operator's), else ``waiting_share`` of the known window, else
    ``unknown_window_waiting_tokens``."""

    batch_size: int = 20
    max_batches: int = 3
    raw_gap_batches: int = 2
    compaction_max_batches: int = 10
    idle_batches: int = 20
    fold_timeout_seconds: float = 60.0
    pause: timedelta = FOLD_PAUSE
    early_fold_share: float = 0.8
    waiting_tokens: int | None = None
    waiting_share: float = 0.25
    unknown_window_waiting_tokens: int = 16_000

    @property
    def gap_limit(self) -> int:
        """Rows of the gap a turn reads: every batch it may fold plus one more batch.

        Reading one batch beyond what can be folded is what tells "fewer than a batch remain"
        (send them raw) from "a backlog remains" (fold it on later turns), without ever
        counting the whole backlog.
        """
        return self.max_batches * self.batch_size + self.batch_size

    @property
    def raw_gap_limit(self) -> int:
        """The most unfolded gap messages a prompt may hold.

        Folds run after the answer, so a turn sends what has not been folded yet rather than
        wait for a fold; beyond this a backlog is folded inside the turn (only the excess).
        """
        return self.raw_gap_batches * self.batch_size

    def claim(self, batches: int) -> timedelta:
        """How long a fold of ``batches`` batches may hold the session's claim: one timeout each, and a margin."""
        return timedelta(seconds=self.fold_timeout_seconds * batches) + CLAIM_MARGIN

    @property
    def longest_claim(self) -> timedelta:
        """The longest claim a worker can legitimately hold: a compaction's batches."""
        return self.claim(self.compaction_max_batches)

    def requests(self, batches: Sequence[Sequence[T]], limit: int | None, most: int) -> list[tuple[T, ...]]:
        """The planned batches as fold requests of at most ``limit`` messages each (a session's
        ``fold_batch_limit`` after a refused fold; None: whole batches), oldest first, at most ``most`` of
        them: a fold's claim covers one fold timeout per request."""
        size = min(limit or self.batch_size, self.batch_size)
        pieces = [tuple(batch[i : i + size]) for batch in batches for i in range(0, len(batch), size)]
        return pieces[:most]

    def limit_after_refusal(self, refused: int) -> int:
        """Messages per request after a request of ``refused`` messages was refused: half, at least one,
        so the attempt after the pause never asks the same as the one refused (temperature 0 answers alike)."""
        return max(refused // 2, 1)

    def limit_after_success(self, limit: int | None) -> int | None:
        """Messages per request after one of ``limit`` folded: twice as many, back to whole batches (None)."""
        if limit is None or limit * 2 >= self.batch_size:
            return None
        return limit * 2

    def waiting_budget(self, context_window: int | None) -> int:
        """How many tokens of raw messages may wait beyond the window before they are folded at once."""
        if self.waiting_tokens:
            return self.waiting_tokens
        return int(self.waiting_share * context_window) if context_window else self.unknown_window_waiting_tokens


DEFAULT_POLICY = FoldPolicy()
