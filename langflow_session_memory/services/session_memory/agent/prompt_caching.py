"""Anthropic prompt-cache breakpoints on the Agent's requests, while Summarize Older Messages is on.

OpenAI and Gemini cache a repeated prompt prefix by themselves. Anthropic caches only where a request
asks (``cache_control``), at most 4 places a request ("breakpoints"), and bills what it writes at 1.25x
the input price and what it reads at 0.1x (rules and sources in ``bundled_server/prompt_cache.py``). With the
switch on, a session's requests keep their prefix from one turn to the next until a fold
(docs/design.md, "The prompt-cache contract"), so marking it pays:

* LangChain's ``AnthropicPromptCachingMiddleware`` marks the tool definitions, the system prompt and,
  with the top-level ``cache_control`` (Anthropic's "automatic caching"), the request's last block: each
  request reads what the previous one wrote and writes only what it adds.
* :class:`SummaryBreakpoint` marks the summary: the prefix up to it is read again whenever what follows
  it changes while it does not (a fold that leaves the summary as it was, a history trimmed to fit
  the window). It costs no write of its own: a request's write is counted once, up to its last
  breakpoint.

Measured in ``make eval`` (docs/eval.md, "On Anthropic"): 0.14x the stock Agent's billed input, against
0.58x with nothing marked; 0.16x without the summary's breakpoint. The stock Agent's window slides every
turn once a session passes N messages, so breakpoints there write prefixes never read (1.15x its bill):
with the switch off nothing is added, and the stock Agent's requests stay byte for byte Langflow's.
Folds carry no breakpoint: each fold request is a new summary and a new batch, read once.
"""

from collections.abc import Awaitable, Callable

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules.assembly import carries_summary

MAX_BREAKPOINTS = 4  # "You can define up to 4 cache breakpoints"; a 5th is refused with HTTP 400
CACHE_CONTROL = {"type": "ephemeral", "ttl": "5m"}


def cache_breakpoints(llm, summary: Callable[[], str | None]) -> list[AgentMiddleware]:
    """The middleware that marks a request's breakpoints, for a model whose provider caches only where asked.

    ``summary`` gives the text of the message carrying the summary as this run sends it (None without one); it
    is read at each model call, since a compaction after "prompt too long" replaces the history.
    """
    if not isinstance(llm, ChatAnthropic):
        return []
    return [AnthropicPromptCachingMiddleware(ttl=CACHE_CONTROL["ttl"]), SummaryBreakpoint(summary)]


class SummaryBreakpoint(AgentMiddleware):
    """Marks the message carrying the summary as a breakpoint, while the request has fewer than
    :data:`MAX_BREAKPOINTS`."""

    def __init__(self, summary: Callable[[], str | None]) -> None:
        self.summary = summary

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(self._marked(request))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(self._marked(request))

    def _marked(self, request: ModelRequest) -> ModelRequest:
        try:
            summary = self.summary()
            if not summary or breakpoints(request) >= MAX_BREAKPOINTS:
                return request
            return request.override(messages=[_marked_summary(message, summary) for message in request.messages])
        except Exception as error:  # noqa: BLE001 - a breakpoint only saves money: the request goes unmarked, logged
            logger.error(f"{log_events.CACHE_BREAKPOINT_FAILED} reason={describe(error)}")
            return request


def breakpoints(request: ModelRequest) -> int:
    """The breakpoints a request already carries: tools, system and message blocks, and the top-level one."""
    tools = sum(1 for tool in request.tools if "cache_control" in _tool_fields(tool))
    system = _marked_blocks(request.system_message) if request.system_message is not None else 0
    return tools + system + sum(map(_marked_blocks, request.messages)) + ("cache_control" in request.model_settings)


def _tool_fields(tool) -> dict:
    if isinstance(tool, BaseTool):
        return tool.extras or {}
    return tool if isinstance(tool, dict) else {}


def _marked_blocks(message: BaseMessage) -> int:
    content = message.content
    if not isinstance(content, list):
        return 0
    return sum(1 for block in content if isinstance(block, dict) and "cache_control" in block)


def _marked_summary(message: BaseMessage, summary: str) -> BaseMessage:
    if not carries_summary(message, summary):
        return message
    return message.model_copy(update={"content": [{"type": "text", "text": summary, "cache_control": CACHE_CONTROL}]})
