"""One fold: the previous notes plus a batch of messages in, updated notes out, validated.

The call is a separate, non-streaming copy of the Agent's own model with no callbacks, so
nothing of it reaches the chat, the Playground stream or the Agent's tracing.
"""

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

SUMMARY_WORD_LIMIT = 300
FOLD_TIMEOUT_SECONDS = 60.0
# Lets the bundled test server recognise a fold request; a real model reads it as a tag.
SUMMARY_REQUEST_MARKER = "SESSION-MEMORY-SUMMARY-REQUEST"
SECTION_HEADINGS = ("Key facts", "Conversation so far")
# A pasted log or a tool dump must not make the fold request itself overflow the context.
MAX_CHARACTERS_PER_MESSAGE = 4000
_HEADING_WORDS = sum(len(heading.split()) for heading in SECTION_HEADINGS)

SUMMARY_INSTRUCTIONS = f"""[{SUMMARY_REQUEST_MARKER}]
You keep the running notes of a long conversation between a user and an assistant.
You receive the current notes (possibly empty) and the next messages of the conversation.
Return the updated notes: keep every fact from the current notes that still holds, add what
the new messages establish, and correct what they change. Never drop names, identifiers,
numbers, decisions or commitments. Do not answer the user and do not add commentary.

Write exactly two sections, in this order, at most {SUMMARY_WORD_LIMIT} words in total:
Key facts:
- one short line per fact (who, what, identifiers, decisions, open tasks)
Conversation so far:
- a few short lines on what was discussed, oldest first"""

# Anchored at the start: an error or a refusal is the whole answer, while notes may well
# mention "rate limits" or an "internal server error" the users talked about.
_ERROR_TEXT = re.compile(
    r"^\s*(?:error|exception|traceback|internal server error|rate limit"
    r"|I(?:'m| am) (?:sorry|unable)|I can(?:not|'t) (?:help|assist|summari[sz]e))\b",
    re.IGNORECASE,
)


class SummaryRejectedError(ValueError):
    """The model's answer is not usable as notes; the previous summary stays."""


@dataclass(frozen=True)
class ChatLine:
    """One message of a batch, as the summarizer sees it."""

    role: str
    text: str


@dataclass(frozen=True)
class FoldResult:
    summary: str
    input_tokens: int
    output_tokens: int


def word_count(text: str) -> int:
    return len(text.split())


def _clipped(text: str) -> str:
    if len(text) <= MAX_CHARACTERS_PER_MESSAGE:
        return text
    return f"{text[:MAX_CHARACTERS_PER_MESSAGE]} [... {len(text) - MAX_CHARACTERS_PER_MESSAGE} more characters]"


def fold_request(previous_summary: str, batch: Sequence[ChatLine]) -> list:
    transcript = "\n".join(f"{line.role}: {_clipped(line.text)}" for line in batch)
    notes = previous_summary or "(none yet)"
    return [
        SystemMessage(content=SUMMARY_INSTRUCTIONS),
        HumanMessage(content=f"Current notes:\n{notes}\n\nNext messages:\n{transcript}"),
    ]


def validate_summary(candidate: str, *, previous_summary: str, batch: Sequence[ChatLine]) -> str:
    """Return the cleaned summary, or raise :class:`SummaryRejectedError` saying why."""
    summary = candidate.strip()
    if not summary:
        raise SummaryRejectedError("empty summary")
    if _ERROR_TEXT.search(summary):
        raise SummaryRejectedError("summary looks like an error text")
    words = word_count(summary)
    if words > SUMMARY_WORD_LIMIT:
        raise SummaryRejectedError(f"summary has {words} words, over the {SUMMARY_WORD_LIMIT}-word cap")
    replaced = word_count(previous_summary) + sum(word_count(line.text) for line in batch)
    if words > replaced + _HEADING_WORDS:
        raise SummaryRejectedError(f"summary has {words} words, more than the {replaced} it replaces")
    missing = [heading for heading in SECTION_HEADINGS if heading.lower() not in summary.lower()]
    if missing:
        raise SummaryRejectedError(f"summary lacks the section(s) {', '.join(missing)}")
    return summary


def fold_model(llm: BaseChatModel) -> BaseChatModel:
    """A non-streaming copy of the Agent's model, at temperature 0 where the model has one."""
    update = {"streaming": False, "disable_streaming": True}
    if "temperature" in type(llm).model_fields:
        update["temperature"] = 0
    return llm.model_copy(update=update)


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


async def fold(
    llm: BaseChatModel,
    previous_summary: str,
    batch: Sequence[ChatLine],
    timeout_seconds: float = FOLD_TIMEOUT_SECONDS,
) -> FoldResult:
    """Ask the model for updated notes; raises on timeout, provider error or a rejected summary."""
    async with asyncio.timeout(timeout_seconds):
        response = await fold_model(llm).ainvoke(fold_request(previous_summary, batch), config={"callbacks": []})
    summary = validate_summary(_text_of(response.content), previous_summary=previous_summary, batch=batch)
    usage = getattr(response, "usage_metadata", None) or {}
    return FoldResult(
        summary=summary,
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
    )
