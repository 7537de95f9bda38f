"""The bundled server reports cached prompt tokens as OpenAI does, by the prompt-cache simulator's rules."""

import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_openai import ChatOpenAI

from langflow_session_memory.bundled_server.fake_openai import (
    FakeModelConfig,
    estimate_prompt_tokens,
    run_in_thread,
    serialized_prompt,
)

# 1,254 + 12 prompt tokens: cacheable up to 1,152 (1,024 + 128).
LONG = [
    {"role": "system", "content": "Be brief. " * 500},
    {"role": "user", "content": "Please note this down, thanks"},
]
LONG_PROMPT_TOKENS = 1266
LONG_CACHED = 1152
SEARCH_TOOL = {"type": "function", "function": {"name": "search_earlier_messages", "parameters": {}}}


def post(server, messages, **extra) -> dict:
    body = {"model": "gpt-4o-mini", "messages": messages, **extra}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def cached(answer: dict) -> int:
    return answer["usage"]["prompt_tokens_details"]["cached_tokens"]


def streamed_usage(server, messages) -> dict:
    body = {"model": "gpt-4o-mini", "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=10) as response:
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    return json.loads(events[-2])["usage"]


@pytest.fixture
def server():
    with run_in_thread(FakeModelConfig()) as running:
        yield running


def test_a_long_request_sent_twice_is_served_from_the_cache_the_second_time(server):
    first, second = post(server, LONG), post(server, LONG)
    assert first["usage"]["prompt_tokens"] == LONG_PROMPT_TOKENS
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert cached(second) == LONG_CACHED
    assert [r["cached_tokens"] for r in server.requests()] == [0, LONG_CACHED]


def test_the_streamed_usage_chunk_reports_cached_tokens(server):
    post(server, LONG)
    usage = streamed_usage(server, LONG)
    assert usage["prompt_tokens"] == LONG_PROMPT_TOKENS
    assert usage["prompt_tokens_details"] == {"cached_tokens": LONG_CACHED}


def test_a_request_below_1024_tokens_is_never_served_from_the_cache(server):
    short = [{"role": "user", "content": "hello there friend"}]
    assert cached(post(server, short)) == cached(post(server, short)) == 0


def test_a_conversation_that_grows_reads_its_previous_request(server):
    post(server, LONG)
    grown = [*LONG, {"role": "assistant", "content": "OK: Please note this down, thanks"}, *LONG[1:]]
    answer = post(server, grown)
    assert answer["usage"]["prompt_tokens"] == LONG_PROMPT_TOKENS + 13 + 12
    assert cached(answer) == 1152  # the previous request's 1,266 tokens, down to a 128-token step


def test_a_changed_first_message_or_tool_list_shares_nothing(server):
    post(server, LONG)
    edited = [{"role": "system", "content": "Be short. " + "Be brief. " * 499}, LONG[1]]
    assert cached(post(server, edited)) == 0
    assert cached(post(server, LONG, tools=[SEARCH_TOOL])) == 0
    assert cached(post(server, LONG, tools=[SEARCH_TOOL])) == LONG_CACHED


def test_another_model_does_not_read_the_cache(server):
    post(server, LONG)
    assert cached(post(server, LONG, model="gpt-4o")) == 0


def test_a_prefix_idle_longer_than_the_ttl_is_gone(server):
    server.config.prompt_cache_ttl_s = 0.0
    post(server, LONG)
    assert cached(post(server, LONG)) == 0


def test_clearing_the_cache_starts_the_next_request_cold(server):
    post(server, LONG)
    server.clear_prompt_cache()
    assert cached(post(server, LONG)) == 0


def test_a_failed_request_caches_nothing_and_logs_no_cached_tokens(server):
    server.config.fail_status, server.config.fail_times = 500, 1
    httpx.post(f"{server.base_url}/chat/completions", json={"model": "gpt-4o-mini", "messages": LONG}, timeout=10)
    assert cached(post(server, LONG)) == 0
    assert [(r["status"], r["cached_tokens"]) for r in server.requests()] == [(500, None), (200, 0)]


def test_the_request_log_file_carries_the_cached_tokens(tmp_path):
    log = tmp_path / "requests.jsonl"
    with run_in_thread(FakeModelConfig(request_log=str(log))) as server:
        post(server, LONG)
        post(server, LONG)
    assert [json.loads(line)["cached_tokens"] for line in log.read_text().splitlines()] == [0, LONG_CACHED]


def test_llama_cpp_python_reports_no_cached_tokens():
    with run_in_thread(FakeModelConfig(profile="llama-cpp-python")) as server:
        post(server, LONG)
        usage = post(server, LONG)["usage"]
    assert "prompt_tokens_details" not in usage
    assert [r["cached_tokens"] for r in server.requests()] == [None, None]


messages_strategy = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": st.text(max_size=60)}
    ),
    max_size=6,
)


@given(messages=messages_strategy, tools=st.none() | st.just([SEARCH_TOOL]))
def test_the_serialized_prompt_has_one_item_per_counted_token(messages, tools):
    assert len(serialized_prompt("gpt-4o-mini", tools, messages)) == estimate_prompt_tokens(messages)


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
async def test_langchain_sees_cache_read_on_the_second_identical_long_request(streaming):
    with run_in_thread() as server:
        assert server.base_url.startswith("http://127.0.0.2:")
        model = ChatOpenAI(
            base_url=server.base_url, api_key="x", model="gpt-4o-mini", streaming=streaming, stream_usage=True
        )
        prompt = [(m["role"], m["content"]) for m in LONG]
        first, second = await model.ainvoke(prompt), await model.ainvoke(prompt)
    assert first.usage_metadata["input_token_details"]["cache_read"] == 0
    assert second.usage_metadata["input_tokens"] == LONG_PROMPT_TOKENS
    assert second.usage_metadata["input_token_details"]["cache_read"] == LONG_CACHED
    assert [r["body"].get("stream", False) for r in server.requests()] == [streaming, streaming]
