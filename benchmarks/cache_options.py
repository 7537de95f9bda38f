"""What other request shapes would bill, replayed from one session's requests through the prompt-cache simulator.

Issue 21, item 4: options that might go past what the switch saves, measured before (and after) they are built.
Each option rewrites the requests the bundled server received for one configuration (``benchmarks.eval`` keeps
them, in order, with their times) and serves them through ``bundled_server/prompt_cache``, as the provider would.

OpenAI (the requests as the OpenAI route received them; OpenAI's automatic caching):

* ``as sent``: the requests unchanged (the eval's own figures, by another path).
* ``folds reuse the chat prefix``: each fold request is the session's previous chat request, the answer that
  followed it and the fold instructions at the end (Anthropic's advice for compaction), instead of the
  instructions, the summary and the batch on their own.

Anthropic (the requests as the Messages API received them, ``record["wire"]``; Anthropic's breakpoints, the
model's own minimum), each with its breakpoints taken off and set again:

* ``no breakpoints``: nothing is cached (Langflow's stock Agent sets no ``cache_control``).
* ``last block only``: the top-level ``cache_control`` (Anthropic's automatic caching) alone.
* ``LangChain's middleware``: what ``AnthropicPromptCachingMiddleware`` marks: the last tool, the system prompt
  and the top-level ``cache_control``.
* ``LangChain's middleware + summary``: that and the summary's message (``prompt_caching.SummaryBreakpoint``): what the
  Session Memory Agent sends with the switch on.

Token units are the bundled server's (``fake_openai.serialized_prompt``, ``estimate_prompt_tokens``; on the
Anthropic route, ``fake_anthropic.cache_blocks``), plus, on the OpenAI route, the tool definitions counted as
``benchmarks.eval`` counts them, so every option is in the eval's units.
"""

import copy
import json
import math
from collections.abc import Callable, Iterable, Sequence

from langflow_session_memory.bundled_server.fake_anthropic import blocks_of, cache_blocks
from langflow_session_memory.bundled_server.fake_openai import content_text, serialized_prompt
from langflow_session_memory.bundled_server.prompt_cache import (
    RATES,
    InputTokens,
    PromptCache,
    anthropic_minimum_tokens,
    anthropic_request,
    billed_input,
    openai_request,
)
from langflow_session_memory.services.session_memory.agent.prompt_caching import CACHE_CONTROL
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_FRAME
from langflow_session_memory.services.session_memory.summary.prompt import SUMMARY_INSTRUCTIONS

SUMMARY_OPENING = SUMMARY_FRAME.split("{summary}", 1)[0]  # how the summary's message starts


def tool_tokens(body: dict) -> int:
    tools = body.get("tools")
    return math.ceil(len(json.dumps(tools)) / 4) if tools else 0


def openai_replay(records: Iterable[dict]) -> list[InputTokens]:
    """Each request's input by OpenAI's rules, in order; tool definitions cached with any hit (they come first)."""
    cache, served = PromptCache(), []
    for record in records:
        body = record["body"]
        read, cache = openai_request(
            cache, serialized_prompt(body.get("model"), body.get("tools"), body["messages"]), record["ts"]
        )
        tools = tool_tokens(body)
        cached = read.cache_read + tools if read.cache_read else 0
        served.append(InputTokens(uncached=read.total + tools - cached, cache_read=cached))
    return served


def folds_reusing_the_chat_prefix(records: Sequence[dict]) -> list[dict]:
    """The session's requests with every fold request rewritten as the previous chat request, then the answer that
    followed it, then the fold instructions naming how many messages after the summary to fold."""
    rewritten, last_chat = [], None
    for record in records:
        if record["kind"] != "summary":
            last_chat = record if not _is_search_follow_up(record) else last_chat
            rewritten.append(record)
            continue
        if last_chat is None:
            rewritten.append(record)
            continue
        batch = _batch_lines(record)
        answer = next((line.split(":", 1)[1].strip() for line in reversed(batch) if line.startswith("Machine:")), "")
        instruction = f"{SUMMARY_INSTRUCTIONS}\n\nUpdate the notes with the first {len(batch)} messages after them."
        messages = [
            *last_chat["body"]["messages"],
            {"role": "assistant", "content": answer},
            {"role": "user", "content": instruction},
        ]
        rewritten.append({**record, "body": {**last_chat["body"], "messages": messages}})
    return rewritten


