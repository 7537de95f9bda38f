"""Deterministic OpenAI-compatible chat server for tests, demos and benchmarks.

Real models are slow, cost money and answer differently each time; this server answers from rules so that
session-memory behaviour (what survives summarization, what a client does on errors) can be asserted exactly.

Answering rules:

* Summarization (fold) request: a system message, or the last user message, asks to keep *running notes* with the
  sections "Key facts" and "Conversation so far" (``FOLD_INSTRUCTION``): what a real model reads, no marker. That
  message is the instruction and is not summarized, nor is a paragraph of another message that names both sections
  inline (a question about the transcript after it, where notes would hold them as heading lines). The answer is
  extractive::

      Key facts:
      - <every distinct sentence holding a fact token, earliest first>
      Conversation so far:
      - <first 12 words of each user line, previous summary's lines included>

  It is at most 300 words and at most as many words as the summarized text (the two headers always appear);
  facts are kept first, then the newest conversation lines that still fit. ``verbose_summary`` writes each user line
  whole as "The user wrote: ..." without the source-length cap, as instruct models do with short messages;
  ``heading_style`` writes the headings as ``## Key facts`` (markdown) or ``**Key facts:**`` (bold); ``echo_output``
  answers with the instruction itself, as a weak model parrots its prompt.
* Named tools: the last user message names offered tools other than ``SEARCH_TOOL`` by their names (as a user
  asks "read the build log with read_build_log"). The model calls them: one per answer, in the order named, or all
  in one answer (parallel tool calls) when the message says "at once", "in parallel" or "at the same time"; a
  property named for URLs is given the message's URLs, the first other string properties the texts it quotes in
  backticks, one each (an SQL query), and the rest the message's key words. A tool already called after that message is
  not called again; once all are, the answer is ``From the tools: `` plus the first line of each result, in order,
  joined by `` | `` (a model answering from what the tools gave it, the start of a long result first).
* Chat request: the last user message is the question. If it does not ask about the past ("which", "what",
  "remember", "were we" or a trailing "?"), the answer is ``OK: `` plus the first 8 words of the question.
  A recall question is answered, first rule that applies:

  1. Targeted: the question's *key words* (its lower-case words and numbers, stop words and question words
     dropped) all occur in a sentence of another message that holds a fact token. The answer is
     ``From our conversation: `` plus that sentence's fact tokens; of several such sentences the newest (last in
     the request) wins, so a later update beats the value it replaced, as with a real model.
  2. Tool call: the request offers the tool ``search_earlier_messages`` (``SEARCH_TOOL``) and its last message
     is not a tool result. The answer is a call of it with ``{"query": "<the key words, space-separated>"}``
     (``finish_reason: tool_calls``; streamed as ``delta.tool_calls`` chunks when ``stream`` is set).
  3. After a tool result (the last message has role ``tool``): each line is read as ``<time> <sender>: <text>``
     (the first ``YYYY-MM-DD HH:MM`` time in the line, then the text after the next ``": "``, so a sender named
     ``AI`` is no fact) and the newest text by that time holding a fact token and every key word gives the
     answer, as in rule 1; lines without a time count as older than any timed line. It never calls again.
  4. Otherwise the sentences that share the most key words with the question (one at least) answer, a question
     among them by the sentence said after it (its reply): ``From our conversation: `` plus their distinct fact
     tokens, or the newest of them whole when they hold none (a fact said in plain words; after a tool result, only
     fact tokens). A question no sentence shares a word with ("What's the
     capital of Australia?") gets ``I don't know.``

  Facts therefore only ever come from the request itself; a question asked twice gets the same answer. The server's
  own earlier answers about the past (``From our conversation: ...``, ``From the tools: ...``, ``I don't know.``)
  are never read as something said, in a chat or in a fold, wherever they are quoted.

Fact tokens are IDs like ``PRJ-123`` (``[A-Z][A-Z0-9]*-\\d+``) or upper-case words like ``EU`` (``[A-Z]{2,}``).

Token estimate (in ``usage`` and for ``context_limit_tokens``): prompt_tokens = sum over messages of
(pieces + 4), a piece being 4 characters of text or up to 128 characters of a run of 5 or more whitespace characters
(a table's padding, as OpenAI's tokenizers count it: ``text_pieces``); completion_tokens = ceil(len(answer) / 4). The
``llama-cpp-python`` profile counts as Gemma 3's tokenizer does instead (every digit, word and punctuation mark, and
a run of whitespace per 31 characters: ``count_pieces``).

Prompt caching: the server keeps one OpenAI prompt cache (``prompt_cache.py``, OpenAI's documented rules) for as
long as it runs, and every answer's ``usage`` carries ``prompt_tokens_details.cached_tokens`` as OpenAI's does: the
longest prefix of the request served before (and not idle for ``prompt_cache_ttl_s``, 5 minutes), counted in 1,024
+ 128k tokens. The request as the cache sees it is ``serialized_prompt``: the model and the tool definitions, then
every message in order, in the same tokens as ``prompt_tokens``. ``DELETE /_prompt_cache`` empties the cache.

Every answer honours the request's output cap as OpenAI does (``max_completion_tokens``, or ``max_tokens``): a longer
answer is cut at ``cap * 4`` characters with ``finish_reason: length``.

``profile`` makes the server behave like another server people run (``PROFILES``): ``openai`` (the default) or
``llama-cpp-python`` (llama-cpp-python 0.3's ``python -m llama_cpp.server``, read from its source and measured):
it ignores ``max_completion_tokens`` (LangChain's name for the cap: it writes until the context is full) and
``stream_options`` (no usage in streams),
serves one request at a time, ends a streamed answer early (``[DONE]``, no finish reason) when another request
waits, answers an overflowing request with its own 400 text, or, streamed, with an empty 200 stream, and reports
no cached tokens (its usage has prompt, completion and total tokens only: ``llama_cpp/llama_types.py``).

Its one slot keeps one cached prompt, as llama.cpp's does: the tokens of the last request and of its answer. A
request evaluates only its tokens past the prefix it shares with them (``evaluated_tokens`` in the request log),
so a request of another kind in between (a fold) makes the next turn evaluate its whole prompt again. With
``prompt_tokens_per_s`` and ``output_tokens_per_s`` set, that evaluation and the answer take the time they would
(Qwen2.5-Coder 1.5B on two cores: 67 and 10; docs/real-model.md), and the prompt's evaluation cannot be
interrupted: a client that goes away during it leaves the slot busy until it ends (llama.cpp notices only at the
next token), and its prompt is what the slot then holds.

Knobs live in ``FakeModelConfig``; they can be changed on a running server with ``POST /_control`` (JSON body of
fields) and read with ``GET /_control``. ``fail_only_summaries`` limits the faults (``fail_status``, ``timeout_s``,
``empty_output``, ``garbage_output``) to summarization requests so the chat path stays healthy.

Like OpenAI, reasoning models (``gpt-5*`` except ``*chat*``, ``o1*``, ``o3*``, ``o4*``) reject a ``temperature``
other than 1 with HTTP 400 ``unsupported_value`` and OpenAI's exact message; turn this off with
``reject_temperature_for_reasoning_models=False`` (``--allow-any-temperature``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from langflow_session_memory.bundled_server import fake_anthropic, fake_ollama
from langflow_session_memory.bundled_server.prompt_cache import (
    OPENAI_TTL_S,
    PromptCache,
    anthropic_minimum_tokens,
    anthropic_request,
    openai_request,
)

MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-5.4-mini", "gpt-5.4", "o3-mini")
SUMMARY_WORD_LIMIT = 300

FACT_TOKEN = re.compile(r"\b[A-Z][A-Z0-9]*-\d+\b|\b[A-Z]{2,}\b")
# The fake's own "OK: ..." acknowledgements would otherwise come back as a fact on the next turn.
NOT_FACTS = frozenset({"OK"})
SPEAKER = re.compile(r"^(?:user|human|assistant|ai|machine|system)\s*:\s*", re.IGNORECASE)
# What a fold request asks for, as any model reads it: updated running notes with the two sections.
FOLD_INSTRUCTION = re.compile(r"\brunning notes\b.*\bKey facts\b.*\bConversation so far\b", re.IGNORECASE | re.DOTALL)
FOLD_SECTIONS = re.compile(r"\bKey facts\b.*\bConversation so far\b", re.IGNORECASE | re.DOTALL)
HEADING_LINE = re.compile(r"^\s*(?:Key facts|Conversation so far):\s*$", re.IGNORECASE | re.MULTILINE)
# The fold request's own framing around the summary and the transcript; not conversation.
FRAMING = {"Current notes:", "Next messages:", "(none yet)", "Key facts:", "Conversation so far:"}
USER_SPEAKER = re.compile(r"^(?:user|human)\s*:\s*", re.IGNORECASE)
BULLET = re.compile(r"^[-*•]\s+")
# When a quoted line was said ("[2026-12-07 02:25] "): read as a time, as a model reads it, never as the words
# "02" and "25" a question about "service 25" shares.
STAMP = re.compile(r"^\[\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}[^\]]*\]\s*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
RECALL_WORDS = re.compile(r"\b(?:which|what|remember|were we)\b", re.IGNORECASE)
# The server's own answers about the past: a model does not take its earlier answer for something said.
OWN_ANSWER = re.compile(r"^(?:From our conversation|From the tools):|^I don't know\b")
WORD = re.compile(r"[a-z0-9]+")
# Words that say how a question is asked, not what it is about; they never decide which sentence answers it.
STOP_WORDS = frozenset(
    WORD.findall(
        "an and any are as at be been by can could did do does for from had has have how in is it its me my now of "
        "on or our please remember that the their them there these this those to us was we were what when where "
        "which who whom whose why with would you your"
    )
)
LINE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?")
SEARCH_TOOL = "search_earlier_messages"
TOOLS_AT_ONCE = re.compile(r"\b(?:at once|in parallel|at the same time)\b", re.IGNORECASE)
GARBAGE = " ".join(itertools.repeat("lorem ipsum dolor sit amet", 400))

ERROR_KINDS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("not_found_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


@dataclass
class FakeModelConfig:
    """Behaviour knobs; the running server reads this object on every request, so mutations apply at once."""

    latency_s: float = 0.0
    fail_status: int | None = None
    fail_times: int | None = None
    fail_only_summaries: bool = False
    timeout_s: float = 0.0
    empty_output: bool = False
    garbage_output: bool = False
    context_limit_tokens: int | None = None
    strict_alternation: bool = False
    request_log: str | None = None
    reject_temperature_for_reasoning_models: bool = True
    profile: str = "openai"
    echo_output: bool = False
    verbose_summary: bool = False
    heading_style: str = "plain"
    prompt_cache_ttl_s: float = OPENAI_TTL_S
    prompt_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    answer_note: str | None = None  # added after every answer in words, so a person sees it is not a model's
    embed_fail_status: int | None = None  # Ollama's /api/embed answers this status with an error
    # The models "pulled" on its Ollama routes (``fake_ollama``): a chat model that calls tools, an embedding model.
    ollama_models: tuple[str, ...] = ("qwen2.5:1.5b", "all-minilm")


@dataclass(frozen=True)
class ServerProfile:
    """How a kind of server differs where clients notice: the output cap, usage, overflow, concurrency."""

    name: str
    cap_fields: tuple[str, ...]
    usage_in_streams: bool
    empty_stream_on_overflow: bool
    one_request_at_a_time: bool
    reports_cached_tokens: bool
    counts_pieces: bool = False

    def prompt_tokens(self, messages: list[dict]) -> int:
        if not self.counts_pieces:
            return estimate_prompt_tokens(messages)
        return sum(count_pieces(content_text(m.get("content"))) + PIECE_FRAMING_TOKENS for m in messages)

    def completion_tokens(self, answer: str) -> int:
        return count_pieces(answer) if self.counts_pieces else estimate_completion_tokens(answer)

    def overflow_message(self, limit: int, prompt_tokens: int, cap: int | None) -> str:
        if self.name == "llama-cpp-python":
            # llama_cpp/server/errors.py, ErrorResponseFormatters.context_length_exceeded
            return (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt_tokens + (cap or 0)} tokens ({prompt_tokens} in the messages, {cap} in the completion). "
                "Please reduce the length of the messages or completion."
            )
        return (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{prompt_tokens} tokens. Please reduce the length of the messages."
        )

    def overflows(self, limit: int | None, prompt_tokens: int) -> bool:
        # llama.cpp refuses a prompt that fills the window (len(prompt_tokens) >= n_ctx); OpenAI one beyond it.
        if limit is None:
            return False
        return prompt_tokens >= limit if self.name == "llama-cpp-python" else prompt_tokens > limit


PROFILES = {
    "openai": ServerProfile(
        "openai",
        cap_fields=("max_completion_tokens", "max_tokens"),
        usage_in_streams=True,
        empty_stream_on_overflow=False,
        one_request_at_a_time=False,
        reports_cached_tokens=True,
    ),
    "llama-cpp-python": ServerProfile(
        "llama-cpp-python",
        cap_fields=("max_tokens",),
        usage_in_streams=False,
        empty_stream_on_overflow=True,
        one_request_at_a_time=True,
        reports_cached_tokens=False,
        counts_pieces=True,
    ),
}


def content_text(content: Any) -> str:
    """Flatten OpenAI message content (a string, a list of parts, or None for tool-call turns) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")


