"""What other request shapes would bill, replayed from one session's requests through the prompt-cache simulator.

Issue 21, item 4: options that might go past what the switch saves today, measured before they are built. Each
option rewrites the requests the bundled server received for one configuration (``benchmarks.eval`` keeps them,
in order, with their times) and serves them through ``testing/prompt_cache``, as the provider would:

* ``as sent``: the requests unchanged (OpenAI's automatic caching; the eval's own figures, by another path).
* ``folds reuse the chat prefix``: each fold request is the session's previous chat request, the answer that
  followed it and the fold instructions at the end (Anthropic's advice for compaction), instead of the
  instructions, the notes and the batch on their own; OpenAI's rules.
* ``anthropic, no breakpoints``: nothing is cached (Langflow 1.13 sets no ``cache_control``).
* ``anthropic, breakpoints``: ``cache_control`` after the system prompt, after the notes (ours) and on the
  last message, as Anthropic recommends for a conversation; Claude Sonnet 4.5's 1,024-token minimum.

Token units are the bundled server's (``fake_openai.serialized_prompt``, ``estimate_prompt_tokens``), plus the
tool definitions counted as ``benchmarks.eval`` counts them, so every option is in the eval's units.
"""

import json
import math
from collections.abc import Callable, Iterable, Sequence

from langflow_session_memory.services.session_memory.assembly import SUMMARY_FRAME
from langflow_session_memory.services.session_memory.summarizer import SUMMARY_INSTRUCTIONS
from langflow_session_memory.testing.fake_openai import content_text, estimate_prompt_tokens, serialized_prompt
from langflow_session_memory.testing.prompt_cache import (
    ANTHROPIC_MINIMUM_TOKENS,
    RATES,
    Block,
    InputTokens,
    PromptCache,
    anthropic_request,
    billed_input,
    openai_request,
)

ANTHROPIC_MODEL = "claude-sonnet-4-5"
NOTES_OPENING = SUMMARY_FRAME.split("{summary}", 1)[0]  # how the notes' message starts


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
    followed it, then the fold instructions naming how many messages after the notes to fold."""
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


def anthropic_replay(records: Iterable[dict], *, breakpoints: bool) -> list[InputTokens]:
    """Each request's input by Anthropic's rules: blocks for the tools, the system prompt and each message."""
    cache, served = PromptCache(), []
    minimum = ANTHROPIC_MINIMUM_TOKENS[ANTHROPIC_MODEL]
    for record in records:
        read, cache = anthropic_request(cache, _blocks(record["body"], breakpoints=breakpoints), record["ts"], minimum)
        served.append(read)
    return served


def billed(served: Iterable[InputTokens], rate: str) -> float:
    return sum(billed_input(tokens, RATES[rate]) for tokens in served)


# Each option: how it serves one session's requests, the rates it is billed at, and the option that is today's
# stock Agent at those rates (the baseline of every ratio).
OPTIONS: dict[str, tuple[Callable[[Sequence[dict]], list[InputTokens]], tuple[str, ...], str]] = {
    "as sent (OpenAI)": (openai_replay, ("gpt-4o", "gpt-5"), "as sent (OpenAI)"),
    "folds reuse the chat prefix (OpenAI)": (
        lambda records: openai_replay(folds_reusing_the_chat_prefix(records)),
        ("gpt-4o", "gpt-5"),
        "as sent (OpenAI)",
    ),
    "Anthropic, no breakpoints": (
        lambda records: anthropic_replay(records, breakpoints=False),
        ("anthropic",),
        "Anthropic, no breakpoints",
    ),
    "Anthropic, breakpoints": (
        lambda records: anthropic_replay(records, breakpoints=True),
        ("anthropic",),
        "Anthropic, no breakpoints",
    ),
}


def option_ratios(sessions: dict[str, Sequence[dict]], stock: str) -> dict[tuple[str, str], dict[str, float]]:
    """(option, rate) -> configuration -> billed input against today's stock Agent at that rate."""
    served = {
        (option, name): replay(records)
        for option, (replay, *_rest) in OPTIONS.items()
        for name, records in sessions.items()
    }
    ratios = {}
    for option, (_replay, rates, baseline) in OPTIONS.items():
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


def _blocks(body: dict, *, breakpoints: bool) -> list[Block]:
    """Tools, system prompt and messages as blocks; breakpoints after the system prompt, after the notes and on
    the last message (at most 4)."""
    messages = body["messages"]
    blocks = [Block(content=json.dumps(body.get("tools"), sort_keys=True), tokens=tool_tokens(body))]
    last = len(messages) - 1
    for index, message in enumerate(messages):
        text = content_text(message.get("content"))
        marked = breakpoints and (message.get("role") == "system" or text.startswith(NOTES_OPENING) or index == last)
        fields = json.dumps({name: value for name, value in message.items() if name != "content"}, sort_keys=True)
        blocks.append(Block(content=(fields, text), tokens=estimate_prompt_tokens([message]), cache_control=marked))
    return blocks
