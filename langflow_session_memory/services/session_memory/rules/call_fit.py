"""A model call inside a turn, after a tool ran, made to fit the context window (pure).

One huge tool result can cross the window in the middle of a turn. Re-running the Agent would
run its tools again, so the call itself is what is made smaller, in this order (the first that
makes it fit ends it):

1. tool results the model has already read (those followed by a later model answer) over
   ``result_cap`` tokens are clipped, as LangChain's ``ClearToolUsesEdit`` and the OpenAI Agents
   SDK's ``ToolOutputTrimmer`` clear old results: done before every call that follows a tool;
2. the history before the turn's user message is reduced to the summary (the search tool still
   reaches what the summary dropped);
3. the largest tool results of this turn are clipped, all to one size, just enough to fit.

A result to be clipped first loses its padding (:func:`compacted`: a DataFrame as pandas renders it
pads every column to its widest value, 200,000 spaces before a 200 KB page's first line), then keeps
its head and its tail with a one-line marker between them saying how much was cut and that the tool
can be asked again with a narrower request. No message is removed from
the turn, so every tool call keeps its result and every result its call; what the Agent's graph
and Langflow store is not changed (only the request sent is).
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langflow_session_memory.services.session_memory.rules import clipping
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_ACKNOWLEDGEMENT, carries_summary
from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT
from langflow_session_memory.services.session_memory.rules.token_estimate import (
    message_tokens,
    messages_tokens,
    text_of,
)

CLIP_MARKER = (
    "\n[... {cut:,} of {total:,} characters of this tool result were cut here to fit the model's context window; "
    "call the tool again with a narrower request to see that part ...]\n"
)

# Runs of spaces and tabs that compacting may change: two or more, or one that ends a line. No backtracking: a
# padded row of 60,000 spaces is one match (``[ \t]+$`` tried each of its positions: minutes on one table).
_SPACE_RUN = re.compile(r"[ \t]{2,}|[ \t](?=[\r\n]|\Z)")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Reduction:
    """What fitting one call changed, in counts and estimated tokens (never text)."""

    size_before: int
    size_after: int
    history_left_out: int = 0
    results_clipped: int = 0
    result_tokens_before: int = 0
    result_tokens_after: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.history_left_out or self.results_clipped)


@dataclass(frozen=True)
class FittedCall:
    messages: list[BaseMessage]
    reduction: Reduction

    @property
    def size(self) -> int:
        return self.reduction.size_after


def after_tool(messages: Sequence[BaseMessage]) -> bool:
    """Whether this call follows a model answer of this turn (a tool ran): anything after the user's message."""
    start = turn_start(messages)
    return start is not None and start < len(messages) - 1


def turn_start(messages: Sequence[BaseMessage]) -> int | None:
    """The turn's user message: the last user-role message (the turn goes on with answers and tool results only)."""
    return next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)), None)


def fit_call(
    messages: Sequence[BaseMessage], *, fixed_tokens: int, limit: int, result_cap: int | None, summary: str | None
) -> FittedCall:
    """The call's messages made to fit in ``limit`` tokens with ``fixed_tokens`` (system prompt, tools) beside them.

    ``summary``: the text of the message carrying the session's summary, kept when the history is
    reduced. The result may still not fit (the user's message alone is too large): its size says so.
    """
    start = turn_start(messages)
    size_before = fixed_tokens + messages_tokens(messages)
    if start is None:
        return FittedCall(list(messages), Reduction(size_before, size_before))
    history, turn = list(messages[:start]), list(messages[start:])
    caps = {
        i: result_cap for i in _read_results(turn) if result_cap is not None and message_tokens(turn[i]) > result_cap
    }
    left_out = 0
    if fixed_tokens + messages_tokens(history) + sum(_capped_sizes(turn, caps).values()) > limit:
        kept = summary_history(history, summary)
        left_out, history = len(history) - len(kept), kept
        caps = _caps_to_fit(turn, caps, room=limit - fixed_tokens - messages_tokens(history))
    fitted = [_clipped(message, caps[i]) if i in caps else message for i, message in enumerate(turn)]
    return FittedCall(
        [*history, *fitted],
        Reduction(
            size_before=size_before,
            size_after=fixed_tokens + messages_tokens(history) + messages_tokens(fitted),
            history_left_out=left_out,
            results_clipped=len(caps),
            result_tokens_before=sum(message_tokens(turn[i]) for i in caps),
            result_tokens_after=sum(message_tokens(fitted[i]) for i in caps),
        ),
    )


