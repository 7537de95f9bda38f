"""Whether a summary may be stored and sent: the checks a fold's answer and a person's edit pass.

Pure. A model's answer over its word cap first loses "Conversation so far" lines
(:func:`within_word_limit`); what still fails a check raises :class:`SummaryRejectedError`,
whose message holds counts only, and the previous summary stays.
"""

import re
import unicodedata
from collections.abc import Sequence

from langflow_session_memory.services.session_memory.reasons import CountsOnlyError
from langflow_session_memory.services.session_memory.summary.prompt import (
    FACT_QUESTION,
    SECTION_HEADINGS,
    SUMMARY_CHARACTER_LIMIT,
    SUMMARY_INSTRUCTIONS,
    SUMMARY_WORD_LIMIT,
    ChatLine,
)

# A summary may always be this long, however short the messages it replaces: a batch of twenty
# "ok"s gives a summary longer than the batch, and that is no reason to stop folding a session.
SUMMARY_FLOOR_WORDS = 100
_HEADING_WORDS = sum(len(heading.split()) for heading in SECTION_HEADINGS)
# Anchored at the start: an error or a refusal is the whole answer, while a summary may well
# mention "rate limits" or an "internal server error" the users talked about.
_ERROR_TEXT = re.compile(
    r"^\s*(?:error|exception|traceback|internal server error|rate limit"
    r"|I(?:'m| am) (?:sorry|unable)|I can(?:not|'t) (?:help|assist|summari[sz]e))\b",
    re.IGNORECASE,
)
# Control characters but tab and line breaks (PostgreSQL cannot store a NUL); unpaired surrogates (not UTF-8).
_UNSTORABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# A heading line as models write it: "Key facts:", "## Key facts", "**Key Facts:**", "KEY FACTS".
_DECORATION = r"[ \t*_]*"  # spaces, and Markdown bold or italics around a heading
_HEADING_LINE = re.compile(
    rf"^{_DECORATION}(?:#{{1,6}})?{_DECORATION}({'|'.join(SECTION_HEADINGS)}){_DECORATION}:?{_DECORATION}:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CANONICAL_HEADINGS = {heading.lower(): f"{heading}:" for heading in SECTION_HEADINGS}
# A line this long that also stands in the instructions was copied from them, not written from the conversation.
_COPIED_LINE_WORDS = 5


class SummaryRejectedError(CountsOnlyError):
    """The model's answer, or a person's edit, is not usable as a summary; the previous summary stays."""


def word_count(text: str) -> int:
    return len(text.split())


def check_storable(summary: str) -> None:
    """Raise unless ``summary`` can be stored and sent, whoever wrote it (a model, a person, by hand).

    At most :data:`SUMMARY_CHARACTER_LIMIT` characters; no control character other than tab
    and line breaks (PostgreSQL cannot store a NUL) and no unpaired surrogate (not UTF-8);
    and something visible: zero-width characters alone are an empty summary.
    """
    if len(summary) > SUMMARY_CHARACTER_LIMIT:
        raise SummaryRejectedError(
            f"summary has {len(summary)} characters, over the {SUMMARY_CHARACTER_LIMIT}-character cap"
        )
    if unstorable := _UNSTORABLE.search(summary):
        character = unstorable.group()
        kind = "unpaired surrogate" if "\ud800" <= character <= "\udfff" else "control character"
        raise SummaryRejectedError(
            f"summary contains the {kind} U+{ord(character):04X} at position {unstorable.start()}; remove it"
        )
    if all(character.isspace() or unicodedata.category(character) == "Cf" for character in summary):
        raise SummaryRejectedError("empty summary")


def check_size(summary: str) -> int:
    """Raise :class:`SummaryRejectedError` for a summary that is empty, unstorable or over the word cap; its words.

    The checks every summary passes, a person's edit and a model's fold alike.
    """
    if not summary:
        raise SummaryRejectedError("empty summary")
    check_storable(summary)
    words = word_count(summary)
    if words > SUMMARY_WORD_LIMIT:
        raise SummaryRejectedError(f"summary has {words} words, over the {SUMMARY_WORD_LIMIT}-word cap")
    return words


def validate_edited_summary(candidate: str) -> str:
    """A person's summary, checked like a fold's where it applies: not empty, at most the word cap."""
    summary = candidate.strip()
    check_size(summary)
    return summary


def allowed_words(batch: Sequence[ChatLine]) -> int:
    """How many words a fold's answer about ``batch`` may have: the cap, and no more than the batch holds (or the
    floor), headings aside."""
    replaced = sum(word_count(line.text) for line in batch)
    return min(SUMMARY_WORD_LIMIT, max(replaced, SUMMARY_FLOOR_WORDS) + _HEADING_WORDS)


def within_word_limit(summary: str, limit: int) -> tuple[str, int]:
    """A summary over ``limit`` words with "Conversation so far" lines dropped until it fits; and how many went.

    Small models copy the messages into that section line by line (Qwen2.5-Coder 1.5B: 364 words
    for a batch of twenty one-line turns, the same line nine times): a repeat of an earlier line
    goes first, then the oldest lines. "Key facts" is never touched; a summary that still does not
    fit is returned as it is, for the checks to refuse.
    """
    summary = normalized_headings(summary.strip())
    if word_count(summary) <= limit:
        return summary, 0
    lines = summary.splitlines()
    heading = next((i for i, line in enumerate(lines) if line == _CANONICAL_HEADINGS["conversation so far"]), None)
    if heading is None:
        return summary, 0
    head, conversation = lines[: heading + 1], lines[heading + 1 :]
    seen: set[str] = {_plain_words(line) for line in head}
    kept = []
    for line in conversation:
        plain = _plain_words(line)
        if plain and plain in seen:
            continue
        seen.add(plain)
        kept.append(line)
    while kept and word_count("\n".join([*head, *kept])) > limit:
        kept.pop(0)
    shortened = "\n".join([*head, *kept])
    if word_count(shortened) > limit:
        return summary, 0
    return shortened, len(conversation) - len(kept)


def complete_part(cut: str) -> str | None:
    """What of an answer cut short (at the output cap, or by the server) may still be used: its complete lines,
    when they include the "Conversation so far" heading, so the "Key facts" section before it is whole.

    A 1.5B model that copies the transcript under "Conversation so far" runs past any cap; at
    temperature 0 it does so again on every retry of the same request. None when the cut fell
    inside "Key facts": a fact after the cut, or one of the current notes, could be missing.
    """
    lines = normalized_headings(cut).splitlines()
    if not cut.endswith("\n"):
        lines = lines[:-1]  # the line being written when the answer stopped
    heading = _CANONICAL_HEADINGS["conversation so far"]
    if heading not in lines:
        return None
    return "\n".join(lines).strip()


def validate_summary(candidate: str, *, batch: Sequence[ChatLine]) -> str:
    """Return a fold's cleaned answer about ``batch`` (headings in their canonical form), or raise
    :class:`SummaryRejectedError`."""
    summary = normalized_headings(candidate.strip())
    words = check_size(summary)
    if _ERROR_TEXT.search(summary):
        raise SummaryRejectedError("summary looks like an error text")
    if repeats_instructions(summary):
        raise SummaryRejectedError("summary repeats the fold instructions")
    replaced = sum(word_count(line.text) for line in batch)
    if words > max(replaced, SUMMARY_FLOOR_WORDS) + _HEADING_WORDS:
        raise SummaryRejectedError(f"summary has {words} words, more than the {replaced} it replaces")
    missing = [heading for heading in SECTION_HEADINGS if heading.lower() not in summary.lower()]
    if missing:
        raise SummaryRejectedError(f"summary lacks the section(s) {', '.join(missing)}")
    return summary


def normalized_headings(summary: str) -> str:
    """The summary with each section heading written as ``Key facts:`` / ``Conversation so far:``."""
    return _HEADING_LINE.sub(lambda found: _CANONICAL_HEADINGS[found.group(1).lower()], summary)


def repeats_instructions(summary: str) -> bool:
    """Whether the summary copies a line of the fold instructions (a model that parrots its prompt).

    Both headings stand in the instructions, so a parroted prompt has them; its sample
    bullets ("one short line per fact ...") do not belong in any conversation's summary.
    """
    for line in summary.splitlines():
        words = _plain_words(line)
        if len(words.split()) >= _COPIED_LINE_WORDS and f" {words} " in f" {_INSTRUCTION_WORDS} ":
            return True
    return False


def _plain_words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


_INSTRUCTION_WORDS = _plain_words(f"{SUMMARY_INSTRUCTIONS}\n{FACT_QUESTION}")
