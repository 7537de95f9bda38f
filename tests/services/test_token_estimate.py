"""The token estimate against real tokenizers' counts of what Langflow's tools hand the Agent (issue 39).

The counts were measured by Qwen2.5's and Gemma 3's own tokenizers (the real-model tier's GGUF files) and by
OpenAI's ``cl100k_base``/``o200k_base`` (js-tiktoken), recorded by ``python -m tests.real_model.token_counts``;
``make test-real`` counts again.
"""

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from lfx.schema.message import Message

from langflow_session_memory.services.session_memory.rules.token_estimate import (
    estimate_tokens,
    message_tokens,
    messages_tokens,
    text_of,
    tool_tokens,
)
from tests.services.token_samples import digest, samples

RECORD = json.loads((Path(__file__).parent / "token_counts.json").read_text())
SAMPLES = samples()
LOCAL_TOKENIZERS = ("qwen2.5", "gemma3")  # those of the models a window is declared for: llama.cpp, Ollama
FRAMING = 4  # the estimate counts a message's framing; a tokenizer counts the text alone


def ratio(name: str, tokenizer: str) -> float:
    return (estimate_tokens(SAMPLES[name]) - FRAMING) / RECORD["counts"][tokenizer][name]


def test_the_samples_are_those_the_counts_were_measured_on():
    assert {name: digest(text) for name, text in SAMPLES.items()} == RECORD["samples"], (
        "a sample changed: count it again with `python -m tests.real_model.token_counts`"
    )


@pytest.mark.parametrize("tokenizer", LOCAL_TOKENIZERS)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_estimate_is_within_a_fifth_of_a_local_model_s_tokenizer_and_never_a_tenth_under(name, tokenizer):
    assert 0.9 <= ratio(name, tokenizer) <= 1.2


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_on_openai_s_tokenizers_the_estimate_errs_large_never_small(name):
    for tokenizer in ("cl100k_base", "o200k_base"):
        assert 1.0 <= ratio(name, tokenizer) <= 1.45


def test_a_table_s_padding_costs_what_tokenizers_charge_for_it_not_a_token_per_four_spaces():
    # 200,000 spaces: Qwen2.5 and OpenAI's tokenizers count 1,563 tokens, Gemma 3's 6,452 (runs of up to 128 and
    # 31 spaces); characters / 4 made it 50,000, and clipped a page whose padding was a third of it.
    assert 1_563 < estimate_tokens(" " * 200_000) < 6_452


def test_a_message_s_text_is_its_text_blocks_and_its_size_counts_the_tools_it_calls():
    # Anthropic's answer: text blocks around a tool_use block, which the call fitting read as an empty line.
    answer = AIMessage(
        content=[
            {"type": "text", "text": "Looking it up."},
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"query": "guinea pig"}},
            "Done.",
        ],
        tool_calls=[{"id": "t1", "name": "search", "args": {"query": "guinea pig"}}],
    )
    assert text_of(answer) == "Looking it up.Done."
    assert message_tokens(answer) == estimate_tokens(text_of(answer)) + estimate_tokens('{"query": "guinea pig"}')
    assert messages_tokens([answer, HumanMessage("hi")]) == message_tokens(answer) + estimate_tokens("hi")


def test_a_langflow_message_still_streaming_has_no_text_to_count():
    streaming = Message(text="")
    streaming.text = iter(["partial"])
    assert text_of(streaming) == ""
    assert text_of(Message(text="Oscar")) == "Oscar"


def test_a_tool_is_sized_by_the_schema_sent_whatever_form_it_is_given_in():
    @tool
    def read_build_log(build_id: str) -> str:
        """Read a build's log by its id."""
        return build_id

    schema = {
        "name": "read_build_log",
        "description": "Read a build's log by its id.",
        "parameters": {
            "type": "object",
            "properties": {"build_id": {"type": "string"}},
            "required": ["build_id"],
        },
    }
    assert tool_tokens(read_build_log) == tool_tokens(schema)
    assert tool_tokens(schema) == estimate_tokens(json.dumps({"type": "function", "function": schema}))