# OpenAI's tokenizers (cl100k_base, o200k_base) hold tokens of up to 128 spaces: a table's padding costs one token per
# 128 of its spaces (10,000 spaces: 79 tokens), not one per 4 characters (tests/services/token_counts.json).
SPACES_PER_TOKEN = 128
LONG_WHITESPACE = re.compile(r"(\s{5,})")


def text_pieces(text: str) -> list[str]:
    """The text as the server counts it: runs of 5 or more whitespace characters in pieces of up to
    :data:`SPACES_PER_TOKEN`, the rest in 4-character pieces (as ``characters / 4`` counts it)."""
    pieces: list[str] = []
    for index, part in enumerate(LONG_WHITESPACE.split(text)):
        size = SPACES_PER_TOKEN if index % 2 else 4
        pieces += [part[start : start + size] for start in range(0, len(part), size)]
    return pieces


def estimate_prompt_tokens(messages: list[dict]) -> int:
    return sum(len(text_pieces(content_text(m.get("content")))) + 4 for m in messages)


def estimate_completion_tokens(answer: str) -> int:
    return math.ceil(len(answer) / 4)


EMBEDDING_DIMENSIONS = 256


def hashed_embedding(text: str) -> list[float]:
    """``text``'s words other than stop words, each hashed (a stable digest) into one of
    :data:`EMBEDDING_DIMENSIONS` buckets, L2-normalised: texts sharing rare words are close."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in WORD.findall(text.lower()):
        if word not in STOP_WORDS:
            vector[
                int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % EMBEDDING_DIMENSIONS
            ] += 1.0
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else vector


MESSAGE_FRAMING = ("<frame>",) * 3


def serialized_prompt(model: Any, tools: list[dict] | None, messages: list[dict]) -> list[str]:
    """The request as OpenAI's prompt cache sees it, one item per token of ``estimate_prompt_tokens``.

    A message is its 4 framing tokens (the first carries every field but the content: role, name, tool calls),
    then its text in pieces (:func:`text_pieces`). The model and the tool definitions, which that count leaves out,
    travel in the first message's first token: they come first in the prefix (a different tool list shares nothing)
    but add no tokens, so a hit is in the units of ``prompt_tokens`` and never more than it.
    """
    tokens: list[str] = []
    for index, message in enumerate(messages):
        fields = {name: value for name, value in message.items() if name != "content"}
        opening = [model, tools, fields] if index == 0 else fields
        text = content_text(message.get("content"))
        tokens += [json.dumps(opening, sort_keys=True), *MESSAGE_FRAMING]
        tokens += text_pieces(text)
    return tokens


# A real tokenizer's count, closely enough: every digit, word and punctuation mark is a token, as in Gemma 3's
# vocabulary (within 10% of its own count on chat, log lines and invoices; docs/real-model.md), and a run of
# whitespace one per 31 characters (Gemma 3's longest run of spaces; 10,000 spaces: 323 tokens).
PIECE = re.compile(r"\d|[^\W\d_]+|[^\w\s]|\s{2,}")
GEMMA_SPACES_PER_TOKEN = 31
PIECE_FRAMING_TOKENS = 6  # <start_of_turn>role\n ... <end_of_turn>\n


def pieces(text: str) -> list[str]:
    """The text's tokens as the ``llama-cpp-python`` profile counts them, in order."""
    found: list[str] = []
    for piece in PIECE.findall(text):
        if piece.isspace():
            found += [
                piece[start : start + GEMMA_SPACES_PER_TOKEN] for start in range(0, len(piece), GEMMA_SPACES_PER_TOKEN)
            ]
        else:
            found.append(piece)
    return found


