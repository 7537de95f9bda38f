"""The values fixed in code outside the fold policy, listed in one table for the docs.

Each value stays the constant of the module that uses it; this only names them together, with
what each means, so that docs/design.md states them once (:func:`markdown_table`;
``tests/services/test_policy_table.py`` fails when the page's table is not this one) and the other
pages link to it instead of restating numbers that drift.
"""

from typing import NamedTuple

from langflow_session_memory.services.session_memory.rules import call_fit, context_size
from langflow_session_memory.services.session_memory.summary import model_call, prompt


class FixedValue(NamedTuple):
    module: str
    name: str
    value: float
    meaning: str


FIXED_VALUES = (
    FixedValue("summary/prompt", "SUMMARY_WORD_LIMIT", prompt.SUMMARY_WORD_LIMIT, "words a summary holds at most"),
    FixedValue(
        "summary/prompt",
        "SUMMARY_CHARACTER_LIMIT",
        prompt.SUMMARY_CHARACTER_LIMIT,
        "characters a summary holds at most (a few huge words must not pass the word limit)",
    ),
    FixedValue(
        "summary/prompt",
        "MAX_TOKENS_PER_MESSAGE",
        prompt.MAX_TOKENS_PER_MESSAGE,
        "estimated tokens of one message a fold request shows at most, its head and tail",
    ),
    FixedValue(
        "summary/prompt",
        "SMALLEST_CLIP_TOKENS",
        prompt.SMALLEST_CLIP_TOKENS,
        "a lone message refused as too long is halved down to no less",
    ),
    FixedValue(
        "summary/prompt",
        "FOLD_REQUEST_SHARE",
        prompt.FOLD_REQUEST_SHARE,
        "share of a known window, less the fold's output, a fold request takes (real tokenizers count more)",
    ),
    FixedValue(
        "summary/prompt",
        "MIN_FOLD_OUTPUT_TOKENS",
        prompt.MIN_FOLD_OUTPUT_TOKENS,
        "on a known window a fold writes at most a quarter of it, and at least this",
    ),
    FixedValue(
        "summary/prompt",
        "MIN_TRANSCRIPT_TOKENS",
        prompt.MIN_TRANSCRIPT_TOKENS,
        "transcript tokens a fold request holds at least, however small the window",
    ),
    FixedValue(
        "summary/model_call",
        "FOLD_OUTPUT_TOKENS",
        model_call.FOLD_OUTPUT_TOKENS,
        "a fold's output budget",
    ),
    FixedValue(
        "summary/model_call",
        "FOLD_REASONING_OUTPUT_TOKENS",
        model_call.FOLD_REASONING_OUTPUT_TOKENS,
        "a fold's output budget on a model that reasons first",
    ),
    FixedValue(
        "rules/call_fit",
        "FIT_RATIO",
        call_fit.FIT_RATIO,
        "share of the window above which a model call after a tool is reduced (the rest is its answer's)",
    ),
    FixedValue(
        "rules/call_fit",
        "RETRY_SHRINK",
        call_fit.RETRY_SHRINK,
        "share of its estimate a refused call is retried at, where the estimate was inside the limit",
    ),
    FixedValue(
        "rules/call_fit",
        "MIN_CLIPPED_TOKENS",
        call_fit.MIN_CLIPPED_TOKENS,
        "tokens a clipped tool result keeps at least",
    ),
    FixedValue(
        "rules/context_size",
        "EMPTY_STREAM_OVERFLOW_RATIO",
        context_size.EMPTY_STREAM_OVERFLOW_RATIO,
        "share of a known window above which an empty stream is read as a prompt too long",
    ),
)


def markdown_table() -> str:
    """docs/design.md's table of the values fixed in code: one row each, where it lives, its value, its meaning."""
    rows = [f"| `{v.module}.{v.name}` | {v.value:,g} | {v.meaning} |" for v in FIXED_VALUES]
    return "\n".join(["| value | fixed at | meaning |", "| --- | ---: | --- |", *rows])


if __name__ == "__main__":
    print(markdown_table())  # noqa: T201
