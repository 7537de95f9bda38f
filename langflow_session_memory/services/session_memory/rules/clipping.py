"""One clipper: a text cut to a token budget, its head and its tail kept, a marker between them (pure).

Used for every text the service makes smaller without the model's help: a tool result a call cannot
hold (``rules/call_fit``) and a message too long for a fold request (``summary/prompt``). Each caller
says in its own marker what was cut and what the reader can do; the marker's ``{cut}`` and ``{total}``
are counts of characters. The stored message is never changed, only the text sent.
"""

from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT
from langflow_session_memory.services.session_memory.rules.token_estimate import estimate_tokens


def clipped(text: str, max_tokens: int, marker: str) -> str:
    """``text`` with its middle replaced by ``marker`` so that it estimates at most ``max_tokens`` (or the
    marker's own size, when less is asked); the head keeps ``CALL_FIT.clip_head_share`` of what is kept."""
    if estimate_tokens(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest kept length whose clip fits
        middle = (low + high + 1) // 2
        if estimate_tokens(_clip(text, middle, marker)) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return _clip(text, low, marker)


def _clip(text: str, kept: int, marker: str) -> str:
    head = int(kept * CALL_FIT.clip_head_share)
    tail = kept - head
    said = marker.format(cut=len(text) - kept, total=len(text))
    return text[:head] + said + (text[len(text) - tail :] if tail else "")
