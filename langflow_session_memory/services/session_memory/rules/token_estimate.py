"""How many tokens a text or a list of messages takes, estimated: the one estimate every size in the service uses.

A provider's own count, where it reports one, is better (``rules/usage.py`` prefers it); this estimate
sizes what has not been sent yet. :func:`messages_tokens` has the shape of LangChain's ``token_counter``
(``trim_messages``, ``SummarizationMiddleware``): a list of messages in, a number of tokens out.
"""

import json
import re
from collections.abc import Iterable, Sequence

from langchain_core.messages import BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT

_ASCII_WORD = re.compile(r"[A-Za-z]+")
_ASCII_MARKS = re.compile(r"[!-/:-@\[-`{-~]+")
_SINGLE_TOKEN = re.compile(r"[^\sA-Za-z!-/:-@\[-`{-~]")  # digits, other letters, other symbols (emoji)
_SPACING = re.compile(r"\s{2,}|[^\S ]")


def estimate_tokens(text: str | None) -> int:
    """One message's tokens as the tokenizers of local models count them, and 4 for the message's framing.

    Counted by what tokenizers split on: a run of up to ``CALL_FIT.letters_per_token`` ASCII letters is
    one token (common words are one, rare ones two or three); every other letter (accents, CJK) and
    every digit is one (Llama, Gemma, Qwen and Mistral split numbers into single digits); a run of
    up to ``CALL_FIT.marks_per_token`` punctuation marks is one (``"],``); a line break is one, and a run of
    spaces or tabs (indentation, a table's padding) one per ``CALL_FIT.spaces_per_token``, while a single
    space between words is free. Measured against Qwen2.5's and Gemma 3's own tokenizers on a
    padded DataFrame, a SQL result table, a build log, code, JSON and chat (``token_counts.json`` in
    tests/services): 0.96 to 1.17 of their counts; OpenAI's tokenizers group digits by three and
    merge longer runs of spaces, so there it errs large (1.12 to 1.39), which only makes a fold or a
    clip come a little sooner. ``characters / 4`` counted a padded table's spaces as text: 2.0 to 3.2
    times the real count, and a clip kept padding instead of the page.
    """
    text = text or ""
    words = sum(-(-len(word) // CALL_FIT.letters_per_token) for word in _ASCII_WORD.findall(text))
    marks = sum(-(-len(run) // CALL_FIT.marks_per_token) for run in _ASCII_MARKS.findall(text))
    singles = len(_SINGLE_TOKEN.findall(text))
    spacing = sum(_spacing_tokens(run) for run in _SPACING.findall(text))
    return words + marks + singles + spacing + 4


def _spacing_tokens(run: str) -> int:
    """A run of whitespace other than one space: one token for its line breaks, the spaces after them by
    ``CALL_FIT.spaces_per_token`` (a lone space before a word is part of the word's token)."""
    line_break = "\n" in run
    spaces = len(run) - run.rindex("\n") - 1 if line_break else len(run)
    return int(line_break) + (-(-spaces // CALL_FIT.spaces_per_token) if spaces > 1 or not line_break else 0)


def estimated_size(texts: Iterable[str | None]) -> int:
    return sum(estimate_tokens(text) for text in texts)


def text_of(message) -> str:
    """A message's text: a LangChain message's text blocks (``BaseMessage.text``, tool calls and images left out)
    or a Langflow ``Message``'s text; empty when it has none as a string (a Langflow Message still streaming)."""
    text = getattr(message, "text", None)
    return text if isinstance(text, str) else ""


def message_tokens(message: BaseMessage) -> int:
    """One message's estimated tokens: its text, and the arguments of the tools it calls."""
    calls = getattr(message, "tool_calls", None) or []
    return estimate_tokens(text_of(message)) + sum(
        estimate_tokens(json.dumps(call.get("args") or {})) for call in calls
    )


def messages_tokens(messages: Sequence[BaseMessage]) -> int:
    """The estimated tokens of ``messages`` (LangChain's ``token_counter`` shape)."""
    return sum(message_tokens(message) for message in messages)


def tool_tokens(tool) -> int:
    """A tool's estimated size in a request: its schema as OpenAI's API sends it (a LangChain tool, a function's
    schema as a dict, or a Pydantic model), sent with every call that offers the tool."""
    return estimate_tokens(json.dumps(convert_to_openai_tool(tool)))
