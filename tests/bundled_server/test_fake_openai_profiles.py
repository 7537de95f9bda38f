"""The bundled server behaves like the servers people run: OpenAI's output cap, llama-cpp-python's quirks, weak models.

Each llama-cpp-python behaviour here was first seen on the real server (llama-cpp-python 0.3.36 serving Gemma 3
270M, docs/real-model.md): an empty 200 stream on overflow, no usage in streams, ``max_completion_tokens`` ignored,
one request at a time, a streamed answer ended early when another request waits. The one slot's cached prompt was
measured with Qwen2.5-Coder 1.5B: a request evaluates only what it adds to the last request and answer, so a fold in
between makes the next turn evaluate its whole prompt (3 s turns became 43 s), and closing the connection does not
stop a prompt's evaluation.
"""

import asyncio
import json
import threading

import httpx
import pytest

from langflow_session_memory.bundled_server.fake_openai import (
    PIECE_FRAMING_TOKENS,
    FakeModelConfig,
    count_pieces,
    run_in_thread,
)
from langflow_session_memory.services.session_memory.summary.prompt import ChatLine, fold_request


def as_openai(request: list) -> list[dict]:
    return [{"role": "system" if m.type == "system" else "user", "content": m.content} for m in request]


FOLD = as_openai(
    fold_request([ChatLine("User", "Our project is PRJ-123 on the EU cluster."), ChatLine("AI", "Noted.")])
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
    summary_in_a_chat = [
        {"role": "user", "content": "Notes on the earlier part:\n\nKey facts:\n- x\nConversation so far:\n- y"},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "Please continue"},
    ]
    post(llama, summary_in_a_chat)
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


def chat(*texts: str) -> list[dict]:
    """Alternating user and assistant messages, a system prompt first."""
    roles = ("user", "assistant")
    return [{"role": "system", "content": "Be brief."}] + [
        {"role": roles[index % 2], "content": text} for index, text in enumerate(texts)
    ]


def test_the_one_slot_evaluates_only_what_a_request_adds_to_the_last_request_and_its_answer(llama):
    first = chat("Our project is PRJ-123.")
    answer = post(llama, first).json()["choices"][0]["message"]["content"]
    post(llama, chat("Our project is PRJ-123.", answer, "And the cluster is EU."))
    post(llama, FOLD)  # a fold in between: the slot now holds the fold's prompt
    post(llama, chat("Our project is PRJ-123.", answer, "And the cluster is EU.", "OK", "Thanks."))

    first_turn, second_turn, fold, after_fold = llama.requests()
    assert first_turn["evaluated_tokens"] == first_turn["prompt_tokens"]  # a cold slot
    # Only the new message: the answer's tokens were cached as it was written.
    assert second_turn["evaluated_tokens"] == count_pieces("And the cluster is EU.") + PIECE_FRAMING_TOKENS
    # The fold shares no more than a system message's opening with the chat, and the chat then no more with it:
    # the chat's cached prompt is gone.
    assert fold["evaluated_tokens"] >= fold["prompt_tokens"] - PIECE_FRAMING_TOKENS
    assert after_fold["evaluated_tokens"] >= after_fold["prompt_tokens"] - PIECE_FRAMING_TOKENS


def test_the_openai_profile_has_no_slot(llama):
    with run_in_thread(FakeModelConfig()) as server:
        post(server, chat("hi"))
        assert "evaluated_tokens" not in server.requests()[0]


def test_a_prompt_being_evaluated_keeps_the_slot_busy_after_its_client_goes_away(llama):
    llama.config.prompt_tokens_per_s = 100.0  # the long prompt below: about a second
    long_prompt = chat("word " * 90)
    body = {"model": "gpt-4o-mini", "messages": long_prompt, "stream": True}
    with httpx.stream("POST", f"{llama.base_url}/chat/completions", json=body, timeout=30):
        pass  # the client leaves before the first token
    post(llama, chat("me next"))
    gone, served = llama.requests()
    evaluation_seconds = gone["evaluated_tokens"] / 100.0
    assert evaluation_seconds > 0.9
    assert served["ts"] - gone["ts"] >= evaluation_seconds - 0.05  # served only once the evaluation had ended
    assert served["evaluated_tokens"] == count_pieces("me next")  # the slot holds the gone prompt


def test_echo_mode_parrots_the_fold_instructions():
    with run_in_thread(FakeModelConfig(echo_output=True)) as server:
        answer = post(server, FOLD).json()["choices"][0]["message"]["content"]
    assert answer == FOLD[0]["content"]


@pytest.mark.parametrize(("style", "first_line"), [("markdown", "## Key facts"), ("bold", "**Key Facts:**")])
def test_a_summary_can_be_headed_as_real_models_head_it(style, first_line):
    with run_in_thread(FakeModelConfig(heading_style=style)) as server:
        answer = post(server, FOLD).json()["choices"][0]["message"]["content"]
    assert answer.splitlines()[0] == first_line


def test_verbose_summary_are_longer_than_a_batch_of_short_messages():
    short = [ChatLine("User" if i % 2 == 0 else "AI", "ok") for i in range(20)]
    request = [{"role": "system" if m.type == "system" else "user", "content": m.content} for m in fold_request(short)]
    with run_in_thread(FakeModelConfig(verbose_summary=True)) as server:
        answer = post(server, request).json()["choices"][0]["message"]["content"]
    assert len(answer.split()) > 20
