"""Token usage: what model calls cost, as the provider reported it or, where it reported none, estimated.

One value for every sum of tokens (a fold's requests, a turn's folds, the folds after earlier
answers, the Agent's calls) and one reading of a provider's usage as LangChain hands it
(``usage_metadata``), so "reported, else estimated" is decided in one place.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace

from langflow_session_memory.services.session_memory.rules.token_estimate import estimate_tokens


@dataclass(frozen=True)
class TokenUsage:
    """Input and output tokens; ``cached_input_tokens`` of the input the provider served from its prompt cache
    (billed at a discount), ``cache_write_input_tokens`` written to it (Anthropic bills them at 1.25x);
    ``estimated`` when a provider reported no usage for some of the calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    estimated: bool = False

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens + other.cache_write_input_tokens,
            estimated=self.estimated or other.estimated,
        )

    def __bool__(self) -> bool:
        return bool(self.input_tokens or self.output_tokens)


def reported(usage: Mapping | None) -> TokenUsage:
    """One call's usage as LangChain hands it (``usage_metadata``); zeros where the provider reported nothing.

    LangChain maps OpenAI's ``prompt_tokens_details.cached_tokens`` and Anthropic's
    ``cache_read_input_tokens`` to ``input_token_details.cache_read``. It keeps Anthropic's
    ``cache_creation_input_tokens`` as ``input_token_details.cache_creation`` or, when Anthropic
    splits it by lifetime, as ``ephemeral_5m_input_tokens`` and ``ephemeral_1h_input_tokens``
    with ``cache_creation`` set to 0.
    """
    usage = usage or {}
    details = usage.get("input_token_details") or {}
    split = int(details.get("ephemeral_5m_input_tokens") or 0) + int(details.get("ephemeral_1h_input_tokens") or 0)
    return TokenUsage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=int(details.get("cache_read") or 0),
        cache_write_input_tokens=int(details.get("cache_creation") or 0) or split,
    )


def of_call(usage: Mapping | None, *, prompt_tokens: int, answer: str) -> TokenUsage:
    """One call's usage: as reported, else estimated from its prompt's estimated size and its answer's text.

    A provider that reports no input tokens (llama.cpp ignores ``stream_options``) gets the
    estimate, marked as one, so no figure goes missing unsaid.
    """
    found = reported(usage)
    if found.input_tokens:
        return found
    return replace(found, input_tokens=prompt_tokens, output_tokens=estimate_tokens(answer), estimated=True)