def count_pieces(text: str) -> int:
    return len(pieces(text))


def fact_tokens(text: str) -> list[str]:
    return [t for t in FACT_TOKEN.findall(text) if t not in NOT_FACTS]


def _last_user(messages: list[dict]) -> int | None:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)


def fold_instruction(messages: list[dict]) -> int | None:
    """The index of the message asking for an updated summary (a system message, or the last user message), if any."""
    candidates = [i for i, m in enumerate(messages) if m.get("role") in ("system", "developer")]
    if (last_user := _last_user(messages)) is not None:
        candidates.append(last_user)
    return next((i for i in candidates if FOLD_INSTRUCTION.search(content_text(messages[i].get("content")))), None)


def is_summary_request(messages: list[dict]) -> bool:
    return fold_instruction(messages) is not None


def _clean_line(line: str) -> str:
    return SPEAKER.sub("", STAMP.sub("", BULLET.sub("", line.strip()))).strip()


def _first_words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


HEADING_STYLES = {
    "plain": ("Key facts:", "Conversation so far:"),
    "markdown": ("## Key facts", "## Conversation so far"),
    "bold": ("**Key Facts:**", "**Conversation So Far:**"),
}


def _without_instructions(text: str) -> str:
    """The text without its paragraphs that tell how to write the notes (they name both sections inline, as
    instructions do, where notes hold them as heading lines): a model reads its instructions, it does not
    summarize them."""
    paragraphs = text.split("\n\n")
    return "\n\n".join(
        paragraph
        for paragraph in paragraphs
        if not (FOLD_SECTIONS.search(paragraph) and not HEADING_LINE.search(paragraph))
    )


def summarize(messages: list[dict], *, verbose: bool = False, heading_style: str = "plain") -> str:
    """Extractive summary; see the module docstring for the shape and limits."""
    facts: dict[tuple[str, ...], str] = {}  # fact tokens -> first sentence naming them, insertion-ordered
    conversation: list[str] = []
    source_words = 0
    instruction = fold_instruction(messages)
    for index, message in enumerate(messages):
        if index == instruction:
            continue
        text = _without_instructions(content_text(message.get("content")))
        lines = text.splitlines()
        source_words += sum(len(_clean_line(line).split()) for line in lines if line.strip() not in FRAMING)
        labelled = any(SPEAKER.match(line.strip()) for line in lines)
        section = None
        for raw in lines:
            stripped = raw.strip()
            if stripped in ("Key facts:", "Conversation so far:"):
                section = stripped
                continue
            line = _clean_line(raw)
            if not line or OWN_ANSWER.match(line):
                continue
            for sentence in SENTENCE_END.split(line):
                if fact_tokens(sentence):
                    facts.setdefault(tuple(fact_tokens(sentence)), sentence)
            if section == "Conversation so far:" and BULLET.match(stripped):
                conversation.append(line)
            elif USER_SPEAKER.match(stripped) or (message.get("role") == "user" and not labelled and not section):
                conversation.append(f"The user wrote: {line}" if verbose else _first_words(line, 12))

    used = 5  # "Key facts:" and "Conversation so far:", which the summary's size check allows on top
    limit = SUMMARY_WORD_LIMIT if verbose else min(SUMMARY_WORD_LIMIT, source_words + used)
    fact_lines = []
    for fact in facts.values():
        words = len(fact.split()) + 1
        if used + words > limit:
            break
        fact_lines.append(f"- {fact}")
        used += words
    conversation_lines: list[str] = []
    for line in reversed(conversation):
        words = len(line.split()) + 1
        if used + words > limit:
            break
        conversation_lines.insert(0, f"- {line}")
        used += words
    facts_heading, conversation_heading = HEADING_STYLES[heading_style]
    return "\n".join([facts_heading, *fact_lines, conversation_heading, *conversation_lines])


