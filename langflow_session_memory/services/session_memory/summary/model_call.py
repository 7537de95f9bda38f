"""One fold's model call: the previous summary plus a batch of messages in, an updated, validated summary out.

The call is a separate copy of the Agent's own model without its callbacks, so nothing of it
reaches the chat or the Playground stream; the Agent's tracing handlers (LangSmith, Langfuse,
any tracer Langflow's tracing service feeds) get it as a run of its own, tagged
:data:`FOLD_RUN_TAG`, as the Agent's tools get theirs. It has its own output
budget: the Agent's Max Tokens (often small) would cut the summary short. The answer is
streamed and read here, never shown: reading stops at the budget, which also holds on
servers that ignore the cap LangChain sends (llama-cpp-python ignores
``max_completion_tokens``), and a fold cancelled mid-way (at Langflow's shutdown) closes its
stream, so the server stops writing it. What is asked is ``prompt``'s; what is accepted,
``validation``'s.
"""

import asyncio
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.rules import context_size, retry, token_estimate, usage
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY, SUMMARY
from langflow_session_memory.services.session_memory.rules.retry import Refused, Send
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.summary import notes
from langflow_session_memory.services.session_memory.summary.prompt import (
    ChatLine,
    FoldBudget,
    clippable,
    fold_budget,
    fold_request,
    halved,
    transcript_chunks,
)
from langflow_session_memory.services.session_memory.summary.validation import (
    SummaryRejectedError,
    check_size,
    complete_part,
    salvaged,
    word_count,
)

# Langflow's remediation registry is imported by the functions that call a model:
# ``lfx.base.models`` loads Langflow's whole component machinery (half a minute on a busy
# machine), and the operator CLI imports the summary package for ``word_count`` alone.

FOLD_RUN_TAG = "session_memory_fold"  # the name and tag of a fold's run in traces
# Where LangChain's chat models keep their output cap (OpenAI, Anthropic, Bedrock, Mistral,
# Groq, watsonx: max_tokens; Google: max_output_tokens; Ollama: num_predict).
_OUTPUT_CAP_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")
# How providers say an answer stopped at the output cap (OpenAI, vLLM, llama.cpp, Ollama: "length";
# Anthropic, Bedrock: "max_tokens"; Google: "MAX_TOKENS").
_CUT_AT_OUTPUT_CAP = frozenset({"length", "max_tokens"})
_STOP_REASON_KEYS = ("finish_reason", "stop_reason", "done_reason", "stopReason")
_INTERRUPTED = "stream ended without a finish reason"


@dataclass(frozen=True)
class FoldResult:
    """The new summary, what its requests cost, and the facts the word limit took from the notes (oldest first)."""

    summary: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    dropped_facts: tuple[str, ...] = ()


class RequestTooLongError(ValueError):
    """The model refused a fold request as too long for its context window."""


class StreamInterruptedError(SummaryRejectedError):
    """The server ended the answer's stream early, without saying why (llama.cpp's server does so when another
    request waits): nothing about the request itself, so a lone message is never passed over for it."""


async def fold(
    llm: BaseChatModel,
    previous_summary: str,
    batch: Sequence[ChatLine],
    timeout_seconds: float = DEFAULT_POLICY.fold_timeout_seconds,
    provider: str | None = None,
    context_window: int | None = None,
    tracing: Sequence = (),
) -> FoldResult:
    """Ask the model for an updated summary; raises on timeout, provider error or a rejected summary.

    ``tracing``: the Agent's tracing handlers, which see each request as a run tagged
    :data:`FOLD_RUN_TAG`.

    The whole batch must fold within ``timeout_seconds``, in one request or, on a small
    ``context_window``, in several (see :func:`prompt.fold_budget`). A request the model refuses
    as too long (in its words, or with an empty stream) is split in two and each half folded in
    turn (``rules.retry``), so a window nobody declared is found out. An answer cut at the output cap is
    rejected whatever it holds: its last lines are missing.
    """
    budget = fold_budget(output_budget(llm), context_window)
    result = FoldResult(previous_summary)
    pending = transcript_chunks(batch, budget)
    try:
        async with asyncio.timeout(timeout_seconds):
            while pending:
                chunk = pending.pop(0)
                try:
                    folded = await _fold_chunk(llm, result.summary, chunk, provider, budget, tracing)
                except RequestTooLongError:
                    then = retry.after(Refused.FOLD_REQUEST, messages=len(chunk), clippable=clippable(chunk))
                    if then.send is Send.GIVE_UP:
                        raise
                    pending[:0] = halved(chunk)
                    continue
                result = FoldResult(
                    summary=folded.summary,
                    usage=result.usage + folded.usage,
                    dropped_facts=result.dropped_facts + folded.dropped_facts,
                )
    except Exception as error:
        _spent(error, result.usage)  # the requests answered before it: the provider bills them
        raise
    return result


def spent_before(error: BaseException) -> TokenUsage:
    """What a fold that raised ``error`` had spent (its answered requests, a refused answer), which the provider
    bills and the turn's usage reports; none known for a request cut off by the time-out."""
    return getattr(error, "fold_usage", None) or TokenUsage()


def _spent(error: BaseException, usage: TokenUsage) -> None:
    error.fold_usage = spent_before(error) + usage


