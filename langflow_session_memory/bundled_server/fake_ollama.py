"""Ollama's own API on the bundled model server: the request read and the answer written as Ollama does.

Langflow's Agent on its Ollama provider talks to ``POST /api/chat`` through langchain-ollama and the ``ollama``
client (``OLLAMA_BASE_URL`` names the server), and Langflow lists the models that call tools from
``GET /api/tags`` and ``POST /api/show``. The server answers by the same rules as on its OpenAI route
(``fake_openai``): this module is only the wire. It turns a request into the OpenAI-shaped messages those rules
read (:func:`openai_shape`), refuses what Ollama refuses (:func:`request_problem`), and writes the answer as one
object or as Ollama's stream (:func:`answer`, :func:`stream_lines`). Pure functions; no I/O.

What Ollama does, as its API reference says (``OLLAMA_API``) and its client's types show:

* Only a model pulled on the server answers; another is refused with 404
  ``model "NAME" not found, try pulling it first``. ``/api/tags`` lists the pulled models and ``/api/show`` what
  one can do (``capabilities``: ``completion``, ``tools``, ``embedding``) and its trained window.
* ``messages`` hold ``system``, ``user``, ``assistant`` and ``tool`` messages whose content is a string; an
  assistant's ``tool_calls`` are ``{"function": {"name", "arguments"}}`` with the arguments an object, not a JSON
  string; a tool's result names no call.
* The output cap is ``options.num_predict``; an answer cut there ends with ``done_reason: "length"``.
* A streamed answer is newline-delimited JSON: objects with ``message`` and ``done: false``, tool calls whole in
  one of them, then one with ``done: true``, ``done_reason`` and the counts (``prompt_eval_count``,
  ``eval_count``). An answer not streamed is that last object with the whole message.
* Errors are ``{"error": "..."}``.
"""

import json
import re
from datetime import UTC, datetime
from typing import Any

OLLAMA_API = "https://github.com/ollama/ollama/blob/main/docs/api.md"
# What ``/api/show`` reports for a chat model and for an embedding model (the bundled server's /api/embed).
CHAT_CAPABILITIES = ("completion", "tools")
EMBEDDING_CAPABILITIES = ("embedding",)
# The embedding models among those the server may list as pulled (its /api/embed serves any name).
EMBEDDING_MODELS = frozenset({"all-minilm", "nomic-embed-text"})
TRAINED_CONTEXT = 32768


def error_body(message: str) -> dict:
    return {"error": message}


def request_problem(body: Any, pulled: tuple[str, ...]) -> tuple[int, str] | None:
    """The status and message Ollama would refuse this request with, or None."""
    if not isinstance(body, dict):
        return 400, "invalid request body"
    model = body.get("model")
    if not model:
        return 400, "model is required"
    if model not in pulled:
        return 404, f'model "{model}" not found, try pulling it first'
    if not isinstance(body.get("messages"), list):
        return 400, "messages is required"
    return None


def openai_shape(body: dict) -> dict:
    """The request as the OpenAI route's rules read it: tool calls with JSON arguments and ids, the cap as
    ``max_tokens``."""
    messages = []
    for position, message in enumerate(body["messages"]):
        shaped = {"role": message.get("role"), "content": message.get("content") or ""}
        calls = [
            {
                "id": f"call_{position}_{index}",
                "type": "function",
                "function": {
                    "name": (call.get("function") or {}).get("name"),
                    "arguments": json.dumps((call.get("function") or {}).get("arguments") or {}),
                },
            }
            for index, call in enumerate(message.get("tool_calls") or [])
        ]
        if calls:
            shaped["tool_calls"] = calls
        messages.append(shaped)
    return {
        "model": body.get("model"),
        "messages": messages,
        "tools": body.get("tools") or None,
        "stream": body.get("stream", True) is not False,
        "max_tokens": (body.get("options") or {}).get("num_predict"),
    }


def ollama_calls(openai_calls: list[dict]) -> list[dict]:
    """OpenAI ``tool_calls`` as Ollama writes them: the function's name and its arguments as an object."""
    return [
        {"function": {"name": call["function"]["name"], "arguments": json.loads(call["function"]["arguments"])}}
        for call in openai_calls
    ]


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def answer(
    model: str, content: str, calls: list[dict], done_reason: str, prompt_tokens: int, output_tokens: int
) -> dict:
    """The answer not streamed: one object with the whole message and the counts."""
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        "done_reason": done_reason,
        "prompt_eval_count": prompt_tokens,
        "eval_count": output_tokens,
    }


def stream_lines(
    model: str, content: str, calls: list[dict], done_reason: str, prompt_tokens: int, output_tokens: int
) -> list[str]:
    """The streamed answer: the tool calls in one object, the text word by word, then the last object."""

    def line(message: dict, **extra: Any) -> str:
        return json.dumps({"model": model, "created_at": _now(), "message": message, **extra}) + "\n"

    lines = [line({"role": "assistant", "content": "", "tool_calls": calls}, done=False)] if calls else []
    lines += [line({"role": "assistant", "content": piece}, done=False) for piece in re.findall(r"\s*\S+", content)]
    last = answer(model, "", [], done_reason, prompt_tokens, output_tokens)
    lines.append(json.dumps(last) + "\n")
    return lines


def tags(pulled: tuple[str, ...]) -> dict:
    """``GET /api/tags``: the pulled models."""
    return {
        "models": [
            {"name": name, "model": name, "modified_at": "2026-01-01T00:00:00Z", "size": 0, "details": {}}
            for name in pulled
        ]
    }


def show(name: str) -> dict:
    """``POST /api/show`` of a pulled model: what it can do and its trained window."""
    embeds = name in EMBEDDING_MODELS
    family = name.split(":")[0]
    return {
        "details": {"family": family, "format": "gguf"},
        "model_info": {"general.architecture": family, f"{family}.context_length": TRAINED_CONTEXT},
        "capabilities": list(EMBEDDING_CAPABILITIES if embeds else CHAT_CAPABILITIES),
    }