@dataclass(frozen=True)
class Reply:
    """What the model answers: text, a call of ``SEARCH_TOOL`` with ``tool_query``, or ``calls`` of named tools
    (name and arguments each)."""

    content: str = ""
    tool_query: str | None = None
    calls: tuple[tuple[str, dict], ...] = ()

    @property
    def calls_tools(self) -> bool:
        return self.tool_query is not None or bool(self.calls)


def key_words(text: str) -> list[str]:
    """The words a question is about: lower-case words and numbers, stop words and single letters dropped."""
    return list(dict.fromkeys(w for w in WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1))


def targeted_facts(words: list[str], texts: list[str]) -> list[str]:
    """Fact tokens of the last sentence (in ``texts`` order) that holds a fact token and every one of ``words``."""
    found: list[str] = []
    wanted = set(words)
    for sentence in said_sentences(texts):
        facts = fact_tokens(sentence)
        if facts and wanted <= set(WORD.findall(sentence.lower())):
            found = list(dict.fromkeys(facts))
    return found if wanted else []


def said_sentences(texts: list[str]) -> list[str]:
    """The sentences of ``texts`` in order, each line without its bullet or speaker label, the server's own answers
    about the past left out."""
    lines = (_clean_line(line) for text in texts for line in text.splitlines())
    return [sentence for line in lines if line and not OWN_ANSWER.match(line) for sentence in SENTENCE_END.split(line)]


def closest_answer(words: list[str], texts: list[str], *, quote: bool = True) -> str:
    """Rule 4: what the sentences sharing the most of ``words`` (one at least) say: their fact tokens, else (with
    ``quote``) the newest of them; "I don't know." when no sentence shares a word. A question that shares them is
    answered by the sentence said after it (its reply, as a model reads a chat), and a question is never an answer.
    The server's "OK: ..." echoes are not sentences here (each repeats the start of a message that is there whole),
    nor a heading or a frame that ends with a colon."""
    sentences = [s for s in said_sentences(texts) if not (s.startswith("OK: ") or s.endswith(":"))]
    wanted = set(words)
    answers = [  # (words shared, what answers): a question by its reply, none when nothing follows it
        (len(wanted & set(WORD.findall(sentence.lower()))), sentences[i + 1] if sentence.endswith("?") else sentence)
        for i, sentence in enumerate(sentences)
        if not sentence.endswith("?") or i + 1 < len(sentences)
    ]
    answers = [(score, answer) for score, answer in answers if score and not answer.endswith("?")]
    best = max((score for score, _ in answers), default=0)
    said = [answer for score, answer in answers if score == best]
    facts = list(dict.fromkeys(token for sentence in said for token in fact_tokens(sentence)))
    if facts:
        return "From our conversation: " + ", ".join(facts)
    return f"From our conversation: {said[-1]}" if said and quote else "I don't know."


def tool_result_texts(result: str) -> list[str]:
    """A tool result's texts, oldest first. A line ``<time> <sender>: <text>`` gives its text, placed by its time;
    a line without a time (a heading, "nothing found") is taken whole and placed before every timed line."""
    placed = []
    for position, line in enumerate(line for line in result.splitlines() if line.strip()):
        time_found = LINE_TIME.search(line)
        if time_found is None:
            placed.append(("", position, line))
        else:
            text = line[time_found.end() :].partition(": ")[2] or line
            placed.append((time_found.group().replace("T", " "), position, text))
    return [text for *_, text in sorted(placed)]


def offers_search_tool(tools: list[dict] | None) -> bool:
    return any((tool.get("function") or {}).get("name") == SEARCH_TOOL for tool in tools or [])


def named_tools_reply(messages: list[dict], tools: list[dict] | None) -> Reply | None:
    """The "named tools" rule: a call of the named tools not called yet, then an answer from their results."""
    last_user = _last_user(messages)
    if last_user is None:
        return None
    question = content_text(messages[last_user].get("content"))
    offered = {
        function["name"]: function
        for function in ((tool.get("function") or {}) for tool in tools or [])
        if function.get("name") and function["name"] != SEARCH_TOOL
    }
    named = sorted((name for name in offered if re.search(rf"\b{re.escape(name)}\b", question)), key=question.find)
    if not named:
        return None
    later = messages[last_user + 1 :]
    called = {call["function"]["name"] for message in later for call in message.get("tool_calls") or []}
    pending = [name for name in named if name not in called]
    if pending:
        batch = pending if TOOLS_AT_ONCE.search(question) else pending[:1]
        return Reply(calls=tuple((name, _arguments(offered[name], question)) for name in batch))
    results = [content_text(message.get("content")) for message in later if message.get("role") == "tool"]
    heads = [next((line.strip() for line in result.splitlines() if line.strip()), "") for result in results]
    return Reply("From the tools: " + " | ".join(heads))


URL = re.compile(r"https?://[^\s`'\")]+")
QUOTED = re.compile(r"`([^`]+)`")


def _arguments(function: dict, question: str) -> dict:
    """What a model passes: the message's URLs to a property named for them (a list where the schema asks one),
    the text it quotes in backticks (an SQL query, code) to the first other string property, and its key words to
    the remaining string properties."""
    properties = (function.get("parameters") or {}).get("properties") or {}
    words = " ".join(key_words(question))
    urls, quoted = URL.findall(question), QUOTED.findall(question)
    arguments: dict = {}
    for name, schema in properties.items():
        if urls and "url" in name.lower():
            arguments[name] = urls if schema.get("type") == "array" else urls[0]
        elif schema.get("type") == "string" and quoted:
            arguments[name] = quoted.pop(0)
        elif schema.get("type") == "string":
            arguments[name] = words
    return arguments


