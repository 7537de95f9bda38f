"""How big a turn is against the model's context window, and how to recognise "prompt too long".

Sizes come from what the provider reported for the last single model call of the previous
turn (kept in the state row when it reached the policy's ``record_share`` of the window; not the
usage Langflow stores on the answer, which sums every call of a tool loop), and from a
documented estimate of what will be sent (``token_estimate.estimate_tokens``).
"""

import re

from langchain_core.exceptions import ContextOverflowError

from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT

CONTEXT_TOO_LONG = (
    "This conversation no longer fits the model's context window, even with older messages summarized. "
    "Shorten your last message or the Agent's instructions, start a new session, or choose a model with a "
    "larger context window."
)

# What servers say when a prompt does not fit their context window, one phrase per wording; every
# phrase has a row with the server's whole text, and where it was read, in
# tests/services/test_overflow_signals.py. Specific phrases only: "context" alone also means Go's
# "context deadline exceeded", a context_id, a ContextVar...
OVERFLOW_PHRASES = (
    "context_length_exceeded",  # the error code: OpenAI, Azure OpenAI, Groq, vLLM, llama-cpp-python
    "maximum context length",  # OpenAI, vLLM, DeepSeek, OpenRouter, Groq, llama-cpp-python
    "exceeds the context window",  # OpenAI (Responses API)
    "exceed context window of",  # llama-cpp-python's own error, as raised in-process
    "exceeds the available context size",  # llama-server (llama.cpp)
    "exceed_context_size_error",  # llama-server's error type
    "input length exceeds the context length",  # Ollama
    "when context the overflows",  # LM Studio
    "greater than the context length",  # LM Studio
    "prompt is too long",  # Anthropic, Claude on Bedrock and Vertex
    "input is too long",  # Bedrock
    "exceeds the maximum number of tokens allowed",  # Gemini
    "too large for model with",  # Mistral
    "maximum prompt length is",  # xAI
    "too many tokens:",  # Cohere
    "`inputs` tokens + `max_new_tokens` must be",  # Hugging Face TGI, Together, SageMaker
    "input tokens exceed the configured limit",  # OpenAI-compatible gateways (LangChain's own list)
    "reduce the length of the messages",  # OpenAI, Groq
)
_CONTEXT_OVERFLOW = re.compile(
    "|".join(re.escape(phrase) for phrase in OVERFLOW_PHRASES) + r"|current length is \d+ while limit is \d+",
    re.IGNORECASE,
)
# LangChain's errors when a streamed answer held nothing (``agenerate`` and ``astream``):
# llama-cpp-python's server answers an overflowing streamed request with an empty 200 stream.
EMPTY_STREAM = "No generations found in stream"
EMPTY_STREAM_WORDINGS = (EMPTY_STREAM, "No generation chunks were returned")
# Where a provider's refusal names its window (the texts in tests/services/test_overflow_signals.py): OpenAI,
# vLLM and llama-cpp-python; Anthropic; Mistral; OpenAI-compatible gateways; llama-server.
_WINDOW_NAMED = re.compile(
    r"maximum context length is (\d+)|tokens > (\d+) maximum|with (\d+) maximum context length"
    r"|while limit is (\d+)|configured limit of (\d+)|'n_ctx': (\d+)",
    re.IGNORECASE,
)


class ContextTooLongError(ValueError):
    """The prompt does not fit even after hard compaction; the text tells the user what to do."""


def _chain(error: BaseException):
    """The error and those it was raised from (its cause, or the error it was handling)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_context_length_error(error: BaseException) -> bool:
    """True when the error, or one it was raised from, is the provider refusing an oversized prompt.

    LangChain classifies some itself (``ContextOverflowError``); the others are read from the
    provider's text (:data:`OVERFLOW_PHRASES`).
    """
    return any(isinstance(e, ContextOverflowError) or _CONTEXT_OVERFLOW.search(str(e)) for e in _chain(error))


def window_named_in(error: BaseException) -> int | None:
    """The context window a provider's refusal states (``maximum context length is 16385 tokens``), if it does."""
    for cause in _chain(error):
        if found := _WINDOW_NAMED.search(str(cause)):
            return int(next(group for group in found.groups() if group))
    return None


def is_empty_stream(error: BaseException) -> bool:
    """True when the model's stream ended without any answer (LangChain's "No generations found in stream")."""
    return any(wording in str(e) for e in _chain(error) for wording in EMPTY_STREAM_WORDINGS)


def is_probable_overflow(error: BaseException, *, request_tokens: int, context_window: int | None) -> bool:
    """Whether a failed first model call should be treated as "prompt too long".

    A refusal in the provider's words always is. An empty stream is one on servers that
    answer an oversized streamed prompt that way (llama-cpp-python), so it counts too,
    unless the window is known and the estimated request is well inside it: then the
    empty stream has another cause, and compacting would not help.
    """
    if is_context_length_error(error):
        return True
    if not is_empty_stream(error):
        return False
    return context_window is None or request_tokens > CALL_FIT.empty_stream_overflow_ratio * context_window


def context_window(llm, configured_tokens: int | None) -> int | None:
    """The window to respect: the builder's setting when given, else what LangChain's model profile knows."""
    if configured_tokens and configured_tokens > 0:
        return int(configured_tokens)
    profile = getattr(llm, "profile", None) or {}
    tokens = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return int(tokens) if tokens else None
