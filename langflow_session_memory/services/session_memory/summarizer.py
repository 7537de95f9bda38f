"""One fold: the previous notes plus a batch of messages in, updated notes out, validated.

The call is a separate, non-streaming copy of the Agent's own model with no callbacks, so
nothing of it reaches the chat, the Playground stream or the Agent's tracing.
"""

import asyncio
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from lfx.base.models import model_remediation

SUMMARY_WORD_LIMIT = 300
# 300 words of notes take about 2,000 characters; a few huge "words" must not pass the word cap.
SUMMARY_CHARACTER_LIMIT = 4_000
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


def _clipped(text: str, limit: int = MAX_CHARACTERS_PER_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


# Control characters but tab and line breaks (PostgreSQL cannot store a NUL); unpaired surrogates (not UTF-8).
_UNSTORABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def check_storable(summary: str) -> None:
    """Raise unless ``summary`` can be stored and sent as notes, whoever wrote it (a model, a person, by hand).

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


def validate_edited_summary(candidate: str) -> str:
    """A person's notes, checked like a fold's where it applies: not empty, at most the word cap."""
    summary = candidate.strip()
    if not summary:
        raise SummaryRejectedError("empty summary")
    check_storable(summary)
    words = word_count(summary)
    if words > SUMMARY_WORD_LIMIT:
        raise SummaryRejectedError(f"summary has {words} words, over the {SUMMARY_WORD_LIMIT}-word cap")
    return summary


def fold_request(previous_summary: str, batch: Sequence[ChatLine]) -> list:
    transcript = "\n".join(f"{line.role}: {_clipped(line.text)}" for line in batch)
    notes = _clipped(previous_summary, SUMMARY_CHARACTER_LIMIT) or "(none yet)"
    return [
        SystemMessage(content=SUMMARY_INSTRUCTIONS),
        HumanMessage(content=f"Current notes:\n{notes}\n\nNext messages:\n{transcript}"),
    ]


def validate_summary(candidate: str, *, previous_summary: str, batch: Sequence[ChatLine]) -> str:
    """Return the cleaned summary, or raise :class:`SummaryRejectedError` saying why."""
    summary = candidate.strip()
    if not summary:
        raise SummaryRejectedError("empty summary")
    check_storable(summary)
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


def _model_name(llm: BaseChatModel) -> str | None:
    return getattr(llm, "model_name", None) or getattr(llm, "model", None)


def _profile_refuses_temperature(llm: BaseChatModel) -> bool:
    profile = getattr(llm, "profile", None)
    return isinstance(profile, dict) and profile.get("temperature") is False


def accepts_temperature_zero(llm: BaseChatModel) -> bool:
    """Whether the fold may ask this model for temperature 0, as LangChain itself decides it.

    The model's profile (``temperature: False`` for o-series models) and the model class's
    own validator (LangChain's ChatOpenAI drops a non-default temperature for gpt-5.x).
    """
    if "temperature" not in type(llm).model_fields or _profile_refuses_temperature(llm):
        return False
    validator = type(llm).__pydantic_decorators__.model_validators.get("validate_temperature")
    if validator is not None and validator.info.mode == "before":
        probe = {
            "model": _model_name(llm) or "",
            "temperature": 0,
            "reasoning_effort": getattr(llm, "reasoning_effort", None),
            "reasoning": getattr(llm, "reasoning", None),
        }
        return validator.func(probe).get("temperature") == 0
    return True


def fold_model(llm: BaseChatModel, provider: str | None = None, overrides: dict | None = None) -> BaseChatModel:
    """A non-streaming copy of the Agent's model without its callbacks, at temperature 0 where accepted.

    ``overrides`` are constructor fields to force (Langflow's remediation of a refused
    parameter, e.g. ``{"temperature": None}``), on top of those Langflow has already learnt
    for this model from a provider's refusal.
    """
    update = {"streaming": False, "disable_streaming": True, "callbacks": None}
    if accepts_temperature_zero(llm):
        update["temperature"] = 0
    elif _profile_refuses_temperature(llm):
        update["temperature"] = None
    learnt = model_remediation.cached_overrides(provider, _model_name(llm))
    update |= {name: value for name, value in {**learnt, **(overrides or {})}.items() if name in type(llm).model_fields}
    return llm.model_copy(update=update)


async def _invoke(model: BaseChatModel, request: list, timeout_seconds: float):
    async with asyncio.timeout(timeout_seconds):
        return await model.ainvoke(request, config={"callbacks": []})


async def _answer(llm: BaseChatModel, provider: str | None, request: list, timeout_seconds: float):
    """The model's answer; a parameter the provider refuses is dropped and the call made once more.

    Langflow's remediation registry recognises the refusal from the provider's error
    text (matched here, never logged); a fix that works is remembered for the model, as
    Langflow remembers it for the Agent.
    """
    try:
        return await _invoke(fold_model(llm, provider), request, timeout_seconds)
    except Exception as error:
        remediation = model_remediation.find_remediation(str(error), provider, already_applied=set())
        if remediation is None:
            raise
    response = await _invoke(fold_model(llm, provider, remediation.overrides), request, timeout_seconds)
    model_remediation.remember(provider, _model_name(llm), remediation.overrides)
    return response


def estimated_tokens(texts: Sequence[str]) -> int:
    """``ceil(characters / 4) + 4`` per message, for a provider that reports no usage."""
    return sum(math.ceil(len(text) / 4) + 4 for text in texts)


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


async def fold(
    llm: BaseChatModel,
    previous_summary: str,
    batch: Sequence[ChatLine],
    timeout_seconds: float = FOLD_TIMEOUT_SECONDS,
    provider: str | None = None,
) -> FoldResult:
    """Ask the model for updated notes; raises on timeout, provider error or a rejected summary."""
    request = fold_request(previous_summary, batch)
    response = await _answer(llm, provider, request, timeout_seconds)
    text = _text_of(response.content)
    summary = validate_summary(text, previous_summary=previous_summary, batch=batch)
    usage = getattr(response, "usage_metadata", None) or {}
    return FoldResult(
        summary=summary,
        input_tokens=int(usage.get("input_tokens") or estimated_tokens([m.content for m in request])),
        output_tokens=int(usage.get("output_tokens") or estimated_tokens([text])),
    )