def chat_reply(messages: list[dict], tools: list[dict] | None = None) -> Reply:
    """Answer the last user message using only facts found in the other messages (rules in the module docstring)."""
    if (named := named_tools_reply(messages, tools)) is not None:
        return named
    last_user = _last_user(messages)
    question = content_text(messages[last_user].get("content")).strip() if last_user is not None else ""
    if not (RECALL_WORDS.search(question) or question.endswith("?")):
        return Reply("OK: " + _first_words(question, 8))
    words = key_words(question)
    others = [content_text(m.get("content")) for i, m in enumerate(messages) if i != last_user]
    after_tool = bool(messages) and messages[-1].get("role") == "tool"
    # After a search, only its result is new: the rest of the request was read before the call.
    targeted = targeted_facts(words, tool_result_texts(others[-1]) if after_tool else others)
    if targeted:
        return Reply("From our conversation: " + ", ".join(targeted))
    if words and not after_tool and offers_search_tool(tools):
        return Reply(tool_query=" ".join(words))
    # A search's result is data, not something said: from it only a fact token answers ("nothing found" is no fact).
    if after_tool:
        return Reply(closest_answer(words, tool_result_texts(others[-1]), quote=False))
    return Reply(closest_answer(words, others))


def is_reasoning_model(model: Any) -> bool:
    name = str(model or "")
    return (name.startswith("gpt-5") and "chat" not in name) or name.startswith(("o1", "o3", "o4"))


def temperature_error(body: dict) -> str | None:
    """Mimic OpenAI's reasoning models: only the default temperature (1) is accepted."""
    temperature = body.get("temperature")
    if temperature is None or temperature == 1 or not is_reasoning_model(body.get("model")):
        return None
    # OpenAI prints the number as JSON would: 0, not 0.0.
    shown = int(temperature) if isinstance(temperature, float) and temperature.is_integer() else temperature
    return (
        f"Unsupported value: 'temperature' does not support {shown} with this model. "
        "Only the default (1) value is supported."
    )


def alternation_error(messages: list[dict]) -> str | None:
    """Mimic strict providers: roles must alternate, starting with user; tool results follow a tool call."""
    turns = [m for m in messages if m.get("role") not in ("system", "developer")]
    if not turns or turns[0].get("role") != "user":
        return "The first non-system message must have role 'user'."
    for prev, cur in itertools.pairwise(turns):
        prev_role, role = prev.get("role"), cur.get("role")
        if role == "tool":
            if not (prev_role == "tool" or (prev_role == "assistant" and prev.get("tool_calls"))):
                return "Messages with role 'tool' must follow an assistant message with 'tool_calls'."
        elif role == prev_role:
            return f"Roles must alternate, but two consecutive messages have role '{role}'."
    return None


