"""How folding goes, in one value: the batch, how many batches a turn may fold, what waits unfolded, how long
a fold may take, how long folding pauses after a failure, and when a turn near the window folds early.

Built once from the operator's settings (``settings.fold_policy``) and handed to the service, which
gives it to the planner and the fold runner; the component's info text reads the default. Changing
the batch size is one line here, and the tests read it from here too.
"""

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import TypeVar

T = TypeVar("T")


def _setting(default, meaning: str):
    """A field of the policy with what it means, for the docs' table (:func:`markdown_table`)."""
    return field(default=default, metadata={"meaning": meaning})


@dataclass(frozen=True)
class FoldPolicy:
    """How folding goes; the operator's settings replace their defaults (``settings.fold_policy``)."""

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
        timedelta(minutes=10), "how long folding pauses for a session after a failed fold"
    )
    claim_margin_seconds: float = _setting(
        5.0, "what a fold's claim holds beyond its timeouts, for the commit after the model answered"
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
        return timedelta(seconds=self.fold_timeout_seconds * batches + self.claim_margin_seconds)

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

    def waiting_budget(self, context_window: int | None) -> int:
        """How many tokens of raw messages may wait beyond the window before they are folded at once."""
        if self.waiting_tokens:
            return self.waiting_tokens
        return int(self.waiting_share * context_window) if context_window else self.unknown_window_waiting_tokens


DEFAULT_POLICY = FoldPolicy()


@dataclass(frozen=True)
class RetrievalPolicy:
    """How what was said is found and quoted: the full-text index, the question's words, BM25, the passages, and the
    words search used while the index is behind (measured in docs/eval.md and docs/switch.md)."""

    query_words: int = _setting(12, "words of a question read, filler and stop words out, before the rarest are kept")
    most_terms: int = _setting(6, "a question's rarest words searched in the full-text index")
    indexed_per_word: int = _setting(
        200, "newest indexed messages the engine returns per word; a word found in as many weighs little anyway"
    )
    bm25_k1: float = _setting(1.2, "BM25's term saturation (Robertson's; Lucene's and FTS5's default)")
    bm25_b: float = _setting(0.75, "BM25's length normalisation (the usual default)")
    most_hits: int = _setting(5, "best messages a turn quotes, each with the message said before and after it")
    indexed_counted: int = _setting(
        2_000,
        "newest indexed messages counted for BM25's document count and mean length (a bounded count: 10,000 took "
        "47 ms of PostgreSQL's 50 on a 100,000-message chat)",
    )
    min_share_of_best: float = _setting(
        0.3,
        "share of the best score a hit needs to be quoted beside it (under it, it holds the question's common words "
        "only: a distractor a small model answers from)",
    )
    passage_tokens: int = _setting(600, "tokens a turn's passages take at most (a twelfth of a known window, if less)")
    indexed_characters: int = _setting(
        8_000, "characters of a message indexed and searched (a pasted log is found by its start)"
    )
    index_batch: int = _setting(500, "messages indexed per transaction after an answer")
    index_batches: int = _setting(
        100,
        "batches indexed after one answer (a session switched on late with 100,000 messages is indexed over its "
        "first answer or two)",
    )
    index_attempts: int = _setting(3, "tries of one batch the database refused (SQLite: a snapshot gone stale)")
    index_retry_seconds: float = _setting(0.05, "wait before the next try, times the try's number")
    read_characters: int = _setting(
        4_000, "characters read of each message a word finds (an excerpt shows a few hundred around its words)"
    )
    excerpt_characters: int = _setting(300, "characters of an older message quoted around its words")
    max_query_characters: int = _setting(
        1_000, "characters of a question or a search tool's query read (the model writes the query)"
    )
    max_keyword_characters: int = _setting(
        64, "characters a searched word is cut to (its start still matches every message holding it)"
    )
    max_pattern_characters: int = _setting(
        256,
        "characters of all the words searched together while the index is behind (PostgreSQL compiles them into "
        "one regex; SQLite refuses a LIKE pattern over 50,000 bytes)",
    )
    max_keywords: int = _setting(8, "words of a question or search looked up at most while the index is behind")
    unindexed_per_word: int = _setting(
        50, "older messages read for each word while the index is behind; a word in as many weighs least"
    )
    most_excerpts: int = _setting(3, "older messages a turn quotes while the index is behind, at most")
    excerpt_tokens: int = _setting(300, "tokens those excerpts take at most (a sixteenth of a known window, if less)")
    min_excerpt_score: float = _setting(
        2.0,
        "score under which an older message is not quoted while the index is behind (one word held by at most 7 "
        "older messages: log(1 + 50/7) = 2.1; a word in 8 or more quotes nothing alone)",
    )
    tool_candidates: int = _setting(
        200, "newest messages holding the search tool's words read while the index is behind"
    )
    tool_read_characters: int = _setting(20_000, "characters read of each of those")
    tool_results: int = _setting(5, "messages the search tool answers with while the index is behind, at most")


@dataclass(frozen=True)
class EmbeddingPolicy:
    """How an Embedding Model connected to the Agent adds the older messages a question means (calibrated on the
    chatty session of ``benchmarks.chatty`` with all-MiniLM-L6-v2: docs/switch.md)."""

    pool: int = _setting(
        500, "newest older messages the model's vectors rank (a session's first asking turn embeds them)"
    )
    min_pool: int = _setting(20, "older messages a pool needs for its spread to mean something (fewer: words alone)")
    min_standout: float = _setting(
        3.0,
        "deviations above the pool a message's meaning stands to be quoted (the answering message stood 3.9-5.5, "
        "unrelated ones 1.5-2.6)",
    )
    rank_constant: int = _setting(60, "reciprocal rank fusion's constant (Cormack et al., 2009)")
    embedded_characters: int = _setting(1_000, "characters of an older message embedded: its start, as an excerpt")
    batch: int = _setting(64, "messages embedded per call")
    cached_floats: int = _setting(
        8_000_000, "floats of message vectors a process keeps (32 MB: 20,000 vectors of 384 dimensions)"
    )
    timeout_seconds: float = _setting(
        5.0, "one deadline for every embedding call of a turn (`SESSION_MEMORY_EMBEDDING_TIMEOUT_SECONDS`)"
    )
    longest_timeout_seconds: float = _setting(120.0, "the longest deadline an operator may set")


@dataclass(frozen=True)
class SummaryPolicy:
    """What a summary holds, and how a fold asks a model for one within its window."""

    word_limit: int = _setting(300, "words a summary holds at most")
    character_limit: int = _setting(
        4_000, "characters a summary holds at most (300 words take about 2,000; a few huge words must not pass)"
    )
    floor_words: int = _setting(
        100, 'words a summary may always hold, however short the messages it replaces (twenty "ok"s)'
    )
    fact_line_words: int = _setting(15, 'words of one line of "Key facts" at most, as the fold is asked')
    copied_line_words: int = _setting(
        3, "words from which a line that also stands in the instructions is dropped as copied from them"
    )
    message_tokens: int = _setting(
        1_000, "estimated tokens of one message a fold request shows at most, its head and tail (a pasted log)"
    )
    smallest_clip_tokens: int = _setting(50, "a lone message refused as too long is halved down to no less")
    line_overhead_tokens: int = _setting(4, 'tokens of a transcript line\'s framing ("User: " and the line break)')
    request_share: float = _setting(
        0.75, "share of a known window, less the fold's output, a fold request takes (real tokenizers count more)"
    )
    min_output_tokens: int = _setting(512, "on a known window a fold writes at most a quarter of it, and at least this")
    min_transcript_tokens: int = _setting(
        100, "transcript tokens a fold request holds at least, however small the window"
    )
    output_tokens: int = _setting(1_024, "a fold's output budget (300 words are about 400-500 tokens in English)")
    reasoning_output_tokens: int = _setting(
        8_192, "a fold's output budget on a model that reasons first (its reasoning spends the same budget)"
    )
    stream_characters_per_token: int = _setting(
        5, "characters per token of the budget after which reading a streamed answer stops"
    )


@dataclass(frozen=True)
class CallFitPolicy:
    """How the Agent's requests are sized, and fitted to the window after a tool ran or a refusal."""

    fit_ratio: float = _setting(
        0.9, "share of the window above which a model call after a tool is reduced (the rest is its answer's)"
    )
    retry_shrink: float = _setting(
        0.5, "share of its estimate a refused call is retried at, where the estimate was inside the limit"
    )
    min_clipped_tokens: int = _setting(200, "tokens a clipped tool result keeps at least")
    tool_result_share: float = _setting(
        0.1, "share of the window a read tool result may take (`SESSION_MEMORY_TOOL_RESULT_SHARE`)"
    )
    max_indent: int = _setting(16, "leading spaces of a line a compacted tool result keeps: four levels of code")
    clip_head_share: float = _setting(
        0.75, "of what a clipped text keeps, the part from its start (the tail holds a log's summary line)"
    )
    empty_stream_overflow_ratio: float = _setting(
        0.5, "share of a known window above which an empty stream is read as a prompt too long"
    )
    built_in_tool_tokens: int = _setting(
        90, "tokens counted for each of Langflow's date and calculator tools (their schemas measured 78 and 82)"
    )
    letters_per_token: int = _setting(7, "the token estimate: ASCII letters of a word one token holds")
    marks_per_token: int = _setting(3, "the token estimate: punctuation marks in a row one token holds")
    spaces_per_token: int = _setting(
        48, "the token estimate: spaces in a row one token holds (Gemma 3's hold 31, Qwen2.5's and OpenAI's 128)"
    )


@dataclass(frozen=True)
class Bounds:
    """How much one process, statement or operator setting may take: never a turn's behaviour, only its bounds."""

    background_folds: int = _setting(16, "folds after answers running at once in one process")
    shutdown_grace_seconds: float = _setting(5.0, "how long a stopping process waits for its folds after answers")
    claim_poll_seconds: float = _setting(0.1, "how often a turn looks whether another worker's fold let go")
    compaction_wait_seconds: float = _setting(
        5.0,
        "how long a turn refused as too long waits for another worker's fold before it compacts (its user waits "
        "already; a dead worker's claim holds minutes)",
    )
    remembered_turns: int = _setting(1_024, "turns a process remembers having folded for, so a retry folds no more")
    keys_per_statement: int = _setting(200, "flows or chats one cleanup statement names at most")
    sweep_batch: int = _setting(500, "orphaned rows the sweep deletes per statement")
    list_limit: int = _setting(
        100, "summaries a list shows unless asked for more (the API's `?limit=`, the CLI's `--limit`)"
    )
    longest_fold_timeout_seconds: float = _setting(
        3_600.0, "the longest fold timeout an operator may set (`SESSION_MEMORY_FOLD_TIMEOUT_SECONDS`)"
    )
    largest_waiting_tokens: int = _setting(
        10_000_000, "the largest waiting budget an operator may set (`SESSION_MEMORY_WAITING_TOKENS`)"
    )


RETRIEVAL = RetrievalPolicy()
EMBEDDING = EmbeddingPolicy()
SUMMARY = SummaryPolicy()
CALL_FIT = CallFitPolicy()
BOUNDS = Bounds()


POLICIES = (DEFAULT_POLICY, SUMMARY, RETRIEVAL, EMBEDDING, CALL_FIT, BOUNDS)


def markdown_table(policy=DEFAULT_POLICY) -> str:
    """One policy's table: one row per field, its default and what it means."""
    rows = [
        f"| `{setting.name}` | {_shown(getattr(policy, setting.name))} | {setting.metadata['meaning']} |"
        for setting in fields(policy)
    ]
    return "\n".join(["| setting | default | meaning |", "| --- | ---: | --- |", *rows])


def markdown_tables() -> str:
    """docs/design.md's tables of every policy, each under its name and what it is for."""
    sections = [
        f"`{type(policy).__name__}`: {' '.join(inspect.getdoc(policy).split())}\n\n{markdown_table(policy)}"
        for policy in POLICIES
    ]
    return "\n\n".join(sections)


def _shown(value) -> str:
    if isinstance(value, timedelta):
        return f"{value.total_seconds() / 60:g} minutes"
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:,g}"


if __name__ == "__main__":
    print(markdown_tables())  # noqa: T201