def retry_target(refused_size: int, limit: int | None) -> int:
    """The size to retry a refused call at: inside the limit the provider (or the builder) gave, or, where our
    estimate was already inside it or no limit is known, at ``CALL_FIT.retry_shrink`` of the estimate."""
    if limit and refused_size > limit:
        return int(CALL_FIT.fit_ratio * limit)
    return int(CALL_FIT.retry_shrink * refused_size)


def summary_history(history: Sequence[BaseMessage], summary: str | None) -> list[BaseMessage]:
    """The history reduced to the summary, acknowledged so that the user's message follows an answer
    (strict chat templates want roles to alternate); nothing when there is no summary."""
    if not summary or not any(carries_summary(message, summary) for message in history):
        return []
    return [HumanMessage(content=summary), AIMessage(content=SUMMARY_ACKNOWLEDGEMENT)]


def compacted(text: str) -> str:
    """``text`` without its padding: spaces and tabs that end a line go, a run of them inside a line becomes one
    space, indentation keeps at most ``CALL_FIT.max_indent``, and blank lines at most one in a row. Words,
    line breaks and the order of everything are kept."""
    return _BLANK_LINES.sub("\n\n", _SPACE_RUN.sub(_compacted_run, text))


def _compacted_run(found: re.Match) -> str:
    text, start, end = found.string, found.start(), found.end()
    if end == len(text) or text[end] in "\r\n":
        return ""
    if start == 0 or text[start - 1] == "\n":
        return found.group()[: CALL_FIT.max_indent]
    return " "


def _read_results(turn: Sequence[BaseMessage]) -> list[int]:
    """The turn's tool results that a later model answer has already read."""
    last_answer = max((i for i, m in enumerate(turn) if isinstance(m, AIMessage)), default=-1)
    return [i for i, m in enumerate(turn[:last_answer]) if isinstance(m, ToolMessage)]


def _capped_sizes(turn: Sequence[BaseMessage], caps: dict[int, int]) -> dict[int, int]:
    return {i: min(message_tokens(message), caps.get(i, message_tokens(message))) for i, message in enumerate(turn)}


def _caps_to_fit(turn: Sequence[BaseMessage], caps: dict[int, int], room: int) -> dict[int, int]:
    """``caps`` with the largest tool results capped at one size, the largest one that frees enough for ``room``."""
    current = _capped_sizes(turn, caps)
    excess = sum(current.values()) - room
    results = {i: size for i, size in current.items() if isinstance(turn[i], ToolMessage)}
    if excess <= 0 or not results:
        return caps
    level = water_level(list(results.values()), excess)
    return caps | {i: level for i, size in results.items() if size > level}


def water_level(sizes: Sequence[int], excess: int) -> int:
    """The largest cap that frees at least ``excess`` when every size above it is cut to it (sizes at or
    under it are not touched); never under ``CALL_FIT.min_clipped_tokens``, where it may free less."""
    ordered = sorted(sizes, reverse=True)
    total = 0
    for count, size in enumerate(ordered, start=1):
        total += size
        below = ordered[count] if count < len(ordered) else 0
        level = (total - excess) // count
        if level >= below:
            return max(level, CALL_FIT.min_clipped_tokens)
    return CALL_FIT.min_clipped_tokens


def _clipped(message: BaseMessage, cap: int) -> BaseMessage:
    """The result without its padding, clipped to ``cap`` tokens, the marker included, so a clipped result never
    estimates over it."""
    return message.model_copy(update={"content": clipping.clipped(compacted(text_of(message)), cap, CLIP_MARKER)})
