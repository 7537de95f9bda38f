"""How big a turn is against the model's context window, and how to recognise "prompt too long".

Sizes come from what the provider reported for the last single model call of the previous
turn (kept in the state row when it reached :data:`RECORD_RATIO` of the window; not the
usage Langflow stores on the answer, which sums every call of a tool loop), and from a
documented estimate of what will be sent: ``ceil(characters / 4) + 4`` tokens per message.
"""

import math
import re
from collections.abc import Iterable

EARLY_FOLD_RATIO = 0.8
TARGET_RATIO = 0.5
RECORD_RATIO = 0.4  # a last call below this share of the window cannot matter to the early fold
SUMMARY_RESERVE_TOKENS = 400  # a 300-word summary plus its framing

# Provider wordings of a context overflow (OpenAI, Anthropic, Google, Mistral, Ollama, vLLM,
# Bedrock, Groq). Specific phrases only: "context" alone also means Go's "context deadline
# exceeded", a context_id, a ContextVar...
_CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context length exceeded|exceeds? the context (?:length|window)"
    r"|prompt is too long|input is too long|too many tokens|input token count .* exceeds the maximum"
    r"|exceeds the maximum number of tokens|reduce the length of the messages"
    r"|too large for model with \d+ maximum context",
    re.IGNORECASE | re.DOTALL,
)


def estimate_tokens(text: str | None) -> int:
    return math.ceil(len(text or "") / 4) + 4


def is_context_length_error(error: BaseException) -> bool:
    """True when the error, or one it was raised from, is the provider refusing an oversized prompt."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _CONTEXT_OVERFLOW.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def estimated_size(texts: Iterable[str | None]) -> int:
    return sum(estimate_tokens(text) for text in texts)


def context_window(llm, configured_tokens: int | None) -> int | None:
    """The window to respect: the builder's setting when given, else what LangChain's model profile knows."""
    if configured_tokens and configured_tokens > 0:
        return int(configured_tokens)
    profile = getattr(llm, "profile", None) or {}
    tokens = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return int(tokens) if tokens else None