def _append_line(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


def error_response(status: int, message: str, code: str | None = None, param: str | None = None) -> JSONResponse:
    kind, default_code = ERROR_KINDS.get(status, ("server_error", "server_error"))
    error = {"message": message, "type": kind, "param": param, "code": code or default_code}
    return JSONResponse({"error": error}, status_code=status)


def build_app(config: FakeModelConfig) -> FastAPI:
    """Create the app; ``app.state.records`` holds every request in log-record form, ``app.state.prompt_cache``
    the prefixes OpenAI would have cached, and ``app.state.anthropic_caches`` Anthropic's, by model."""
    app = FastAPI(title="fake-openai")
    app.state.config = config
    app.state.records = []
    app.state.prompt_cache = PromptCache()
    app.state.anthropic_caches = {}  # one per model, as Anthropic's: a prefix cached for one model serves no other
    log_lock = asyncio.Lock()
    ids = itertools.count(1)

    async def record(
        kind: str,
        body: Any,
        status: int,
        prompt_tokens: int,
        completion_tokens: int,
        tool_query: str | None = None,
        cached_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        wire: dict | None = None,
        evaluated_tokens: int | None = None,
        api: str = "openai",
    ) -> None:
        """Log one request; ``cached_tokens`` is what its answer reported (None: an error, or a profile without).

        A request to the Anthropic or Ollama route (``api``) is logged in the OpenAI route's shape (``body``, what
        the answering rules read) with the request as sent (``wire``) and the cache written (``cache_write_tokens``).
        """
        entry = {
            "ts": time.time(),
            "api": api,
            "kind": kind,
            "body": body,
            "status": status,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "tool_query": tool_query,
            "cached_tokens": cached_tokens,
            "cache_write_tokens": cache_write_tokens,
        }
        if evaluated_tokens is not None:
            entry["evaluated_tokens"] = evaluated_tokens
        if wire is not None:
            entry["wire"] = wire
        app.state.records.append(entry)
        if config.request_log:
            async with log_lock:
                await asyncio.to_thread(_append_line, config.request_log, json.dumps(entry))

    @app.get("/v1/models")
    async def list_models() -> dict:
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in MODELS],
        }

    @app.get("/_control")
    async def get_control() -> dict:
        return dataclasses.asdict(config)

    @app.post("/_control")
    async def set_control(request: Request) -> JSONResponse:
        updates = await request.json()
        unknown = set(updates) - {f.name for f in dataclasses.fields(config)}
        if unknown:
            return error_response(400, f"Unknown config fields: {sorted(unknown)}")
        for name, value in updates.items():
            setattr(config, name, value)
        return JSONResponse(dataclasses.asdict(config))

    @app.delete("/_prompt_cache")
    async def clear_prompt_cache() -> dict:
        """Forget every cached prefix (both APIs'), so the next session measured starts cold."""
        app.state.prompt_cache, app.state.anthropic_caches = PromptCache(), {}
        return {"cleared": True}

    @app.post("/api/embed")
    async def ollama_embed(request: Request):
        """Ollama's embedding route (what Langflow's Embedding Model component calls on the Ollama provider):
        ``input`` a text or a list, ``{"model", "embeddings"}`` back, one L2-normalised vector per text; the
        vector is the text's words hashed into :data:`EMBEDDING_DIMENSIONS` buckets (a bag of words, no
        meaning: a real model is the judge of that)."""
        body = await request.json()
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        if config.embed_fail_status:
            await record("embed", body, config.embed_fail_status, 0, 0)
            return JSONResponse({"error": "embedding model failed"}, status_code=config.embed_fail_status)
        await record("embed", body, 200, sum(estimate_completion_tokens(text) for text in texts), 0)
        return {"model": body.get("model", ""), "embeddings": [hashed_embedding(text) for text in texts]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        try:
            body = await request.json()
            messages = list(body["messages"])
        except (ValueError, KeyError, TypeError):
            await record("chat", None, 400, 0, 0)
            return error_response(400, "Request body must be JSON with a 'messages' list.")
        profile = PROFILES[config.profile]
        if not profile.one_request_at_a_time:
            return await answer(body, messages, profile, release=None)
        slot.waiting += 1
        await slot.lock.acquire()
        slot.waiting -= 1
        try:
            response = await answer(body, messages, profile, release=slot.lock.release)
        except BaseException:
            slot.lock.release()
            raise
        if not isinstance(response, StreamingResponse):
            slot.lock.release()
        return response

    slot = _Slot()

    async def answer(body: dict, messages: list[dict], profile: ServerProfile, release):
        """The answer to one request; a streamed one calls ``release`` when it ends (served one at a time)."""
        kind = "summary" if is_summary_request(messages) else "chat"
        prompt_tokens = profile.prompt_tokens(messages)
        faults_apply = kind == "summary" or not config.fail_only_summaries
        stream = bool(body.get("stream"))
        cap = next((body[name] for name in profile.cap_fields if body.get(name)), None)

        # A streamed answer spends its time inside the stream, as a model writes it token by token: a client
        # that goes away frees a single-slot server at the next token. A non-streamed one spends it before
        # answering.
        delay = config.latency_s + (config.timeout_s if faults_apply else 0.0)
        if not stream:
            await asyncio.sleep(delay)

        if config.reject_temperature_for_reasoning_models and (problem := temperature_error(body)):
            await record(kind, body, 400, prompt_tokens, 0)
            return error_response(400, problem, code="unsupported_value", param="temperature")
        if profile.overflows(config.context_limit_tokens, prompt_tokens):
            await record(kind, body, 200 if stream and profile.empty_stream_on_overflow else 400, prompt_tokens, 0)
            if stream and profile.empty_stream_on_overflow:
                return StreamingResponse(_ended(release), media_type="text/event-stream")
            message = profile.overflow_message(config.context_limit_tokens, prompt_tokens, cap)
            return error_response(400, message, code="context_length_exceeded", param="messages")
        if config.strict_alternation and (problem := alternation_error(messages)):
            await record(kind, body, 400, prompt_tokens, 0)
            return error_response(400, problem, code="invalid_message_order", param="messages")
        if failure := _injected_failure(config, faults_apply):
            await record(kind, body, failure, prompt_tokens, 0)
            return error_response(failure, f"Injected failure (HTTP {failure}).")

        # A refused request never reaches the slot; an accepted one is evaluated into it (what it held is gone).
        evaluated = slot.evaluate(slot_prompt(body.get("tools"), messages)) if release else None
        prompt_seconds = _seconds(evaluated, config.prompt_tokens_per_s)
        reply = _reply(config, kind, messages, body.get("tools"), faults_apply)
        finish_reason = "stop"
        if cap is not None and not reply.calls_tools and len(reply.content) > cap * 4:
            reply, finish_reason = Reply(reply.content[: cap * 4]), "length"
        request_id = next(ids)
        tool_calls = _tool_calls(request_id, reply)
        finish_reason = "tool_calls" if tool_calls else finish_reason
        completion_tokens = profile.completion_tokens(reply.content or json.dumps(tool_calls))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        cached_tokens = None
        if profile.reports_cached_tokens:
            prompt = serialized_prompt(body.get("model"), body.get("tools"), messages)
            served, app.state.prompt_cache = openai_request(
                app.state.prompt_cache, prompt, time.monotonic(), config.prompt_cache_ttl_s
            )
            cached_tokens = served.cache_read
            usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        await record(
            kind,
            body,
            200,
            prompt_tokens,
            completion_tokens,
            reply.tool_query,
            cached_tokens,
            evaluated_tokens=evaluated,
        )
        # The answer as the next request sends it back: a chat template ends this prompt with the assistant's
        # header, and the model writes the text after it.
        answered = _message_tokens({"role": "assistant", "content": reply.content}) if release else []

        base = {"id": f"chatcmpl-fake-{request_id}", "created": int(time.time()), "model": body.get("model", MODELS[0])}
        output_seconds = _seconds(completion_tokens, config.output_tokens_per_s)
        if not stream:
            await asyncio.sleep(prompt_seconds + output_seconds)
            slot.cached += answered
            message = {"role": "assistant", "content": None if tool_calls else reply.content}
            if tool_calls:
                message["tool_calls"] = tool_calls
            choice = {"index": 0, "message": message, "finish_reason": finish_reason}
            return {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
        include_usage = profile.usage_in_streams and bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = _stream(base, reply.content, tool_calls, finish_reason, usage if include_usage else None)
        pacing = _Pacing(prompt_seconds, delay + output_seconds, answered)
        paced = _paced(chunks, pacing, slot if release else None, release)
        return StreamingResponse(paced, media_type="text/event-stream")

    @app.post("/v1/messages")
    async def anthropic_messages(request: Request):
        """Anthropic's Messages API (``fake_anthropic``): the same answers, with Anthropic's wire and prompt cache."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        problem = fake_anthropic.request_problem(body) if isinstance(body, dict) else "The request body is not JSON."
        if problem:
            await record("chat", None, 400, 0, 0, wire=body if isinstance(body, dict) else {}, api="anthropic")
            return JSONResponse(fake_anthropic.error_body(400, problem), status_code=400)
        shaped = fake_anthropic.openai_shape(body)
        messages, stream = shaped["messages"], shaped["stream"]
        kind = "summary" if is_summary_request(messages) else "chat"
        blocks = fake_anthropic.cache_blocks(body)
        prompt_tokens = sum(block.tokens for block in blocks)
        faults_apply = kind == "summary" or not config.fail_only_summaries
        delay = config.latency_s + (config.timeout_s if faults_apply else 0.0)
        if not stream:
            await asyncio.sleep(delay)

        async def refuse(status: int, why: str) -> JSONResponse:
            await record(kind, shaped, status, prompt_tokens, 0, wire=body, api="anthropic")
            return JSONResponse(fake_anthropic.error_body(status, why), status_code=status)

        limit = config.context_limit_tokens
        if limit is not None and prompt_tokens > limit:
            return await refuse(400, f"prompt is too long: {prompt_tokens} tokens > {limit} maximum")
        if failure := _injected_failure(config, faults_apply):
            return await refuse(failure, f"Injected failure (HTTP {failure}).")

        reply = _reply(config, kind, messages, shaped["tools"], faults_apply)
        cap, stop_reason = body["max_tokens"], "end_turn"
        if not reply.calls_tools and len(reply.content) > cap * 4:
            reply, stop_reason = Reply(reply.content[: cap * 4]), "max_tokens"
        request_id = next(ids)
        calls = [
            {
                "id": call["id"].replace("call_", "toolu_"),
                "name": call["function"]["name"],
                "input": json.loads(call["function"]["arguments"]),
            }
            for call in _tool_calls(request_id, reply)
        ]
        if calls:
            stop_reason = "tool_use"
        completion_tokens = estimate_completion_tokens(reply.content or "".join(json.dumps(c["input"]) for c in calls))
        model = str(body.get("model") or "")
        served, app.state.anthropic_caches[model] = anthropic_request(
            app.state.anthropic_caches.get(model, PromptCache()),
            blocks,
            time.monotonic(),
            anthropic_minimum_tokens(model),
            config.prompt_cache_ttl_s,
        )
        await record(
            kind,
            shaped,
            200,
            prompt_tokens,
            completion_tokens,
            reply.tool_query,
            served.cache_read,
            cache_write_tokens=served.cache_write,
            wire=body,
            api="anthropic",
        )
        answer = (
            {"id": f"msg_fake_{request_id}", "model": body.get("model")},
            fake_anthropic.content(reply.content, calls),
            stop_reason,
            fake_anthropic.usage(served, completion_tokens),
        )
        if not stream:
            return fake_anthropic.message(*answer)
        return StreamingResponse(
            _paced(fake_anthropic.events(*answer), _Pacing(0.0, delay, []), None, None), media_type="text/event-stream"
        )

    @app.get("/api/tags")
    async def ollama_tags() -> dict:
        return fake_ollama.tags(tuple(config.ollama_models))

    @app.post("/api/show")
    async def ollama_show(request: Request):
        name = (await request.json()).get("model")
        if name not in config.ollama_models:
            return JSONResponse(fake_ollama.error_body(f"model '{name}' not found"), status_code=404)
        return fake_ollama.show(name)

    @app.post("/api/chat")
    async def ollama_chat(request: Request):
        """Ollama's chat API (``fake_ollama``): the same answers, with Ollama's wire."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        if problem := fake_ollama.request_problem(body, tuple(config.ollama_models)):
            status, why = problem
            await record("chat", None, status, 0, 0, wire=body if isinstance(body, dict) else {}, api="ollama")
            return JSONResponse(fake_ollama.error_body(why), status_code=status)
        shaped = fake_ollama.openai_shape(body)
        messages, tools = shaped["messages"], shaped["tools"]
        kind = "summary" if is_summary_request(messages) else "chat"
        prompt_tokens = estimate_prompt_tokens(messages)
        faults_apply = kind == "summary" or not config.fail_only_summaries
        delay = config.latency_s + (config.timeout_s if faults_apply else 0.0)
        if not shaped["stream"]:
            await asyncio.sleep(delay)

        async def refuse(status: int, why: str) -> JSONResponse:
            await record(kind, shaped, status, prompt_tokens, 0, wire=body, api="ollama")
            return JSONResponse(fake_ollama.error_body(why), status_code=status)

        limit = config.context_limit_tokens
        if limit is not None and prompt_tokens > limit:
            return await refuse(400, "the input length exceeds the context length")
        if failure := _injected_failure(config, faults_apply):
            return await refuse(failure, f"Injected failure (HTTP {failure}).")

        reply = _reply(config, kind, messages, tools, faults_apply)
        cap, done_reason = shaped["max_tokens"], "stop"
        if cap is not None and not reply.calls_tools and len(reply.content) > cap * 4:
            reply, done_reason = Reply(reply.content[: cap * 4]), "length"
        calls = fake_ollama.ollama_calls(_tool_calls(next(ids), reply))
        completion_tokens = estimate_completion_tokens(reply.content or json.dumps(calls))
        await record(kind, shaped, 200, prompt_tokens, completion_tokens, reply.tool_query, wire=body, api="ollama")
        answer = (body["model"], reply.content, calls, done_reason, prompt_tokens, completion_tokens)
        if not shaped["stream"]:
            return fake_ollama.answer(*answer)
        return StreamingResponse(
            _paced(fake_ollama.stream_lines(*answer), _Pacing(0.0, delay, []), None, None),
            media_type="application/x-ndjson",
        )

    return app


def _injected_failure(config: FakeModelConfig, faults_apply: bool) -> int | None:
    """The HTTP status a fault knob makes this request fail with (counted against ``fail_times``), or None."""
    if not faults_apply or config.fail_status is None or config.fail_times == 0:
        return None
    if config.fail_times is not None:
        config.fail_times -= 1
    return config.fail_status


@dataclass
class _Slot:
    """The one request a single-slot server serves at a time, how many wait for it, and its cached prompt."""

    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    waiting: int = 0
    cached: list[str] = dataclasses.field(default_factory=list)

    def evaluate(self, prompt: list[str]) -> int:
        """Take ``prompt`` into the slot; the number of its tokens past the prefix shared with what it held."""
        shared = 0
        for held, wanted in zip(self.cached, prompt, strict=False):
            if held != wanted:
                break
            shared += 1
        self.cached = list(prompt)
        return len(prompt) - shared


def slot_prompt(tools: list[dict] | None, messages: list[dict]) -> list[str]:
    """A request as a one-slot server caches it, in the units of the profile's ``prompt_tokens``: each message's
    framing (the first one's carries the tools, which chat templates render into the system prompt) and text
    pieces (``count_pieces``)."""
    return [
        token
        for index, message in enumerate(messages)
        for token in _message_tokens(message, tools=tools if index == 0 else None)
    ]


def _message_tokens(message: dict, tools: list[dict] | None = None) -> list[str]:
    fields = {name: value for name, value in message.items() if name != "content"}
    opening = json.dumps([tools, fields] if tools is not None else fields, sort_keys=True)
    return [opening, *("<frame>",) * (PIECE_FRAMING_TOKENS - 1), *pieces(content_text(message.get("content")))]


def _reply(config: FakeModelConfig, kind: str, messages: list[dict], tools: list[dict] | None, faults: bool) -> Reply:
    if faults and config.empty_output:
        return Reply("")
    if faults and config.garbage_output:
        return Reply(GARBAGE)
    if faults and config.echo_output:
        instruction = fold_instruction(messages) if kind == "summary" else _last_user(messages)
        return Reply(content_text(messages[instruction].get("content")) if instruction is not None else "")
    if kind == "summary":
        return Reply(summarize(messages, verbose=config.verbose_summary, heading_style=config.heading_style))
    reply = chat_reply(messages, tools)
    if config.answer_note and reply.content and not reply.calls_tools:
        return dataclasses.replace(reply, content=f"{reply.content}\n\n{config.answer_note}")
    return reply


async def _ended(release) -> AsyncIterator[str]:
    """An empty event stream: what llama-cpp-python's server sends when a streamed prompt overflows."""
    if release is not None:
        release()
    return
    yield


def _seconds(tokens: int | None, per_second: float | None) -> float:
    return tokens / per_second if tokens and per_second else 0.0


@dataclass(frozen=True)
class _Pacing:
    """How a streamed answer takes its time: the prompt's evaluation, then the answer, token by token."""

    prompt_seconds: float
    answer_seconds: float
    answer_tokens: list[str]


async def _paced(chunks: list[str], pacing: _Pacing, slot: _Slot | None, release) -> AsyncIterator[str]:
    """Send ``chunks`` as a model writes them, after the prompt's evaluation. On a single-slot server the
    evaluation runs to its end even if the client goes away (the slot stays busy, as llama.cpp's does), a
    request that waits ends the stream early (``[DONE]`` without a finish reason), as llama-cpp-python's
    ``interrupt_requests`` does, and a client that goes away while it writes frees the slot at once."""
    evaluation = asyncio.get_running_loop().create_task(asyncio.sleep(pacing.prompt_seconds))
    try:
        await asyncio.shield(evaluation)
        for index, chunk in enumerate(chunks):
            if slot is not None and slot.waiting and chunk is not chunks[-1]:
                yield "data: [DONE]\n\n"
                return
            await asyncio.sleep(pacing.answer_seconds / len(chunks))
            if slot is not None and index == len(chunks) - 1:
                slot.cached += pacing.answer_tokens
            yield chunk
    finally:
        if release is not None:
            if evaluation.done():
                release()
            else:
                evaluation.add_done_callback(lambda _evaluation: release())


def _tool_calls(request_id: int, reply: Reply) -> list[dict]:
    """The OpenAI ``tool_calls`` of a reply that searches earlier messages or calls named tools; none for text."""
    if reply.tool_query is not None:
        arguments = json.dumps({"query": reply.tool_query})
        function = {"name": SEARCH_TOOL, "arguments": arguments}
        return [{"id": f"call_fake_{request_id}", "type": "function", "function": function}]
    return [
        {
            "id": f"call_fake_{request_id}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for index, (name, arguments) in enumerate(reply.calls)
    ]


def _stream(base: dict, answer: str, tool_calls: list[dict], finish_reason: str, usage: dict | None) -> list[str]:
    """OpenAI's chunk sequence: the role, the text word by word or each tool call (name first, then arguments)."""

    def chunk(choices: list[dict], **extra: Any) -> str:
        return "data: " + json.dumps({**base, "object": "chat.completion.chunk", "choices": choices, **extra}) + "\n\n"

    def delta(**fields: Any) -> str:
        return chunk([{"index": 0, "delta": fields, "finish_reason": None}])

    chunks = [delta(role="assistant", content=None if tool_calls else "")]
    for index, call in enumerate(tool_calls):
        function = call["function"]
        chunks.append(
            delta(tool_calls=[{**call, "index": index, "function": {"name": function["name"], "arguments": ""}}])
        )
        chunks.append(delta(tool_calls=[{"index": index, "function": {"arguments": function["arguments"]}}]))
    chunks.extend(delta(content=piece) for piece in re.findall(r"\s*\S+", answer))
    chunks.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish_reason}]))
    if usage is not None:
        chunks.append(chunk([], usage=usage))
    chunks.append("data: [DONE]\n\n")
    return chunks


