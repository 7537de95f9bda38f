"""The bundled server behaves like the servers people run: OpenAI's output cap, llama-cpp-python's quirks, weak models.

Each llama-cpp-python behaviour here was first seen on the real server (llama-cpp-python 0.3.36 serving Gemma 3
270M, docs/real-model.md): an empty 200 stream on overflow, no usage in streams, ``max_completion_tokens`` ignored,
one request at a time, a streamed answer ended early when another request waits.
"""

import asyncio
import json
import threading

import httpx
import pytest

from langflow_session_memory.services.session_memory.summarizer import ChatLine, fold_request
from langflow_session_memory.testing.fake_openai import FakeModelConfig, run_in_thread


def as_openai(request: list) -> list[dict]:
    return [{"role": "system" if m.type == "system" else "user", "content": m.content} for m in request]


FOLD = as_openai(
    fold_request("", [ChatLine("User", "Our project is PRJ-123 on the EU cluster."), ChatLine("AI", "Noted.")])
)


def post(server, messages, **extra) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": messages, **extra}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30)


def stream_events(server, messages, **extra) -> tuple[int, list[str]]:
    body = {"model": "gpt-4o-mini", "messages": messages, "stream": True, **extra}
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=30) as response:
        return response.status_code, [line[6:] for line in response.iter_lines() if line.startswith("data: ")]


@pytest.fixture
def llama():
    with run_in_thread(FakeModelConfig(profile="llama-cpp-python")) as server:
        yield server


def test_a_fold_is_recognised_by_what_the_model_reads_not_by_a_marker(llama):
    assert post(llama, FOLD).json()["choices"][0]["message"]["content"].startswith("Key facts:")
    notes_in_a_chat = [
        {"role": "user", "content": "Notes on the earlier part:\n\nKey facts:\n- x\nConversation so far:\n- y"},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "Please continue"},
    ]
    post(llama, notes_in_a_chat)
    assert [record["kind"] for record in llama.requests()] == ["summary", "chat"]


@pytest.mark.parametrize(("profile", "honoured"), [("openai", True), ("llama-cpp-python", False)])
def test_max_completion_tokens_is_honoured_by_openai_and_ignored_by_llama_cpp_python(profile, honoured):
    with run_in_thread(FakeModelConfig(profile=profile)) as server:
        choice = post(server, FOLD, max_completion_tokens=5).json()["choices"][0]
    assert (choice["finish_reason"] == "length") is honoured
    assert (len(choice["message"]["content"]) <= 20) is honoured


def test_max_tokens_cuts_the_answer_with_finish_reason_length(llama):
    choice = post(llama, FOLD, max_tokens=5).json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "Key facts:\n- Our pro"  # 5 tokens of 4 characters


def test_llama_cpp_python_answers_an_overflowing_stream_with_an_empty_200(llama):
    llama.config.context_limit_tokens = 20
    status, events = stream_events(llama, [{"role": "user", "content": "word " * 50}])
    assert (status, events) == (200, [])
    refused = post(llama, [{"role": "user", "content": "word " * 50}], max_tokens=7)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "This model's maximum context length is 20 tokens. However, you requested 63 tokens (56 in the messages, "
        "7 in the completion). Please reduce the length of the messages or completion."
    )


def test_llama_cpp_python_counts_tokens_like_a_real_tokenizer(llama):
    log_line = "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)"
    usage = post(llama, [{"role": "user", "content": log_line}]).json()["usage"]
    assert usage["prompt_tokens"] == 29 + 6  # digits one by one (Gemma 3 counted 32), and the turn's framing


def test_llama_cpp_python_sends_no_usage_in_streams(llama):
    _status, events = stream_events(llama, [{"role": "user", "content": "hi"}], stream_options={"include_usage": True})
    assert events[-1] == "[DONE]"
    assert not any("usage" in json.loads(event) for event in events[:-1])


def test_llama_cpp_python_serves_one_request_at_a_time(llama):
    llama.config.latency_s = 0.5
    finished: list[str] = []

    def ask(name: str) -> None:
        post(llama, [{"role": "user", "content": name}])
        finished.append(name)

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    asyncio.run(asyncio.sleep(0.1))
    ask("second")
    first.join()
    assert finished == ["first", "second"]
    records = llama.requests()
    assert records[1]["ts"] - records[0]["ts"] >= 0.45  # the second was answered only after the first


def test_a_waiting_request_ends_a_streamed_answer_early_without_a_finish_reason(llama):
    llama.config.latency_s = 1.0
    waiting = threading.Timer(0.3, lambda: post(llama, [{"role": "user", "content": "me next"}]))
    waiting.start()
    _status, events = stream_events(llama, [{"role": "user", "content": "please write a long answer " * 5}])
    waiting.join()
    assert events[-1] == "[DONE]"
    assert all(choice["finish_reason"] is None for e in events[:-1] for choice in json.loads(e)["choices"])


def test_echo_mode_parrots_the_fold_instructions():
    with run_in_thread(FakeModelConfig(echo_output=True)) as server:
        answer = post(server, FOLD).json()["choices"][0]["message"]["content"]
    assert answer == FOLD[0]["content"]


@pytest.mark.parametrize(("style", "first_line"), [("markdown", "## Key facts"), ("bold", "**Key Facts:**")])
def test_notes_can_be_headed_as_real_models_head_them(style, first_line):
    with run_in_thread(FakeModelConfig(heading_style=style)) as server:
        answer = post(server, FOLD).json()["choices"][0]["message"]["content"]
    assert answer.splitlines()[0] == first_line


def test_verbose_notes_are_longer_than_a_batch_of_short_messages():
    short = [ChatLine("User" if i % 2 == 0 else "AI", "ok") for i in range(20)]
    request = [
        {"role": "system" if m.type == "system" else "user", "content": m.content} for m in fold_request("", short)
    ]
    with run_in_thread(FakeModelConfig(verbose_notes=True)) as server:
        answer = post(server, request).json()["choices"][0]["message"]["content"]
    assert len(answer.split()) > 20
