"""Anthropic's Messages API on the bundled model server: the request read, checked and cached as Anthropic does.

Langflow's Agent on its Anthropic provider talks to ``POST /v1/messages`` through langchain-anthropic and the
``anthropic`` SDK (``ANTHROPIC_API_URL`` names the server). The server answers by the same rules as on its
OpenAI route (``fake_openai``): this module is only the wire. It turns a request into the OpenAI-shaped messages
those rules read (:func:`openai_shape`), refuses what Anthropic refuses (:func:`request_problem`), cuts the
request into the blocks Anthropic's prompt cache sees (:func:`cache_blocks`), and writes the answer as a message
or as Anthropic's stream of events (:func:`message`, :func:`events`). Pure functions; no I/O.

What Anthropic does, as its API reference and prompt-caching guide say (``ANTHROPIC_MESSAGES``,
``prompt_cache.ANTHROPIC_PROMPT_CACHING``) and its SDK's types and users' reports show:

* ``system`` is top-level (a string or text blocks); ``messages`` hold only ``user`` and ``assistant`` turns
  whose content is a string or blocks (``text``, ``tool_use``, ``tool_result``); consecutive turns of one role
  are combined. ``max_tokens`` is required.
* Refused with 400 ``invalid_request_error`` (its wording): no ``max_tokens`` ("max_tokens: Field required"),
  no message ("messages: at least one message is required"), another role, a message without content other
  than a final assistant one ("all messages must have non-empty content except for the optional final
  assistant message"), an empty text block ("text content blocks must be non-empty"), a ``tool_result`` without its
  ``tool_use`` in the message before, a ``tool_use`` without its ``tool_result`` in the message after, more
  than 4 ``cache_control`` breakpoints, and a prompt over the context window ("prompt is too long: N tokens >
  M maximum", which LangChain raises as ``ContextOverflowError``).
* Usage: ``input_tokens`` (neither read from nor written to the cache), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens`` with its split by TTL (``cache_creation.ephemeral_5m_input_tokens``), and
  ``output_tokens``. A stream reports them in ``message_start`` and again, cumulative, in ``message_delta``
  (where LangChain reads them).
* Errors are ``{"type": "error", "error": {"type": ..., "message": ...}}``.

Token counts are the OpenAI route's estimate, block by block: ``ceil(chars/4)`` of each text, tool definition
(as JSON) and tool call, plus 4 for each message (the system prompt counts as one).
"""

import json
import math
import re
from typing import Any

from langflow_session_memory.bundled_server.prompt_cache import ANTHROPIC_MAX_BREAKPOINTS, Block, InputTokens

