"""The search tool's pure part: its name, description and schema, and its answer to the model.

What it finds is ``retrieval``'s (``Retrieval.earlier``: the full-text index's passages, or while the index is
behind, the messages ``rules.recall.rank`` ranks); the tool that runs it is ``search_tool``.
"""

import functools
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.recall import Match

TOOL_NAME = "search_earlier_messages"
# Sent with every request of a turn that offers the tool: short, it says when to search and how.
TOOL_DESCRIPTION = (
    "Search this conversation's earlier messages, older than those you see (the notes may lack details). Use it "
    "when the user refers to something said before that is not in front of you. Pass a few distinctive words "
    "(e.g. 'invoice number supplier'). Returns up to 5 matching messages with sender and time."
)


class SearchQuery(BaseModel):
    query: str = Field(description="Distinctive words: a name, code or number.")


@functools.cache
def tool_schema_tokens() -> int:
    """The estimated size of the tool's schema, which goes with every request of a turn that offers it."""
    function = {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": SearchQuery.model_json_schema()}
    return token_estimate.tool_tokens(function)


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
