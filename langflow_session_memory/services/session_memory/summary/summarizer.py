"""One fold: the previous notes plus a batch of messages in, updated notes out, validated.

The call is a separate copy of the Agent's own model without its callbacks, so nothing of it
reaches the chat or the Playground stream; the Agent's tracing handlers (LangSmith, Langfuse,
any tracer Langflow's tracing service feeds) get it as a run of its own, tagged
:data:`FOLD_RUN_TAG`, as the Agent's tools get theirs. It has its own output
budget: the Agent's Max Tokens (often small) would cut the notes short. The answer is
streamed and read here, never shown: reading stops at the budget, which also holds on
servers that ignore the cap LangChain sends (llama-cpp-python ignores
``max_completion_tokens``), and a fold cancelled mid-way (at Langflow's shutdown) closes its
stream, so the server stops writing it.
"""

import asyncio
import re
import unicodedata
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from lfx.log.logger import logger

from langflow_session_memory.services.session_memory.rules import context_size, usage
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage

# Langflow's remediation registry is imported by the functions that call a model:
# ``lfx.base.models`` loads Langflow's whole component machinery (half a minute on a busy
# machine), and the operator CLI imports this module for ``word_count`` alone.

SUMMARY_WORD_LIMIT = 300
FOLD_RUN_TAG = "session_memory_fold"  # the name and tag of a fold's run in traces
# 300 words of notes take about 2,000 characters; a few huge "words" must not pass the word cap.
SUMMARY_CHARACTER_LIMIT = 4_000
SECTION_HEADINGS = ("Key facts", "Conversation so far")
# A pasted log or a tool dump must not make the fold request itself overflow the context.
MAX_CHARACTERS_PER_MESSAGE = 4000
_HEADING_WORDS = sum(len(heading.split()) for heading in SECTION_HEADINGS)
# Notes may always be this long, however short the messages they replace: a batch of twenty
# "ok"s gives notes longer than the batch, and that is no reason to stop folding a session.
NOTES_FLOOR_WORDS = 100
# The fold's own output budget: 300 words of notes are about 400-500 tokens in English.
# A model that reasons before answering spends its reasoning tokens from the same budget.
FOLD_OUTPUT_TOKENS = 1024
FOLD_REASONING_OUTPUT_TOKENS = 8192
# Where LangChain's chat models keep their output cap (OpenAI, Anthropic, Bedrock, Mistral,
# Groq, watsonx: max_tokens; Google: max_output_tokens; Ollama: num_predict).
_OUTPUT_CAP_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")
# How providers say an answer stopped at the output cap (OpenAI, vLLM, llama.cpp, Ollama: "length";
# Anthropic, Bedrock: "max_tokens"; Google: "MAX_TOKENS").
_CUT_AT_OUTPUT_CAP = frozenset({"length", "max_tokens"})
_STOP_REASON_KEYS = ("finish_reason", "stop_reason", "done_reason", "stopReason")
# Reading a streamed answer stops past this many characters per token of the budget (a generous
# reading of the ``characters / 4`` estimate).
_CHARACTERS_PER_TOKEN = 5

# Fold requests on a small context window (see :func:`fold_budget`).
MIN_FOLD_OUTPUT_TOKENS = 512
FOLD_REQUEST_SHARE = 0.75
NOTES_RESERVE_TOKENS = 450  # the notes sent back in: 300 words and their headings
MIN_TRANSCRIPT_TOKENS = 100
_LINE_OVERHEAD_TOKENS = 4  # "User: " and the line break
SMALLEST_CLIP_CHARACTERS = 200  # a lone message is clipped no shorter when a request is still refused