ANTHROPIC_MESSAGES = "https://platform.claude.com/docs/en/api/messages"
ROLES = ("user", "assistant")
MESSAGE_TOKENS = 4
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def blocks_of(content: Any) -> list[dict]:
    """A message's or the system prompt's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _text(blocks: list[dict]) -> str:
    return "\n".join(block.get("text", "") for block in blocks if block.get("type") == "text")


def _result_text(block: dict) -> str:
    content = block.get("content")
    return content if isinstance(content, str) else _text(blocks_of(content))


def request_problem(body: dict) -> str | None:
    """Why Anthropic would refuse this request (its words), or None."""
    if not body.get("max_tokens"):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        blocks = blocks_of(message.get("content"))
        final_assistant = index == len(messages) - 1 and message["role"] == "assistant"
        if not message.get("content") and not final_assistant:
            return (
                f"messages.{index}: all messages must have non-empty content except for the optional final "
                "assistant message"
            )
        if any(block.get("type") == "text" and not block.get("text") for block in blocks) and not final_assistant:
            return "messages: text content blocks must be non-empty"
    if problem := _tool_pairing_problem(messages):
        return problem
    found = len(breakpoints_marked(body))
    if found > ANTHROPIC_MAX_BREAKPOINTS:
        return f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
    return None


def _tool_pairing_problem(messages: list[dict]) -> str | None:
    """Each ``tool_use`` answered by a ``tool_result`` in the very next message, and no result without its call."""
    for index, message in enumerate(messages):
        blocks = blocks_of(message.get("content"))
        before = blocks_of(messages[index - 1].get("content")) if index else []
        called = {block.get("id") for block in before if block.get("type") == "tool_use"}
        for position, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in called:
                return (
                    f"messages.{index}.content.{position}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message."
                )
        after = blocks_of(messages[index + 1].get("content")) if index + 1 < len(messages) else None
        calls = [block.get("id") for block in blocks if block.get("type") == "tool_use"]
        answered = {block.get("tool_use_id") for block in after or [] if block.get("type") == "tool_result"}
        if after is not None and (missing := [call for call in calls if call not in answered]):
            return (
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the "
                "next message."
            )
    return None


def breakpoints_marked(body: dict) -> list[str]:
    """Where a request marks breakpoints, one entry a block, in the cache's order: ``tool <name>``, ``system``,
    ``message <index>``, then ``top level`` for the top-level ``cache_control``."""
    tools = [tool for tool in body.get("tools") or [] if isinstance(tool, dict)]
    found = [f"tool {tool.get('name')}" for tool in tools if tool.get("cache_control")]
    found += ["system" for block in blocks_of(body.get("system")) if block.get("cache_control")]
    for index, message in enumerate(body.get("messages") or []):
        found += [f"message {index}" for block in blocks_of(message.get("content")) if block.get("cache_control")]
    return found + (["top level"] if body.get("cache_control") else [])


def openai_shape(body: dict) -> dict:
    """The request as the OpenAI route's rules read it: a system message, then each turn as chat messages
    (a ``tool_use`` as a tool call, each ``tool_result`` as a ``tool`` message), the tools as functions."""
    messages = []
    if system := _text(blocks_of(body.get("system"))):
        messages.append({"role": "system", "content": system})
    for message in body["messages"]:
        blocks = blocks_of(message.get("content"))
        messages += [
            {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": _result_text(block)}
            for block in blocks
            if block.get("type") == "tool_result"
        ]
        calls = [
            {
                "id": block.get("id"),
                "type": "function",
                "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input") or {})},
            }
            for block in blocks
            if block.get("type") == "tool_use"
        ]
        text = _text(blocks)
        if text or calls or not any(block.get("type") == "tool_result" for block in blocks):
            messages.append({"role": message["role"], "content": text, **({"tool_calls": calls} if calls else {})})
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool.get("name"),
                "description": tool.get("description", ""),
                "parameters": tool.get("input_schema", {}),
            },
        }
        for tool in body.get("tools") or []
    ]
    return {
        "model": body.get("model"),
        "messages": messages,
        "tools": tools or None,
        "stream": bool(body.get("stream")),
        "max_tokens": body.get("max_tokens"),
    }


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _without_cache_control(block: dict) -> str:
    return json.dumps({name: value for name, value in block.items() if name != "cache_control"}, sort_keys=True)


def cache_blocks(body: dict) -> list[Block]:
    """The request as Anthropic's prompt cache sees it: each tool, system block and message block in order,
    with its tokens and whether it is a breakpoint; the top-level ``cache_control`` marks the last block."""
    blocks = [_block("tool", tool, _tokens(_without_cache_control(tool))) for tool in body.get("tools") or []]
    turns = [("system", body.get("system")), *((m["role"], m.get("content")) for m in body["messages"])]
    for role, turn in turns:
        for position, block in enumerate(blocks_of(turn)):
            blocks.append(_block(role, block, (MESSAGE_TOKENS if position == 0 else 0) + _tokens(_block_text(block))))
    if body.get("cache_control") and blocks:
        last = blocks[-1]
        blocks[-1] = Block(last.content, last.tokens, cache_control=True)
    return blocks


def _block(role: str, block: dict, tokens: int) -> Block:
    return Block((role, _without_cache_control(block)), tokens, cache_control=bool(block.get("cache_control")))


def _block_text(block: dict) -> str:
    kind = block.get("type")
    if kind == "tool_use":
        return json.dumps(block.get("input") or {})
    if kind == "tool_result":
        return _result_text(block)
    return block.get("text", "")


def usage(tokens: InputTokens, output_tokens: int) -> dict:
    return {
        "input_tokens": tokens.uncached,
        "cache_creation_input_tokens": tokens.cache_write,
        "cache_read_input_tokens": tokens.cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": tokens.cache_write, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
    }


def content(text: str, tool_calls: list[dict]) -> list[dict]:
    """The answer's blocks: the text (none when empty, as Claude answers nothing), or calls of tools
    (``{"id", "name", "input"}`` each, one ``tool_use`` block each)."""
    if tool_calls:
        return [{"type": "tool_use", **call} for call in tool_calls]
    return [{"type": "text", "text": text}] if text else []


def message(base: dict, blocks: list[dict], stop_reason: str, answer_usage: dict) -> dict:
    """A whole (non-streamed) answer."""
    return {
        **base,
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": answer_usage,
    }


def events(base: dict, blocks: list[dict], stop_reason: str, answer_usage: dict) -> list[str]:
    """A streamed answer as Anthropic's server-sent events: the message with its input usage, each block opened,
    filled (text word by word, a tool call's input as one JSON delta) and closed, then the stop reason with the
    whole usage, and the end."""

    def event(kind: str, **data: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    opening = message(base, [], None, {**answer_usage, "output_tokens": 1})
    sent = [event("message_start", message=opening), event("ping")]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            sent.append(event("content_block_start", index=index, content_block={**block, "input": {}}))
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            sent.append(event("content_block_delta", index=index, delta=delta))
        else:
            sent.append(event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
            sent += [
                event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
                for piece in re.findall(r"\s*\S+", block["text"])
            ]
        sent.append(event("content_block_stop", index=index))
    cumulative = {name: value for name, value in answer_usage.items() if name != "cache_creation"}
    sent.append(event("message_delta", delta={"stop_reason": stop_reason, "stop_sequence": None}, usage=cumulative))
    sent.append(event("message_stop"))
    return sent
