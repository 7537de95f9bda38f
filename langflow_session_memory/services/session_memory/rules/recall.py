"""Finding what a turn's message refers to among a session's older messages: the pure part.

The user's words that neither the summary nor the messages sent hold (:func:`unheld`), each
word's weight by how rare it is among the older messages (:func:`word_weights`: a word found in
few messages outweighs one found in hundreds), and the few best excerpts above a calibrated score
(:func:`best_excerpts`). No I/O: the database finds the candidates
(``messages.older_matching_each``), the service puts the excerpts in the turn's request, and the
search tool, while the full-text index is behind, ranks its own with the same words (:func:`rank`).
"""

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from langflow_session_memory.services.session_memory.rules import meaning, token_estimate
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL

ELLIPSIS = "…"
# Words a recall question is made of that would match almost every message.
_STOP_WORDS_TEXT = """a about after again all also am an and any are as at be been before but by can could did do does
earlier for from had has have he her him his how i if in into is it its just me mentioned my no not of on or our
said say she so some than that the their them then there these they this to told up us was we were what when where
which who whom why will with would you your"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
# A word as a query and an index count it: IDs keep their inner punctuation (``PRJ-123``, ``v2.1``).
WORD = re.compile(r"\w+(?:[-.'/:]\w+)*")


def keywords(query: str) -> tuple[str, ...]:
    """The query's distinctive words, lower-case, in order, without repeats or stop words.

    IDs keep their inner punctuation (``PRJ-123``, ``v2.1``) so they match as written. Only
    the query's first ``RETRIEVAL.max_query_characters`` are read, each word is cut to
    ``RETRIEVAL.max_keyword_characters``, and together they hold at most ``RETRIEVAL.max_pattern_characters``.
    """
    found: list[str] = []
    budget = RETRIEVAL.max_pattern_characters
    for word in WORD.findall(query[: RETRIEVAL.max_query_characters].lower()):
        word = word[: RETRIEVAL.max_keyword_characters]
        if word in STOP_WORDS or (len(word) == 1 and not word.isdigit()) or word in found:
            continue
        if len(word) > budget or len(found) == RETRIEVAL.max_keywords:
            break
        found.append(word)
        budget -= len(word)
    return tuple(found)


def excerpt(text: str, words: Sequence[str], limit: int = RETRIEVAL.excerpt_characters) -> str:
    """At most ``limit`` characters of ``text``, around its first keyword, marked where clipped."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    lowered = flat.lower()
    first_hit = min((index for index in (lowered.find(word) for word in words) if index >= 0), default=0)
    start = max(0, min(first_hit - limit // 3, len(flat) - limit))
    end = start + limit
    # Each ellipsis takes one of the ``limit`` characters.
    if start > 0:
        start += 1
    if end < len(flat):
        end -= 1
    return f"{ELLIPSIS if start else ''}{flat[start:end]}{ELLIPSIS if end < len(flat) else ''}"


def excerpt_budget(context_window: int | None) -> int:
    """The tokens a turn's excerpts may take: ``RETRIEVAL.excerpt_tokens``, and no more than a sixteenth of a known
    window (128 of a small local model's 2,048)."""
    return min(RETRIEVAL.excerpt_tokens, context_window // 16) if context_window else RETRIEVAL.excerpt_tokens


class Found(Protocol):
    """A stored message a keyword found (``messages.Candidate``)."""

    message_id: object
    timestamp: datetime
    sender: str
    sender_name: str
    text: str


@dataclass(frozen=True)
class Excerpt:
    """An older message quoted in a turn's request: who said it, when, the part around its words, its words'
    score, how far its meaning stood out (None: found by its words alone), the speaker's stored name and the
    message's id (a passage of the full-text index quotes a message once)."""

    sender: str
    timestamp: datetime
    text: str
    score: float
    standout: float | None = None
    sender_name: str = ""
    message_id: object = None


# How a message that asks about something starts, when it has no question mark ("Remind me of the code").
_ASKING_TEXT = """who whom whose what when where which why how do does did is are was were can could remind recall
remember tell"""
_ASKING_WORDS = frozenset(_ASKING_TEXT.split())


def asks(message: str) -> bool:
    """Whether a user's message asks something: a question mark, or a question or recall word first.

    Excerpts go only with such a message: the issue's rule is a message that asks about something,
    and a statement quoting older messages would cost its tokens and move the request's cached tail
    every turn (on the bundled server's eval, 89% of the chat's input served from cache fell to 82%).
    """
    if "?" in message:
        return True
    first = WORD.search(message.lower())
    return first is not None and first.group() in _ASKING_WORDS


def word_start(word: str) -> re.Pattern:
    """``word`` where a word starts, any ending after it ("pet" finds "pets", not "carpet")."""
    return re.compile(rf"(?<!\w){re.escape(word)}", re.IGNORECASE)


def unheld(words: Sequence[str], held: Sequence[str]) -> tuple[str, ...]:
    """The ``words`` none of the ``held`` texts (the summary, the messages sent) holds at a word start."""
    patterns = [(word, word_start(word)) for word in words]
    return tuple(word for word, pattern in patterns if not any(pattern.search(text) for text in held))


def word_weights(
    found: Mapping[str, Sequence[Found]], per_word: int = RETRIEVAL.unindexed_per_word
) -> dict[str, float]:
    """Each word's weight, ``log(1 + per_word / messages holding it)``: the fewer older messages hold it, the more
    a message holding it is worth; a word found in ``per_word`` or more weighs ``log 2``."""
    return {word: math.log1p(per_word / len(rows)) for word, rows in found.items() if rows}


def best_excerpts(
    found: Mapping[str, Sequence[Found]],
    *,
    meant: Sequence[tuple[Found, float]] = (),
    most: int = RETRIEVAL.most_excerpts,
    min_score: float = RETRIEVAL.min_excerpt_score,
    tokens: int = RETRIEVAL.excerpt_tokens,
    characters: int = RETRIEVAL.excerpt_characters,
) -> list[Excerpt]:
    """The best messages among those the words found, each scoring at least ``min_score`` (the sum of the
    weights of the words it holds), and those ``meant`` (an embedding model's standouts, best first, with their
    standing), the two rankings fused (:func:`meaning.fused`); at most ``most`` and ``tokens``, oldest first as
    they were said."""
    weights = word_weights(found)
    patterns = {word: word_start(word) for word in weights}
    rows = {row.message_id: row for rows in found.values() for row in rows}
    held_by: dict[object, list[str]] = {}
    scores: dict[object, float] = {}
    for message_id, row in rows.items():
        held = [word for word, pattern in patterns.items() if pattern.search(row.text)]
        score = sum(weights[word] for word in held)
        if score >= min_score:
            held_by[message_id], scores[message_id] = held, score
    by_words = sorted(scores, key=lambda message_id: (scores[message_id], rows[message_id].timestamp), reverse=True)
    standing = {row.message_id: value for row, value in meant}
    for row, _ in meant:
        rows.setdefault(row.message_id, row)
    chosen, spent = [], 0
    for message_id in meaning.fused(by_words, list(standing))[:most]:
        row = rows[message_id]
        text = excerpt(row.text, held_by.get(message_id, ()), characters)
        size = token_estimate.estimate_tokens(text)
        if spent + size > tokens:
            break
        chosen.append(
            Excerpt(
                sender=row.sender,
                timestamp=row.timestamp,
                text=text,
                score=round(scores.get(message_id, 0.0), 2),
                standout=round(standing[message_id], 2) if message_id in standing else None,
            )
        )
        spent += size
    return sorted(chosen, key=lambda chosen_excerpt: chosen_excerpt.timestamp)


@dataclass(frozen=True)
class Match:
    """A message the model is shown: who said it, when, and an excerpt around the first keyword."""

    sender: str
    sender_name: str
    timestamp: datetime
    excerpt: str
    keywords_found: int


def rank(candidates: Sequence[Found], words: Sequence[str]) -> list[Match]:
    """The search tool's best ``RETRIEVAL.tool_results`` candidates while the full-text index is behind: most
    distinct keywords first, newest first among equals.

    ``candidates`` come newest first; the database found each one by at least one keyword,
    so one found past the part of its text that was read still counts one.
    """
    scored = [
        (max(sum(word in candidate.text.lower() for word in words), 1), -position, candidate)
        for position, candidate in enumerate(candidates)
    ]
    scored.sort(key=lambda entry: entry[:2], reverse=True)
    return [
        Match(
            sender=candidate.sender,
            sender_name=candidate.sender_name,
            timestamp=candidate.timestamp,
            excerpt=excerpt(candidate.text, words),
            keywords_found=found,
        )
        for found, _position, candidate in scored[: RETRIEVAL.tool_results]
    ]