# The format is described in words, not shown with sample bullets: small instruct models copy
# sample lines verbatim (Qwen2.5-Coder 0.5B returned "- one short line per fact (who, what, ...)").
SUMMARY_INSTRUCTIONS = f"""You keep the running notes of a long conversation between a user and an assistant.
You receive the current notes (possibly empty) and the next messages of the conversation.
Return the updated notes: keep every fact from the current notes that still holds, add what
the new messages establish, and correct what they change. Never drop names, identifiers,
numbers, decisions or commitments. Do not answer the user and do not add commentary.

Write the notes in two sections, at most {SUMMARY_WORD_LIMIT} words in total. The first section
starts with the line "Key facts:" followed by one short line per fact, each starting with "- ".
The second section starts with the line "Conversation so far:" followed by a few short lines,
oldest first, each starting with "- ", saying what was discussed."""

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
    """The new notes and what their requests cost."""

    summary: str
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True)
class FoldBudget:
    """The fold's output cap, and how much transcript one request may carry (None: a whole batch)."""

    output_tokens: int
    transcript_tokens: int | None = None


def fold_budget(llm: BaseChatModel, context_window: int | None) -> FoldBudget:
    """What one fold request may hold so that it fits the model's context window, when known.

    A small window (a local model's 2,048 tokens) keeps a quarter for the notes written, and
    a batch of long messages is then folded in several requests, each with the notes so far.
    The request gets only :data:`FOLD_REQUEST_SHARE` of what remains: real tokenizers count
    more tokens than the ``characters / 4`` estimate on digits, code and logs.
    """
    output = output_budget(llm)
    if not context_window:
        return FoldBudget(output)
    output = min(output, max(context_window // 4, MIN_FOLD_OUTPUT_TOKENS))
    room = int((context_window - output) * FOLD_REQUEST_SHARE) - _INSTRUCTION_TOKENS - NOTES_RESERVE_TOKENS
    return FoldBudget(output, max(room, MIN_TRANSCRIPT_TOKENS))


def transcript_chunks(batch: Sequence[ChatLine], budget: FoldBudget) -> list[list[ChatLine]]:
    """The batch in order, cut into the fewest runs of messages that each fit one request.

    A message too long for any request is clipped to fit (its text in the table is untouched).
    """
    if budget.transcript_tokens is None:
        return [list(batch)]
    limit = budget.transcript_tokens
    longest = min(MAX_CHARACTERS_PER_MESSAGE, (limit - _LINE_OVERHEAD_TOKENS) * 4)
    chunks: list[list[ChatLine]] = [[]]
    used = 0
    for line in batch:
        clipped = ChatLine(role=line.role, text=_clipped(line.text, longest))
        size = context_size.estimate_tokens(clipped.text) + _LINE_OVERHEAD_TOKENS
        if chunks[-1] and used + size > limit:
            chunks.append([])
            used = 0
        chunks[-1].append(clipped)
        used += size
    return chunks


def word_count(text: str) -> int:
    return len(text.split())


def _clipped(text: str, limit: int = MAX_CHARACTERS_PER_MESSAGE) -> str:
    """The text in ``limit`` characters for a fold request: its head (three quarters) and its tail, where a
    pasted log's summary line and an error often are, the middle marked as cut (the table keeps it whole)."""
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    return f"{text[:head]} [... {len(text) - limit} more characters ...] {text[len(text) - (limit - head) :]}"


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
    check_size(summary)
    return summary


def check_size(summary: str) -> int:
    """Raise :class:`SummaryRejectedError` for notes that are empty, unstorable or over the word cap; their words.

    The checks every summary passes, a person's edit and a model's fold alike.
    """
    if not summary:
        raise SummaryRejectedError("empty summary")
    check_storable(summary)
    words = word_count(summary)
    if words > SUMMARY_WORD_LIMIT:
        raise SummaryRejectedError(f"summary has {words} words, over the {SUMMARY_WORD_LIMIT}-word cap")
    return words


def fold_request(previous_summary: str, batch: Sequence[ChatLine]) -> list:
    transcript = "\n".join(f"{line.role}: {_clipped(line.text)}" for line in batch)
    notes = _clipped(previous_summary, SUMMARY_CHARACTER_LIMIT) or "(none yet)"
    return [
        SystemMessage(content=SUMMARY_INSTRUCTIONS),
        HumanMessage(content=f"Current notes:\n{notes}\n\nNext messages:\n{transcript}"),
    ]


def allowed_words(previous_summary: str, batch: Sequence[ChatLine]) -> int:
    """How many words the new notes may have: the cap, and no more than they replace (or the floor), headings aside."""
    replaced = word_count(previous_summary) + sum(word_count(line.text) for line in batch)
    return min(SUMMARY_WORD_LIMIT, max(replaced, NOTES_FLOOR_WORDS) + _HEADING_WORDS)


def within_word_limit(notes: str, limit: int) -> tuple[str, int]:
    """Notes over ``limit`` words with "Conversation so far" lines dropped until they fit; and how many went.

    Small models copy the messages into that section line by line (Qwen2.5-Coder 1.5B: 364 words of
    notes for a batch of twenty one-line turns, the same line nine times): a repeat of an earlier line
    goes first, then the oldest lines. "Key facts" is never touched; notes that still do not fit are
    returned as they are, for the checks to refuse.
    """
    notes = normalized_headings(notes.strip())
    if word_count(notes) <= limit:
        return notes, 0
    lines = notes.splitlines()
    heading = next((i for i, line in enumerate(lines) if line == _CANONICAL_HEADINGS["conversation so far"]), None)
    if heading is None:
        return notes, 0
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
        return notes, 0
    return shortened, len(conversation) - len(kept)


def validate_summary(candidate: str, *, previous_summary: str, batch: Sequence[ChatLine]) -> str:
    """Return the cleaned summary (headings in their canonical form), or raise :class:`SummaryRejectedError`."""
    summary = normalized_headings(candidate.strip())
    words = check_size(summary)
    if _ERROR_TEXT.search(summary):
        raise SummaryRejectedError("summary looks like an error text")
    if repeats_instructions(summary):
        raise SummaryRejectedError("summary repeats the fold instructions")
    replaced = word_count(previous_summary) + sum(word_count(line.text) for line in batch)
    if words > max(replaced, NOTES_FLOOR_WORDS) + _HEADING_WORDS:
        raise SummaryRejectedError(f"summary has {words} words, more than the {replaced} it replaces")
    missing = [heading for heading in SECTION_HEADINGS if heading.lower() not in summary.lower()]
    if missing:
        raise SummaryRejectedError(f"summary lacks the section(s) {', '.join(missing)}")
    return summary


_INSTRUCTION_TOKENS = context_size.estimate_tokens(SUMMARY_INSTRUCTIONS)


# A heading line as models write it: "Key facts:", "## Key facts", "**Key Facts:**", "KEY FACTS".
_DECORATION = r"[ \t*_]*"  # spaces, and Markdown bold or italics around a heading
_HEADING_LINE = re.compile(
    rf"^{_DECORATION}(?:#{{1,6}})?{_DECORATION}({'|'.join(SECTION_HEADINGS)}){_DECORATION}:?{_DECORATION}:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CANONICAL_HEADINGS = {heading.lower(): f"{heading}:" for heading in SECTION_HEADINGS}


def normalized_headings(notes: str) -> str:
    """The notes with each section heading written as ``Key facts:`` / ``Conversation so far:``."""
    return _HEADING_LINE.sub(lambda found: _CANONICAL_HEADINGS[found.group(1).lower()], notes)


def _plain_words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


_INSTRUCTION_WORDS = _plain_words(SUMMARY_INSTRUCTIONS)
# A line this long that also stands in the instructions was copied from them, not written from the conversation.
_COPIED_LINE_WORDS = 5


def repeats_instructions(notes: str) -> bool:
    """Whether the notes copy a line of the fold instructions (a model that parrots its prompt).

    Both headings stand in the instructions, so a parroted prompt has them; its sample
    bullets ("one short line per fact ...") do not belong in any conversation's notes.
    """
    for line in notes.splitlines():
        words = _plain_words(line)
        if len(words.split()) >= _COPIED_LINE_WORDS and f" {words} " in f" {_INSTRUCTION_WORDS} ":
            return True
    return False


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


def output_budget(llm: BaseChatModel) -> int:
    """The fold's output cap: room for the notes, and for the reasoning a reasoning model does first.

    LangChain's model profile says whether the model reasons; Anthropic's extended thinking
    needs its thinking budget on top. Never above the model's own output limit.
    """
    profile = getattr(llm, "profile", None)
    profile = profile if isinstance(profile, dict) else {}
    budget = FOLD_REASONING_OUTPUT_TOKENS if profile.get("reasoning_output") else FOLD_OUTPUT_TOKENS
    thinking = getattr(llm, "thinking", None)
    if isinstance(thinking, dict) and isinstance(thinking.get("budget_tokens"), int):
        budget = max(budget, thinking["budget_tokens"] + FOLD_OUTPUT_TOKENS)
    limit = profile.get("max_output_tokens")
    return min(budget, limit) if isinstance(limit, int) and limit > 0 else budget


def _output_cap(llm: BaseChatModel, tokens: int) -> dict:
    """The model field that caps its output, set to the fold's budget (whatever the Agent's Max Tokens)."""
    field = next((name for name in _OUTPUT_CAP_FIELDS if name in type(llm).model_fields), None)
    return {} if field is None else {field: tokens}


def fold_model(
    llm: BaseChatModel, provider: str | None = None, overrides: dict | None = None, output_tokens: int | None = None
) -> BaseChatModel:
    """A copy of the Agent's model without its callbacks, with the fold's own output budget, at
    temperature 0 where accepted, reporting usage in streams where it can be asked to.

    ``overrides`` are constructor fields to force (Langflow's remediation of a refused
    parameter, e.g. ``{"temperature": None}``), on top of those Langflow has already learnt
    for this model from a provider's refusal.
    """
    cap = _output_cap(llm, output_tokens or output_budget(llm))
    update = {"callbacks": None, **cap}
    if "stream_usage" in type(llm).model_fields:
        update["stream_usage"] = True
    if accepts_temperature_zero(llm):
        update["temperature"] = 0
    elif _profile_refuses_temperature(llm):
        update["temperature"] = None
    from lfx.base.models import model_remediation

    learnt = model_remediation.cached_overrides(provider, _model_name(llm))
    update |= {name: value for name, value in {**learnt, **(overrides or {})}.items() if name in type(llm).model_fields}
    return llm.model_copy(update=update)


async def _invoke(model: BaseChatModel, request: list, output_tokens: int, tracing: Sequence):
    """The streamed answer, gathered; reading stops (and the stream closes) once it outgrows ``output_tokens``.

    ``tracing``: the only callbacks the call gets (an explicit list: none is inherited from a
    run around it, such as an outer agent's, whose handlers would stream the notes).
    """
    answer = None
    config = {"callbacks": list(tracing), "run_name": FOLD_RUN_TAG, "tags": [FOLD_RUN_TAG]}
    async with aclosing(model.astream(request, config=config)) as chunks:
        async for chunk in chunks:
            answer = chunk if answer is None else answer + chunk
            if len(_text_of(answer.content)) > output_tokens * _CHARACTERS_PER_TOKEN:
                raise SummaryRejectedError(f"summary cut at the {output_tokens}-token output cap")
    if answer is None:  # no chunk at all: llama-cpp-python's answer to a prompt over its window
        raise RequestTooLongError("the model's stream was empty")
    return answer


async def _answer(llm: BaseChatModel, provider: str | None, request: list, output_tokens: int, tracing: Sequence):
    """The model's answer; a parameter the provider refuses is dropped and the call made once more.

    Langflow's remediation registry recognises the refusal from the provider's error
    text (matched here, never logged); a fix that works is remembered for the model, as
    Langflow remembers it for the Agent.
    """
    from lfx.base.models import model_remediation

    try:
        return await _invoke(fold_model(llm, provider, output_tokens=output_tokens), request, output_tokens, tracing)
    except (SummaryRejectedError, RequestTooLongError):
        raise
    except Exception as error:
        if context_size.is_context_length_error(error) or context_size.is_empty_stream(error):
            raise RequestTooLongError("the model refused the request as too long") from error
        remediation = model_remediation.find_remediation(str(error), provider, already_applied=set())
        if remediation is None:
            raise
    model = fold_model(llm, provider, remediation.overrides, output_tokens)
    response = await _invoke(model, request, output_tokens, tracing)
    model_remediation.remember(provider, _model_name(llm), remediation.overrides)
    return response


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def cut_off(response) -> str | None:
    """Why the answer is incomplete, or None: the provider says it hit the output cap, or an
    OpenAI-compatible stream ended without saying why it stopped (llama-cpp-python's server ends
    a stream early with ``[DONE]`` when another request waits)."""
    metadata = getattr(response, "response_metadata", None) or {}
    reason = next((metadata[key] for key in _STOP_REASON_KEYS if metadata.get(key)), None)
    if str(reason).lower() in _CUT_AT_OUTPUT_CAP:
        return "cut at the output cap"
    if reason is None and metadata.get("model_provider") == "openai":
        return "stream ended without a finish reason"
    return None


async def fold(
    llm: BaseChatModel,
    previous_summary: str,
    batch: Sequence[ChatLine],
    timeout_seconds: float = DEFAULT_POLICY.fold_timeout_seconds,
    provider: str | None = None,
    context_window: int | None = None,
    tracing: Sequence = (),
) -> FoldResult:
    """Ask the model for updated notes; raises on timeout, provider error or a rejected summary.

    ``tracing``: the Agent's tracing handlers, which see each request as a run tagged
    :data:`FOLD_RUN_TAG`.

    The whole batch must fold within ``timeout_seconds``, in one request or, on a small
    ``context_window``, in several (see :func:`fold_budget`). A request the model refuses as
    too long (in its words, or with an empty stream) is split in two and each half folded in
    turn, so a window nobody declared is found out. An answer cut at the output cap is
    rejected whatever it holds: its last notes are missing.
    """
    budget = fold_budget(llm, context_window)
    result = FoldResult(previous_summary)
    pending = transcript_chunks(batch, budget)
    async with asyncio.timeout(timeout_seconds):
        while pending:
            chunk = pending.pop(0)
            try:
                folded = await _fold_chunk(llm, result.summary, chunk, provider, budget, tracing)
            except RequestTooLongError:
                halves = _halved(chunk)
                if halves is None:
                    raise
                pending[:0] = halves
                continue
            result = FoldResult(summary=folded.summary, usage=result.usage + folded.usage)
    return result


class RequestTooLongError(ValueError):
    """The model refused a fold request as too long for its context window."""


def _halved(chunk: Sequence[ChatLine]) -> list[list[ChatLine]] | None:
    """The chunk as two smaller ones: its messages split, or a lone message clipped to half; None when too small."""
    if len(chunk) > 1:
        middle = len(chunk) // 2
        return [list(chunk[:middle]), list(chunk[middle:])]
    line = chunk[0]
    if len(line.text) <= SMALLEST_CLIP_CHARACTERS:
        return None
    return [[ChatLine(role=line.role, text=_clipped(line.text, len(line.text) // 2))]]


async def _fold_chunk(
    llm: BaseChatModel,
    previous_summary: str,
    chunk: Sequence[ChatLine],
    provider: str | None,
    budget: FoldBudget,
    tracing: Sequence,
) -> FoldResult:
    request = fold_request(previous_summary, chunk)
    response = await _answer(llm, provider, request, budget.output_tokens, tracing)
    if incomplete := cut_off(response):
        raise SummaryRejectedError(f"summary {incomplete} ({budget.output_tokens}-token cap)")
    text = _text_of(response.content)
    notes, dropped = within_word_limit(text, allowed_words(previous_summary, chunk))
    summary = validate_summary(notes, previous_summary=previous_summary, batch=chunk)
    if dropped:
        await logger.ainfo(
            f"session_summary_shortened dropped_lines={dropped} words_written={word_count(text)} "
            f"words_kept={word_count(summary)}"
        )
    spent = usage.of_call(
        getattr(response, "usage_metadata", None),
        prompt_tokens=context_size.estimated_size(m.content for m in request),
        answer=text,
    )
    return FoldResult(summary=summary, usage=spent)
