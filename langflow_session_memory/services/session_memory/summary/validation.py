"""Whether a summary may be stored and sent: the checks a fold's answer and a person's edit pass.

Pure. A fold's answer is salvaged line by line (:func:`salvaged`): refused, with
:class:`SummaryRejectedError` (whose message holds counts only; the previous summary stays), only
when it is an error text or nothing usable is left. A person's edit is checked whole
(:func:`validate_edited_summary`).
"""

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from langflow_session_memory.services.session_memory.reasons import CountsOnlyError
from langflow_session_memory.services.session_memory.rules.policy import SUMMARY
from langflow_session_memory.services.session_memory.summary import notes
from langflow_session_memory.services.session_memory.summary.notes import Notes
from langflow_session_memory.services.session_memory.summary.prompt import (
    FACT_QUESTION,
    SECTION_HEADINGS,
    SUMMARY_INSTRUCTIONS,
    ChatLine,
)

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
# Misspelled as small models write them too: "Key fact:", "Facts:", "Conversation:", "Topics:".
_HEADING_NAMES = r"key\s+facts?|facts|conversation(?:\s+so\s+far)?|topics"
_HEADING_LINE = re.compile(
    rf"^{_DECORATION}(?:#{{1,6}})?{_DECORATION}({_HEADING_NAMES}){_DECORATION}:?{_DECORATION}:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CANONICAL_HEADINGS = {heading.lower(): f"{heading}:" for heading in SECTION_HEADINGS}


class SummaryRejectedError(CountsOnlyError):
    """The model's answer, or a person's edit, is not usable as a summary; the previous summary stays."""


def word_count(text: str) -> int:
    return len(text.split())


def check_storable(summary: str) -> None:
    """Raise unless ``summary`` can be stored and sent, whoever wrote it (a model, a person, by hand).

    At most ``SUMMARY.character_limit`` characters; no control character other than tab
    and line breaks (PostgreSQL cannot store a NUL) and no unpaired surrogate (not UTF-8);
    and something visible: zero-width characters alone are an empty summary.
    """
    if len(summary) > SUMMARY.character_limit:
        raise SummaryRejectedError(
            f"summary has {len(summary)} characters, over the {SUMMARY.character_limit}-character cap"
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
    if words > SUMMARY.word_limit:
        raise SummaryRejectedError(f"summary has {words} words, over the {SUMMARY.word_limit}-word cap")
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
    return min(SUMMARY.word_limit, max(replaced, SUMMARY.floor_words) + _HEADING_WORDS)


def complete_part(cut: str) -> str | None:
    """What of an answer cut short (at the output cap, or by the server) may still be used: its complete lines, the
    one being written when it stopped left out; None when no complete line is left."""
    lines = cut.splitlines()
    if not cut.endswith("\n"):
        lines = lines[:-1]
    kept = "\n".join(lines).strip()
    return kept or None


@dataclass(frozen=True)
class Salvaged:
    """A fold's answer made usable line by line: the notes it gives, and what was repaired or left out of it."""

    update: Notes
    repairs: tuple[str, ...] = ()
    lines_dropped: int = 0
    dropped_conversation: int = 0
    dropped_facts: tuple[str, ...] = ()


def salvaged(answer: str, *, batch: Sequence[ChatLine]) -> Salvaged:
    """The usable lines of a fold's answer about ``batch``; raises :class:`SummaryRejectedError` only when the answer
    is an error text or no fact and no topic is left.

    A small model's answer is mostly good facts with a flaw: a line copied from the instructions (dropped),
    one heading missing or misspelled (repaired: lines before any heading are facts; an answer with neither
    is not notes at all), a character no database stores (removed), more words than the batch warrants (cut
    by the notes' own rule, :func:`notes.fitted`: the oldest topics, then the oldest facts, which the fold
    keeps in the index). Refusing it whole paused the session for 10 minutes and asked the same again
    (issue 53).
    """
    text = normalized_headings(answer.strip())
    if not _visible(text):
        raise SummaryRejectedError("empty summary")
    if _ERROR_TEXT.search(text):
        raise SummaryRejectedError("summary looks like an error text")
    repairs = []
    storable = _UNSTORABLE.sub("", text)
    if storable != text:
        repairs.append("unstorable_characters")
    lines = storable.splitlines()
    kept = [line for line in lines if not _copied_from_instructions(line)]
    if len(kept) < len(lines):
        repairs.append("copied_instructions")
    written = notes.parsed("\n".join(kept))
    copied = f"{len(lines) - len(kept)} of {len(lines)} copied from the fold instructions"
    if not any(_visible(line) for line in (*written.facts, *written.conversation)):
        raise SummaryRejectedError(f"summary has no usable line ({copied})")
    # A heading on a line of its own, or with its items after it ("Conversation so far: - work - the band").
    named = {heading for heading in SECTION_HEADINGS for line in kept if _plain_words(line).startswith(heading.lower())}
    if not named:  # not notes at all ("Sure! Here is a poem"): no heading to repair
        raise SummaryRejectedError(f"summary has neither section heading ({copied})")
    if len(named) < len(SECTION_HEADINGS):
        repairs.append("headings_repaired")
    fit = notes.fitted(written, allowed_words(batch), SUMMARY.character_limit)
    return Salvaged(
        update=fit.notes,
        repairs=tuple(repairs),
        lines_dropped=len(lines) - len(kept),
        dropped_conversation=len(written.conversation) - len(fit.notes.conversation),  # repeats, then the oldest
        dropped_facts=fit.dropped_facts,
    )


def normalized_headings(summary: str) -> str:
    """The summary with each section heading written as ``Key facts:`` / ``Conversation so far:``."""
    return _HEADING_LINE.sub(lambda found: _canonical(found.group(1)), summary)


def _canonical(heading: str) -> str:
    facts = heading.lower().startswith(("key", "fact"))
    return _CANONICAL_HEADINGS[SECTION_HEADINGS[0 if facts else 1].lower()]


def _copied_from_instructions(line: str) -> bool:
    """Whether ``line`` copies the fold instructions (a model that parrots its prompt): three words or more that
    stand in them. Both headings stand in the instructions too, and are kept."""
    if line in _CANONICAL_HEADINGS.values():
        return False
    words = _plain_words(line)
    return len(words.split()) >= SUMMARY.copied_line_words and f" {words} " in f" {_INSTRUCTION_WORDS} "


def _visible(line: str) -> bool:
    return any(not (character.isspace() or unicodedata.category(character) == "Cf") for character in line)


def _plain_words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


_INSTRUCTION_WORDS = _plain_words(f"{SUMMARY_INSTRUCTIONS}\n{FACT_QUESTION}")
