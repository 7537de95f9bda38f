"""What a question finds in the full-text index: the words searched, how the messages they match rank, and the
passages quoted (each found message with the one said before and after it). Pure: no I/O.

The engine (``storage.search_index``) matches each word stemmed and reports the chat's messages holding it;
here the question's rarest words are kept (:func:`rank`: IDF over the chat, so "Answer in a few words" or a
word every message holds weighs nothing), the messages are scored by BM25 over those words, recency breaking
ties, and the best few are quoted with their neighbours inside a token budget (:func:`passages`), because the
answer is often the next message ("For walking or running?" "These are for running."). Measured on a public
long conversation (docs/eval.md, "A real long conversation").
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.recall import STOP_WORDS, WORD, Excerpt, asks, excerpt
from langflow_session_memory.services.session_memory.rules.state import Cursor

# Words a question about the conversation is made of that name nothing said in it ("Answer in a few words from our
# conversation: what did I say about ...?"): never searched, however rare they are in the chat.
_FILLER_TEXT = """again ago answer asked brief briefly chat conversation conversations discuss discussed ever exactly
few mention mentioned message messages please previously recall remember remind said say says short talk talked
talking tell told word words"""
FILLER_WORDS = frozenset(_FILLER_TEXT.split()) | STOP_WORDS
# Who the index says wrote a fact line the notes' word limit took (``storage.search_index.keep_dropped_facts``).
NOTES_SENDER = "Notes"


class Said(Protocol):
    """A stored message as a quote needs it (``search_index.Indexed``, ``messages.Candidate``)."""

    message_id: object
    timestamp: datetime
    sender: str
    sender_name: str
    text: str


class Found(Said, Protocol):
    """An indexed message a word matched, with its length in words."""

    words: int


def passage_budget(context_window: int | None) -> int:
    """The tokens a turn's passages may take: ``RETRIEVAL.passage_tokens``, and no more than a twelfth of a known
    window (170 of a small local model's 2,048)."""
    return min(RETRIEVAL.passage_tokens, context_window // 12) if context_window else RETRIEVAL.passage_tokens


def tool_budget(context_window: int | None) -> int:
    """The tokens the search tool's answer may take: twice a turn's passages (it is asked for), within the window."""
    return 2 * passage_budget(context_window)


def room_for_passages(message: str, context_window: int | None) -> int:
    """The tokens a turn keeps for the passages it may quote inside the fit of its request: their budget when its
    message asks something (:func:`recall.asks`), else none."""
    return passage_budget(context_window) if asks(message) else 0


def word_count(text: str) -> int:
    """The words of ``text`` as the query counts them: BM25's document length."""
    return len(WORD.findall(text))


def query_words(question: str) -> tuple[str, ...]:
    """The question's words worth searching, lower-case, in order, without repeats, filler or stop words.

    IDs keep their inner punctuation (``PRJ-123``). Only the first ``RETRIEVAL.max_query_characters`` are read,
    each word is cut to ``RETRIEVAL.max_keyword_characters``, and at most ``RETRIEVAL.query_words`` are kept;
    which of them are searched is decided by how rare each is in the chat (:func:`rank`).
    """
    found: list[str] = []
    for word in WORD.findall(question[: RETRIEVAL.max_query_characters].lower()):
        word = word[: RETRIEVAL.max_keyword_characters]
        if word in FILLER_WORDS or (len(word) == 1 and not word.isdigit()) or word in found:
            continue
        found.append(word)
        if len(found) == RETRIEVAL.query_words:
            break
    return tuple(found)


def idf(matched: int, messages: int) -> float:
    """BM25's inverse document frequency of a word ``matched`` messages of ``messages`` hold; never negative."""
    return math.log1p((messages - matched + 0.5) / (matched + 0.5))


def rarest(
    found: Mapping[str, Sequence[Found]], most: int = RETRIEVAL.most_terms, per_word: int = RETRIEVAL.indexed_per_word
) -> list[str]:
    """The ``most`` words that matched fewest messages (at least one), in the question's order among equals; a word
    whose matches are another's (two forms of one stem) counts once. A word that filled its ``per_word`` matches
    is left out beside one that did not: how many more it holds is unknown, and counted as ``per_word`` its weight
    would pass a rare word's (on a 100,000-message chat, four such words hid the message a rare one found)."""
    matched = [word for word, rows in found.items() if rows]
    if any(len(found[word]) < per_word for word in matched):
        matched = [word for word in matched if len(found[word]) < per_word]
    seen: set[frozenset] = set()
    kept = []
    for word in sorted(matched, key=lambda word: len(found[word])):
        matches = frozenset(row.message_id for row in found[word])
        if matches not in seen:
            seen.add(matches)
            kept.append(word)
    return kept[:most]


@dataclass(frozen=True)
class Scored:
    """A message the search found, and its BM25 score over the words searched."""

    found: Found
    score: float


def rank(
    found: Mapping[str, Sequence[Found]], *, messages: int, average_words: float, most_terms: int = RETRIEVAL.most_terms
) -> list[Scored]:
    """The messages the rarest words matched, best BM25 score first, the newer first among equals, down to
    ``RETRIEVAL.min_share_of_best`` of the best score.

    ``messages`` and ``average_words`` describe the chat's indexed messages (the document count and mean length);
    a word counts once per message (messages are short: its repeats say little).
    """
    terms = rarest(found, most_terms)
    documents = max(messages, *(len(found[word]) for word in terms), 1) if terms else 1
    average = average_words or 1.0
    k1, b = RETRIEVAL.bm25_k1, RETRIEVAL.bm25_b
    rows: dict[object, Found] = {}
    scores: dict[object, float] = {}
    for word in terms:
        weight = idf(len(found[word]), documents)
        for row in found[word]:
            rows[row.message_id] = row
            length = k1 * (1 - b + b * row.words / average)
            scores[row.message_id] = scores.get(row.message_id, 0.0) + weight * (k1 + 1) / (1 + length)
    ordered = sorted(scores, key=lambda message_id: (scores[message_id], rows[message_id].timestamp), reverse=True)
    floor = RETRIEVAL.min_share_of_best * scores[ordered[0]] if ordered else 0.0
    return [
        Scored(found=rows[message_id], score=round(scores[message_id], 3))
        for message_id in ordered
        if scores[message_id] >= floor
    ]


def _position(said: Said) -> Cursor:
    return Cursor(timestamp=said.timestamp, message_id=said.message_id)


def _quote(said: Said, words: Sequence[str], score: float, characters: int) -> Excerpt:
    return Excerpt(
        sender=said.sender,
        sender_name=said.sender_name,
        timestamp=said.timestamp,
        text=excerpt(said.text, words, characters),
        score=score,
        message_id=said.message_id,
    )


def passages(
    hits: Sequence[Scored],
    neighbours: Mapping[Cursor, tuple[Said | None, Said | None]],
    *,
    before: Cursor,
    words: Sequence[str],
    most: int = RETRIEVAL.most_hits,
    tokens: int = RETRIEVAL.passage_tokens,
    characters: int = RETRIEVAL.excerpt_characters,
) -> list[Excerpt]:
    """The best ``most`` hits, each with the message before and after it (those older than ``before``, the window's
    oldest: a newer one is sent anyway), a message quoted once however many passages hold it, so adjacent passages
    merge; at most ``tokens`` in all (a hit whose neighbours do not fit comes alone), oldest first as said."""
    chosen: dict[object, Excerpt] = {}
    spent = 0
    for hit in hits[:most]:
        earlier, later = neighbours.get(_position(hit.found), (None, None))
        context = [
            _quote(said, words, 0.0, characters)
            for said in (earlier, later)
            if said is not None and said.message_id not in chosen and _earlier(_position(said), before)
        ]
        if hit.found.message_id in chosen:  # quoted already as a neighbour: now a hit, its own neighbours added
            chosen[hit.found.message_id] = replace(chosen[hit.found.message_id], score=hit.score)
            choices = [context]
        else:
            quoted = _quote(hit.found, words, hit.score, characters)
            choices = [[*context, quoted], [quoted]]
        for lines in choices:
            size = token_estimate.estimated_size(line.text for line in lines)
            if spent + size <= tokens:
                chosen.update((line.message_id, line) for line in lines)
                spent += size
                break
    return sorted(chosen.values(), key=lambda line: (line.timestamp, str(line.message_id)))


def _earlier(position: Cursor, than: Cursor) -> bool:
    return (position.timestamp, position.message_id) < (than.timestamp, than.message_id)
