"""The search tool's pure part: its ranking and its answer (the keywords and the excerpt around them are
``rules.recall``'s, shared with the excerpts a turn quotes without a tool call).

No I/O here: the SQL that finds candidates is ``messages.older_than_window_matching``, the
tool that runs it is ``search_tool``. The database narrows a session to the newest few
hundred messages that contain any keyword; what the model sees is decided here.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.recall import excerpt
from langflow_session_memory.services.session_memory.storage.messages import Candidate

TOOL_NAME = "search_earlier_messages"
# Sent with every request of a turn that offers the tool: short, it says when to search and how.
TOOL_DESCRIPTION = (
    "Search this conversation's earlier messages, older than those you see (the notes may lack details). Use it "
    "when the user refers to something said before that is not in front of you. Pass a few distinctive words "
    "(e.g. 'invoice number supplier'). Returns up to 5 matching messages with sender and time."
)
MAX_RESULTS = 5


class SearchQuery(BaseModel):
    query: str = Field(description="Distinctive words: a name, code or number.")


@functools.cache
def tool_schema_tokens() -> int:
    """The estimated size of the tool's schema, which goes with every request of a turn that offers it."""
    function = {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": SearchQuery.model_json_schema()}
    return token_estimate.tool_tokens(function)


@dataclass(frozen=True)
class Match:
    """A message the model is shown: who said it, when, and an excerpt around the first keyword."""

    sender: str
    sender_name: str
    timestamp: datetime
    excerpt: str
    keywords_found: int


def rank(candidates: Sequence[Candidate], words: Sequence[str]) -> list[Match]:
    """The best :data:`MAX_RESULTS` candidates: most distinct keywords first, newest first among equals.

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
        for found, _position, candidate in scored[:MAX_RESULTS]
    ]


def answer(matches: Sequence[Match], words: Sequence[str]) -> str:
    """What the tool returns to the model: one line per match, or why there is none."""
    if not words:
        return "No search was run: give a few distinctive words from what was said (names, numbers, codes)."
    if not matches:
        return f"No earlier messages of this conversation contain any of: {', '.join(words)}."
    lines = [f"{len(matches)} earlier message(s) of this conversation:"]
    lines += [
        f"- [{_iso(match.timestamp)}] {match.sender_name or match.sender} ({match.sender}): {match.excerpt}"
        for match in matches
    ]
    return "\n".join(lines)


def _iso(timestamp: datetime) -> str:
    """ISO time in UTC to the second; SQLite returns Langflow's UTC timestamps without a zone."""
    aware = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="seconds")