async def _fold_chunk(
    llm: BaseChatModel,
    previous_summary: str,
    chunk: Sequence[ChatLine],
    provider: str | None,
    budget: FoldBudget,
    tracing: Sequence,
) -> FoldResult:
    request = fold_request(chunk)
    response, read_past_budget = await _answer(llm, provider, request, budget.output_tokens, tracing)
    written = text = token_estimate.text_of(response)
    spent = usage.of_call(
        getattr(response, "usage_metadata", None),
        prompt_tokens=token_estimate.messages_tokens(request),
        answer=written,
    )
    repairs: list[str] = []
    if incomplete := ("cut at the output cap" if read_past_budget else cut_off(response)):
        repairs.append(incomplete.replace(" ", "_"))
        text = complete_part(text) or ""
    try:
        salvage = salvaged(text, batch=chunk)
    except SummaryRejectedError as error:
        if not incomplete:
            _spent(error, spent)
            raise
        # Nothing usable before the cut: said as the cut, and a stream the server ended asks the same again.
        refused = SummaryRejectedError if read_past_budget or incomplete != _INTERRUPTED else StreamInterruptedError
        cut = refused(f"summary {incomplete} ({budget.output_tokens}-token cap)")
        _spent(cut, spent)
        raise cut from None
    repairs += salvage.repairs
    result = notes.merged(previous_summary, salvage.update.text(), SUMMARY.word_limit)
    summary = result.notes.text()
    try:
        check_size(summary)
    except SummaryRejectedError as error:
        _spent(error, spent)
        raise
    if repairs:
        await logger.ainfo(
            f"{log_events.SALVAGED} why={','.join(repairs)} lines_dropped={salvage.lines_dropped} "
            f"words_written={word_count(written)} words_kept={word_count(salvage.update.text())}"
        )
    dropped_facts = salvage.dropped_facts + result.dropped_facts
    if salvage.dropped_conversation or result.dropped_conversation or dropped_facts:
        await logger.ainfo(
            f"{log_events.SHORTENED} dropped_lines={salvage.dropped_conversation + result.dropped_conversation} "
            f"dropped_facts={len(dropped_facts)} words_written={word_count(written)} "
            f"words_kept={word_count(summary)}"
        )
    return FoldResult(summary=summary, usage=spent, dropped_facts=dropped_facts)


async def _answer(llm: BaseChatModel, provider: str | None, request: list, output_tokens: int, tracing: Sequence):
    """The model's answer, and whether reading it stopped at the budget; a parameter the provider refuses is
    dropped and the call made once more.

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


async def _invoke(model: BaseChatModel, request: list, output_tokens: int, tracing: Sequence):
    """The streamed answer, gathered, and whether reading stopped (and the stream closed) because it outgrew
    ``output_tokens``.

    ``tracing``: the only callbacks the call gets (an explicit list: none is inherited from a
    run around it, such as an outer agent's, whose handlers would stream the summary).
    """
    answer = None
    config = {"callbacks": list(tracing), "run_name": FOLD_RUN_TAG, "tags": [FOLD_RUN_TAG]}
    async with aclosing(model.astream(request, config=config)) as chunks:
        async for chunk in chunks:
            answer = chunk if answer is None else answer + chunk
            if len(token_estimate.text_of(answer)) > output_tokens * SUMMARY.stream_characters_per_token:
                return answer, True
    if answer is None:  # no chunk at all: llama-cpp-python's answer to a prompt over its window
        raise RequestTooLongError("the model's stream was empty")
    return answer, False


def cut_off(response) -> str | None:
    """Why the answer is incomplete, or None: the provider says it hit the output cap, or an
    OpenAI-compatible stream ended without saying why it stopped (llama-cpp-python's server ends
    a stream early with ``[DONE]`` when another request waits)."""
    metadata = getattr(response, "response_metadata", None) or {}
    reason = next((metadata[key] for key in _STOP_REASON_KEYS if metadata.get(key)), None)
    if str(reason).lower() in _CUT_AT_OUTPUT_CAP:
        return "cut at the output cap"
    if reason is None and metadata.get("model_provider") == "openai":
        return _INTERRUPTED
    return None


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
    """The fold's output cap: room for the summary, and for the reasoning a reasoning model does first.

    LangChain's model profile says whether the model reasons; Anthropic's extended thinking
    needs its thinking budget on top. Never above the model's own output limit.
    """
    profile = getattr(llm, "profile", None)
    profile = profile if isinstance(profile, dict) else {}
    budget = SUMMARY.reasoning_output_tokens if profile.get("reasoning_output") else SUMMARY.output_tokens
    thinking = getattr(llm, "thinking", None)
    if isinstance(thinking, dict) and isinstance(thinking.get("budget_tokens"), int):
        budget = max(budget, thinking["budget_tokens"] + SUMMARY.output_tokens)
    limit = profile.get("max_output_tokens")
    return min(budget, limit) if isinstance(limit, int) and limit > 0 else budget


def _output_cap(llm: BaseChatModel, tokens: int) -> dict:
    """The model field that caps its output, set to the fold's budget (whatever the Agent's Max Tokens)."""
    field = next((name for name in _OUTPUT_CAP_FIELDS if name in type(llm).model_fields), None)
    return {} if field is None else {field: tokens}


def _model_name(llm: BaseChatModel) -> str | None:
    return getattr(llm, "model_name", None) or getattr(llm, "model", None)


def _profile_refuses_temperature(llm: BaseChatModel) -> bool:
    profile = getattr(llm, "profile", None)
    return isinstance(profile, dict) and profile.get("temperature") is False
