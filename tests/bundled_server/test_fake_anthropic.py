"""The bundled server's Anthropic Messages API, through the clients Langflow uses (langchain-anthropic, the SDK).

It answers by the OpenAI route's rules, refuses what Anthropic refuses in Anthropic's words, and caches
only at the breakpoints a request marks, by the prompt-cache simulator's rules.
"""

import anthropic
import httpx
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langflow_session_memory.services.session_memory.rules.context_size import is_context_length_error
from langflow_session_memory.services.session_memory.rules.usage import reported
from tests.claude import HAIKU, SONNET, claude, search_earlier_messages

LONG_SYSTEM = "Be brief. " * 600  # 1,500 tokens + 4
CONVERSATION = [
    SystemMessage(LONG_SYSTEM),
    HumanMessage("Our project is PRJ-123 on the EU cluster."),
    AIMessage("OK: noted."),
    HumanMessage("Which project were we on?"),
]
TOP_LEVEL = {"type": "ephemeral"}


def post(claude_server, body: dict) -> httpx.Response:
    return httpx.post(
        f"{claude_server.base_url}/messages", json={"model": SONNET, "max_tokens": 64, **body}, timeout=10
    )


@pytest.mark.parametrize("streaming", [False, True])
def test_langchain_reads_the_answer_and_its_usage_streamed_or_not(claude_server, streaming):
    answer = claude(claude_server, streaming=streaming, stream_usage=True).invoke(CONVERSATION)

    assert answer.content == "From our conversation: PRJ-123, EU"
    usage = answer.usage_metadata
    assert usage["input_tokens"] == claude_server.requests()[-1]["prompt_tokens"] > 1500
    assert usage["output_tokens"] == 9
    assert (
        reported(usage).cached_input_tokens == reported(usage).cache_write_input_tokens == 0
    )  # nothing marked, nothing cached


@pytest.mark.parametrize("streaming", [False, True])
def test_a_request_marked_at_its_last_block_is_read_from_the_cache_the_next_time(claude_server, streaming):
    model = claude(claude_server, streaming=streaming, stream_usage=True)
    first = model.invoke(CONVERSATION, cache_control=TOP_LEVEL).usage_metadata
    later = model.invoke([*CONVERSATION, AIMessage("PRJ-123"), HumanMessage("Thanks.")], cache_control=TOP_LEVEL)

    assert (reported(first).cached_input_tokens, reported(first).cache_write_input_tokens) == (0, first["input_tokens"])
    usage = later.usage_metadata
    assert reported(usage).cached_input_tokens == first["input_tokens"]
    assert reported(usage).cache_write_input_tokens == usage["input_tokens"] - first["input_tokens"] > 0
    assert [(r["cached_tokens"], r["cache_write_tokens"]) for r in claude_server.requests()] == [
        (0, first["input_tokens"]),
        (first["input_tokens"], reported(usage).cache_write_input_tokens),
    ]


def test_the_raw_usage_adds_up_to_the_prompt_as_anthropic_s_does(claude_server):
    body = {"system": LONG_SYSTEM, "messages": [{"role": "user", "content": "Hello"}], "cache_control": TOP_LEVEL}
    post(claude_server, body)

    usage = post(claude_server, body).json()["usage"]

    read, written, rest = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"], usage["input_tokens"]
    assert read + written + rest == claude_server.requests()[-1]["prompt_tokens"]
    assert (written, rest) == (0, 0)
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}


def test_a_prefix_under_the_model_s_minimum_is_not_cached(claude_server):
    for model in (SONNET, HAIKU):
        claude(claude_server, model).invoke(CONVERSATION, cache_control=TOP_LEVEL)
        again = claude(claude_server, model).invoke(CONVERSATION, cache_control=TOP_LEVEL).usage_metadata
        # about 1,550 tokens: over Sonnet 4.5's 1,024-token minimum, under Haiku 4.5's 4,096
        assert reported(again).cached_input_tokens == (again["input_tokens"] if model == SONNET else 0)


def test_a_fifth_breakpoint_is_refused_in_anthropic_s_words(claude_server):
    marked = [{"type": "text", "text": f"part {i}", "cache_control": TOP_LEVEL} for i in range(4)]
    response = post(claude_server, {"messages": [{"role": "user", "content": marked}], "cache_control": TOP_LEVEL})

    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        },
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"max_tokens": None, "messages": [{"role": "user", "content": "hi"}]}, "max_tokens: Field required"),
        ({"messages": []}, "messages: at least one message is required"),
        ({"messages": [{"role": "system", "content": "hi"}]}, "messages.0.role: Input should be 'user' or 'assistant'"),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": ""},
                    {"role": "user", "content": "hi"},
                ]
            },
            "messages.1: all messages must have non-empty content except for the optional final assistant message",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
            "text content blocks must be non-empty",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}
                ]
            },
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_1",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}}]},
                    {"role": "user", "content": "go on"},
                ]
            },
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_2",
        ),
    ],
)
def test_what_anthropic_refuses_is_refused_with_its_words(claude_server, body, message):
    response = post(claude_server, body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert message in error["message"]


def test_a_prompt_over_the_context_window_is_the_overflow_langchain_and_the_extension_recognise(claude_server):
    claude_server.config.context_limit_tokens = 500

    with pytest.raises(ContextOverflowError, match=r"prompt is too long: \d+ tokens > 500 maximum") as refused:
        claude(claude_server).invoke(CONVERSATION)

    assert is_context_length_error(refused.value)


def test_an_injected_failure_is_anthropic_s_error_for_its_status(claude_server):
    claude_server.config.fail_status, claude_server.config.fail_times = 429, 1

    with pytest.raises(anthropic.RateLimitError):
        claude(claude_server, max_retries=0).invoke(CONVERSATION)
    assert claude(claude_server).invoke(CONVERSATION).content.startswith("From our conversation")


async def test_the_search_tool_round_trip_reads_the_tool_s_result(claude_server):
    model = claude(claude_server, streaming=True).bind_tools([search_earlier_messages])
    question = HumanMessage("What is the badge code of team 13?")

    call = await model.ainvoke([question])
    [tool_call] = call.tool_calls
    result = ToolMessage(
        "2026-01-05 10:00 User: The badge code of team 13 is BADGE-1000.", tool_call_id=tool_call["id"]
    )
    answer = await model.ainvoke([question, call, result])

    assert tool_call["name"] == "search_earlier_messages"
    assert tool_call["args"] == {"query": "badge code team 13"}
    assert answer.text == "From our conversation: BADGE-1000"
    searched, answered = claude_server.requests()
    assert searched["tool_query"] == "badge code team 13"
    assert answered["body"]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": tool_call["id"],
        "content": "2026-01-05 10:00 User: The badge code of team 13 is BADGE-1000.",
    }


def test_the_request_log_keeps_the_request_as_sent_and_as_the_answering_rules_read_it(claude_server):
    claude(claude_server).invoke(CONVERSATION, cache_control=TOP_LEVEL)

    [logged] = claude_server.requests()
    assert logged["api"] == "anthropic"
    assert logged["wire"]["system"] == LONG_SYSTEM
    assert logged["wire"]["cache_control"] == TOP_LEVEL
    assert [m["role"] for m in logged["body"]["messages"]] == ["system", "user", "assistant", "user"]
    assert logged["body"]["messages"][0]["content"] == LONG_SYSTEM