@dataclass
class RunningServer:
    """Handle yielded by ``run_in_thread``."""

    base_url: str
    config: FakeModelConfig
    app: FastAPI

    def requests(self) -> list[dict]:
        """Every chat-completion request so far, as the records also written to ``config.request_log``."""
        return list(self.app.state.records)

    def clear_prompt_cache(self) -> None:
        """Empty the server's prompt cache (on its own loop, between two requests)."""
        httpx.delete(f"{self.base_url.removesuffix('/v1')}/_prompt_cache", timeout=10).raise_for_status()


@contextlib.contextmanager
def run_in_thread(
    config: FakeModelConfig | None = None, host: str = "127.0.0.2", port: int = 0
) -> Iterator[RunningServer]:
    """Serve in a background thread so synchronous and async tests can share one process; port 0 picks a free one."""
    config = config or FakeModelConfig()
    app = build_app(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    # A short graceful-shutdown window so requests hanging on timeout_s don't block exit.
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="fake-openai")
    thread.start()
    handle = RunningServer(f"http://{host}:{bound_port}/v1", config, app)
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.01)
        httpx.get(f"{handle.base_url}/models", timeout=5).raise_for_status()
        yield handle
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Deterministic OpenAI-compatible chat server for tests and demos.")
    parser.add_argument("--host", default="127.0.0.2")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency-s", type=float, default=0.0, help="sleep before every answer")
    parser.add_argument("--fail-status", type=int, help="answer with this HTTP status and an OpenAI error body")
    parser.add_argument("--fail-times", type=int, help="fail only the next N requests (default: all)")
    parser.add_argument("--fail-only-summaries", action="store_true", help="apply faults to summary requests only")
    parser.add_argument("--timeout-s", type=float, default=0.0, help="hang this long to trigger client timeouts")
    parser.add_argument("--empty-output", action="store_true", help='answer ""')
    parser.add_argument("--garbage-output", action="store_true", help="answer 2000 words of non-summary text")
    parser.add_argument("--context-limit-tokens", type=int, help="reject larger prompts with context_length_exceeded")
    parser.add_argument("--strict-alternation", action="store_true", help="reject non-alternating roles with 400")
    parser.add_argument(
        "--allow-any-temperature",
        dest="reject_temperature_for_reasoning_models",
        action="store_false",
        help="let reasoning models (gpt-5*, o1/o3/o4*) accept any temperature, unlike OpenAI",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="openai", help="behave like this server")
    parser.add_argument("--echo-output", action="store_true", help="parrot the instruction, as weak models do")
    parser.add_argument(
        "--verbose-summary", action="store_true", help="summaries longer than the short messages they replace"
    )
    parser.add_argument(
        "--heading-style", choices=sorted(HEADING_STYLES), default="plain", help="how summaries write headings"
    )
    parser.add_argument(
        "--prompt-cache-ttl-s", type=float, default=OPENAI_TTL_S, help="how long an unused cached prefix lives"
    )
    parser.add_argument(
        "--prompt-tokens-per-s", type=float, help="llama-cpp-python profile: prompt tokens evaluated a second"
    )
    parser.add_argument("--output-tokens-per-s", type=float, help="llama-cpp-python profile: answer tokens a second")
    parser.add_argument("--request-log", help="append every request as a JSON line to this file")
    parser.add_argument("--answer-note", help="a line added after every answer in words (make run: 'a test server')")
    args = vars(parser.parse_args(argv))
    host, port = args.pop("host"), args.pop("port")
    uvicorn.run(build_app(FakeModelConfig(**args)), host=host, port=port, log_level="warning")


if __name__ == "__main__":
    main()