def anthropic_replay(records: Iterable[dict], breakpoints: Callable[[dict], dict]) -> list[InputTokens]:
    """Each request's input by Anthropic's rules, in order, the chat requests sent with ``breakpoints`` instead of
    their own (fold requests carry none: only the Agent's requests are marked)."""
    cache, served = PromptCache(), []
    for record in records:
        body = without_breakpoints(record["wire"])
        body = body if record["kind"] == "summary" else breakpoints(body)
        read, cache = anthropic_request(
            cache, cache_blocks(body), record["ts"], anthropic_minimum_tokens(str(body.get("model")))
        )
        served.append(read)
    return served


def without_breakpoints(body: dict) -> dict:
    """The request with no ``cache_control`` anywhere (tools, system, message blocks, top level)."""
    body = copy.deepcopy(body)
    body.pop("cache_control", None)
    for block in _markable(body):
        block.pop("cache_control", None)
    return body


def last_block(body: dict) -> dict:
    return {**body, "cache_control": CACHE_CONTROL}


def langchain_middleware(body: dict) -> dict:
    """What ``AnthropicPromptCachingMiddleware`` marks: the last tool, the system prompt's last block, the
    top-level ``cache_control``."""
    body = last_block(copy.deepcopy(body))
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = CACHE_CONTROL
    if body.get("system"):
        body["system"] = blocks_of(body["system"])
        body["system"][-1]["cache_control"] = CACHE_CONTROL
    return body


def langchain_middleware_and_summary(body: dict) -> dict:
    body = langchain_middleware(body)
    for message in body["messages"]:
        content = blocks_of(message.get("content"))
        if message.get("role") == "user" and content and content[0].get("text", "").startswith(SUMMARY_OPENING):
            message["content"] = [{**content[0], "cache_control": CACHE_CONTROL}, *content[1:]]
            break
    return body


def _markable(body: dict) -> Iterable[dict]:
    yield from body.get("tools") or []
    if isinstance(body.get("system"), list):
        yield from body["system"]
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            yield from (block for block in message["content"] if isinstance(block, dict))


def billed(served: Iterable[InputTokens], rate: str) -> float:
    return sum(billed_input(tokens, RATES[rate]) for tokens in served)


# Each option: how it serves one session's requests, the rates it is billed at, and the option that is the stock
# Agent's requests as sent at those rates (the baseline of every ratio).
OPENAI_OPTIONS: dict[str, tuple[Callable[[Sequence[dict]], list[InputTokens]], tuple[str, ...], str]] = {
    "as sent": (openai_replay, ("gpt-4o", "gpt-5"), "as sent"),
    "folds reuse the chat prefix": (
        lambda records: openai_replay(folds_reusing_the_chat_prefix(records)),
        ("gpt-4o", "gpt-5"),
        "as sent",
    ),
}
ANTHROPIC_OPTIONS: dict[str, tuple[Callable[[Sequence[dict]], list[InputTokens]], tuple[str, ...], str]] = {
    name: (lambda records, marks=marks: anthropic_replay(records, marks), ("anthropic",), "no breakpoints")
    for name, marks in (
        ("no breakpoints", lambda body: body),
        ("last block only", last_block),
        ("LangChain's middleware", langchain_middleware),
        ("LangChain's middleware + summary", langchain_middleware_and_summary),
    )
}


def option_ratios(
    options: dict, sessions: dict[str, Sequence[dict]], stock: str
) -> dict[tuple[str, str], dict[str, float]]:
    """(option, rate) -> configuration -> billed input against the stock Agent's requests as sent at that rate."""
    served = {
        (option, name): replay(records)
        for option, (replay, *_rest) in options.items()
        for name, records in sessions.items()
    }
    ratios = {}
    for option, (_replay, rates, baseline) in options.items():
        for rate in rates:
            today = billed(served[(baseline, stock)], rate)
            ratios[(option, rate)] = {name: billed(served[(option, name)], rate) / today for name in sessions}
    return ratios


def _is_search_follow_up(record: dict) -> bool:
    messages = record["body"]["messages"]
    return bool(messages) and messages[-1].get("role") == "tool"


def _batch_lines(record: dict) -> list[str]:
    text = content_text(record["body"]["messages"][-1].get("content"))
    transcript = text.split("Next messages:", 1)[-1]
    return [line for line in transcript.splitlines() if line.startswith(("User:", "Machine:"))]
