"""The summary as two lists of lines, and a fold's new lines merged into it: no fact is lost by a model's rewrite.

Pure. A fold asks the model only for what one batch states (``prompt``): shown its current notes,
a 1.5B model copies them back and misses the new messages (docs/real-model.md, issue 38). The
notes are then the previous "Key facts" and "Conversation so far" lines with the batch's new ones
after them, repeats left out; a later fact stands after the one it may replace, and the frame the
model reads says so (``rules.assembly``). Over the word limit, the oldest "Conversation so far"
lines go first, then the oldest facts, each counted for the log, never silently; a fact the limit takes is
kept in the full-text index (``storage.search_index.keep_dropped_facts``), where a question still finds it.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

from langflow_session_memory.services.session_memory.summary.prompt import SECTION_HEADINGS

FACTS_HEADING, CONVERSATION_HEADING = (f"{heading}:" for heading in SECTION_HEADINGS)
# A list item as models write one: "- ", "* ", "• ", "1. ", "1) ".
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
# A heading with the section's items on the same line, as Qwen2.5-Coder 1.5B writes one:
# "Conversation so far: - work - the band".
_INLINE_HEADING = re.compile(rf"^({'|'.join(SECTION_HEADINGS)})\s*:\s*(.*)$", re.IGNORECASE)
_INLINE_ITEM = re.compile(r"(?:^|\s)-\s+")


@dataclass(frozen=True)
class Notes:
    """The summary's "Key facts" and "Conversation so far" lines, each without its bullet, oldest first."""

    facts: tuple[str, ...] = ()
    conversation: tuple[str, ...] = ()

    def text(self) -> str:
        facts = (f"- {fact}" for fact in self.facts)
        return "\n".join([FACTS_HEADING, *facts, CONVERSATION_HEADING, *(f"- {line}" for line in self.conversation)])

    def words(self) -> int:
        return len(self.text().split())


@dataclass(frozen=True)
class Merged:
    """The notes after a fold, and what the word limit took from them: how many conversation lines, and the facts
    themselves (oldest first), which the fold keeps in the index."""

    notes: Notes
    dropped_conversation: int = 0
    dropped_facts: tuple[str, ...] = ()


def parsed(summary: str) -> Notes:
    """A summary (headings in their canonical form) as its two sections; lines before any heading count as
    facts (a summary a person wrote by hand)."""
    facts: list[str] = []
    conversation: list[str] = []
    section = facts
    for line in summary.splitlines():
        item = _ITEM.sub("", line.strip()).strip()
        if inline := _INLINE_HEADING.match(item):
            section = facts if inline.group(1).lower() == SECTION_HEADINGS[0].lower() else conversation
            section.extend(part.strip() for part in _INLINE_ITEM.split(inline.group(2)) if part.strip())
        elif item:
            section.append(item)
    return Notes(tuple(facts), tuple(conversation))


def merged(previous: str, update: str, word_limit: int) -> Merged:
    """``previous`` with the lines of ``update`` (a fold's answer about one batch) after its own, repeats left
    out, fitted to ``word_limit`` words (:func:`fitted`)."""
    before, new = parsed(previous), parsed(update)
    return fitted(Notes((*before.facts, *new.facts), (*before.conversation, *new.conversation)), word_limit)


def fitted(notes: Notes, word_limit: int, character_limit: int | None = None) -> Merged:
    """``notes`` without repeats, in ``word_limit`` words (and ``character_limit`` characters): the oldest
    conversation lines go first, then the oldest facts, which are handed back."""
    facts = _without_repeats(list(notes.facts))
    conversation = _without_repeats(list(notes.conversation))

    def over() -> bool:
        shown = Notes(tuple(facts), tuple(conversation))
        return shown.words() > word_limit or (character_limit is not None and len(shown.text()) > character_limit)

    dropped_conversation = 0
    dropped_facts: list[str] = []
    while over() and conversation:
        conversation.pop(0)
        dropped_conversation += 1
    while over() and facts:
        dropped_facts.append(facts.pop(0))
    return Merged(Notes(tuple(facts), tuple(conversation)), dropped_conversation, tuple(dropped_facts))


def newest_within(summary: str, fits: Callable[[str], bool], word_limit: int) -> str | None:
    """The newest of ``summary``'s notes that ``fits`` accepts, cut by the limit's own rule (:func:`fitted`) to half
    of ``word_limit``, a quarter, and then none ("" where no notes fit but the rest does); None when nothing fits."""
    for words in (word_limit // 2, word_limit // 4):
        shorter = fitted(parsed(summary), words).notes
        if (shorter.facts or shorter.conversation) and fits(shorter.text()):
            return shorter.text()
    return "" if fits("") else None


def _without_repeats(lines: list[str]) -> list[str]:
    """The lines in order, a line whose words an earlier one already has (any case, any punctuation) left out."""
    seen: set[str] = set()
    kept = []
    for line in lines:
        plain = " ".join(re.findall(r"\w+", line.lower()))
        if plain and plain not in seen:
            seen.add(plain)
            kept.append(line)
    return kept
