"""How folding goes, in one value: the batch, how many batches a turn may fold, what waits unfolded, how long
a fold may take, how long folding pauses after a failure, and when a turn near the window folds early.

Built once from the operator's settings (``settings.fold_policy``) and handed to the service, which
gives it to the planner and the fold runner; the component's info text reads the default. Changing
the batch size is one line here, and the tests read it from here too.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import TypeVar

FOLD_PAUSE = timedelta(minutes=10)
CLAIM_MARGIN = timedelta(seconds=5)

T = TypeVar("T")


def _setting(default, meaning: str):
    """A field of the policy with what it means, for the docs' table (:func:`markdown_table`)."""
    return field(default=default, metadata={"meaning": meaning})


@dataclass(frozen=True)
class FoldPolicy:
    """How folding goes, every setting with its meaning (the docs' table is :func:`markdown_table`'s). The
    operator's settings replace their defaults in ``settings.fold_policy``."""

    batch_size: int = _setting(20, "messages folded at a time")
    max_batches: int = _setting(3, "batches a turn, or the fold after its answer, folds at most")
    raw_gap_batches: int = _setting(2, "batches of unfolded messages a turn sends raw beyond its window")
    compaction_max_batches: int = _setting(10, "batches a hard compaction folds at most")
    idle_batches: int = _setting(
        20, "on a self-hosted server, batches folded one after another after an answer while no turn waits"
    )
    fold_timeout_seconds: float = _setting(
        60.0, "how long one batch may take to fold (`SESSION_MEMORY_FOLD_TIMEOUT_SECONDS`)"
    )
    pause: timedelta = _setting(  # noqa: RUF009 - a dataclasses.field; a timedelta is immutable
        FOLD_PAUSE, "how long folding pauses for a session after a failed fold"
    )
    early_fold_share: float = _setting(0.8, "share of the known window above which a turn folds first")
    early_fold_target_share: float = _setting(0.5, "share of the window an early fold cuts the raw part to")
    summary_reserve_tokens: int = _setting(400, "tokens an early fold keeps for the summary (300 words and framing)")
    record_share: float = _setting(
        0.4, "share of the window from which a model call's size is kept for the next turn's early fold"
    )
    waiting_tokens: int | None = _setting(
        None, "tokens of raw messages that may wait beyond the window (`SESSION_MEMORY_WAITING_TOKENS`)"
    )
    waiting_share: float = _setting(0.25, "without `waiting_tokens`: that budget as a share of the known window")
    unknown_window_waiting_tokens: int = _setting(16_000, "without either, and no known window: that budget")

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


def markdown_table(policy: FoldPolicy = DEFAULT_POLICY) -> str:
    """docs/design.md's table of the policy: one row per field, its default and what it means."""
    rows = [
        f"| `{setting.name}` | {_shown(getattr(policy, setting.name))} | {setting.metadata['meaning']} |"
        for setting in fields(policy)
    ]
    return "\n".join(["| setting | default | meaning |", "| --- | ---: | --- |", *rows])


def _shown(value) -> str:
    if isinstance(value, timedelta):
        return f"{value.total_seconds() / 60:g} minutes"
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:g}"


if __name__ == "__main__":
    print(markdown_table())  # noqa: T201
