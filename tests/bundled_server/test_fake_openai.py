"""The fake server must behave like OpenAI where clients care, and answer deterministically from the request."""

import json

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread
from langflow_session_memory.services.session_memory.summary.prompt import SUMMARY_INSTRUCTIONS


def chat(server, messages, **extra) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": messages, **extra}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)


def answer(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


@pytest.fixture
def server():
    with run_in_thread(FakeModelConfig()) as running:
        yield running


def test_models_list(server):
    ids = {m["id"] for m in httpx.get(f"{server.base_url}/models").json()["data"]}
    assert {"gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-5.4-mini", "gpt-5.4", "o3-mini"} <= ids


def test_non_stream_answer_and_usage(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Please note this down"}]
    body = chat(server, messages).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "OK: Please note this down"
    # ceil(9/4)+4 + ceil(21/4)+4 = 7 + 10; ceil(len("OK: Please note this down")/4) = 7
    assert body["usage"] == {
        "prompt_tokens": 17,
        "completion_tokens": 7,
        "total_tokens": 24,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_content_parts_are_read(server):
    parts = [{"type": "text", "text": "Project PRJ-7 is live."}, {"type": "image_url", "image_url": {"url": "x"}}]
    messages = [{"role": "user", "content": parts}, {"role": "user", "content": "Which project?"}]
    assert answer(chat(server, messages)) == "From our conversation: PRJ-7"


def test_stream_with_usage(server):
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hello there friend"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=10) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "OK: hello there friend"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 6


def test_recall_uses_only_facts_in_request(server):
    history = [
        {"role": "system", "content": "Key facts:\n- Project PRJ-123 runs on the EU cluster."},
        {"role": "user", "content": "Also track ticket OPS-9."},
        {"role": "assistant", "content": "OK: Also track ticket OPS-9."},
    ]
    question = {"role": "user", "content": "Which project and cluster were we using?"}
    assert answer(chat(server, [*history, question])) == "From our conversation: PRJ-123, EU"
    ticket = {"role": "user", "content": "Which ticket do we track?"}
    assert answer(chat(server, [*history, ticket])) == "From our conversation: OPS-9"
    assert answer(chat(server, [{"role": "user", "content": "What cluster is PRJ-123 on?"}])) == "I don't know."


def test_tools_in_request_are_ignored(server):
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    assert answer(chat(server, [{"role": "user", "content": "remember?"}], tools=[tool])) == "I don't know."


def test_summary_shape():
    transcript = "\n".join(
        [
            "User: Our project is PRJ-123 and it runs on the EU cluster.",
            "Assistant: Noted, PRJ-123 on EU.",
            *[f"User: this is filler line number {i} with quite a few more words in it than twelve" for i in range(60)],
        ]
    )
    messages = [
        {"role": "system", "content": f"{SUMMARY_INSTRUCTIONS}\nKeep IDS like ABC-1."},
        {"role": "user", "content": "Key facts:\n- Deadline is set by ACME.\nConversation so far:\n- old line"},
        {"role": "user", "content": transcript},
    ]
    with run_in_thread() as server:
        summary = answer(chat(server, messages))
        assert server.requests()[0]["kind"] == "summary"
    facts, conversation = summary.removeprefix("Key facts:\n").split("\nConversation so far:\n")
    assert facts.splitlines() == [
        "- Deadline is set by ACME.",
        "- Our project is PRJ-123 and it runs on the EU cluster.",
    ]
    assert "Noted" not in summary  # restates PRJ-123 and EU, no new fact
    assert "ABC-1" not in summary  # instructions are not summarized
    assert len(summary.split()) <= 300
    lines = conversation.splitlines()
    assert lines[-1] == "- this is filler line number 59 with quite a few more words"  # newest kept, 12 words
    assert "- old line" not in lines  # oldest dropped to stay within 300 words


def test_a_fold_never_keeps_the_servers_own_answer_as_a_fact():
    transcript = "\n".join(
        [
            "User: The deadline is March 3 and Dana leads it.",
            "AI: From our conversation: AI",
            "User: What is the capital of Australia?",
            "AI: I don't know.",
        ]
    )
    messages = [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": transcript}]
    with run_in_thread() as server:
        summary = answer(chat(server, messages))
    assert "From our conversation" not in summary
    assert "I don't know" not in summary


def test_summary_never_longer_than_input(server):
    transcript = "User: PRJ-5 is on the US cluster today for sure\nUser: hi there\nUser: hi there\nUser: hi there"
    messages = [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": transcript}]
    summary = answer(chat(server, messages))
    assert summary == "Key facts:\n- PRJ-5 is on the US cluster today for sure\nConversation so far:\n- hi there"
    assert len(summary.split()) <= len(transcript.split())


def test_context_length_exceeded():
    with run_in_thread(FakeModelConfig(context_limit_tokens=10)) as server:
        response = chat(server, [{"role": "user", "content": "x" * 40}])
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "messages"
    assert error["message"] == (
        "This model's maximum context length is 10 tokens. However, your messages resulted in 14 tokens. "
        "Please reduce the length of the messages."
    )


def test_strict_alternation():
    with run_in_thread(FakeModelConfig(strict_alternation=True)) as server:
        user = {"role": "user", "content": "hi"}
        assert chat(server, [user, user]).status_code == 400
        assert chat(server, [{"role": "assistant", "content": "hi"}, user]).status_code == 400
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        valid = [
            {"role": "system", "content": "s"},
            user,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "result"},
            {"role": "assistant", "content": "done"},
            user,
        ]
        assert chat(server, valid).status_code == 200


def test_fail_once_then_succeed_and_runtime_control(server):
    control = server.base_url.removesuffix("/v1") + "/_control"
    httpx.post(control, json={"fail_status": 429, "fail_times": 1}).raise_for_status()
    messages = [{"role": "user", "content": "hi"}]
    failed = chat(server, messages)
    assert failed.status_code == 429
    assert set(failed.json()["error"]) >= {"message", "type", "code"}
    assert chat(server, messages).status_code == 200
    assert httpx.get(control).json()["fail_times"] == 0


def test_fail_only_summaries(server):
    server.config.fail_status = 500
    server.config.fail_only_summaries = True
    assert chat(server, [{"role": "user", "content": "hi"}]).status_code == 200
    summary_request = [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": "x"}]
    assert chat(server, summary_request).status_code == 500


def test_request_log_one_line_per_request(tmp_path):
    log = tmp_path / "requests.jsonl"
    with run_in_thread(FakeModelConfig(request_log=str(log), context_limit_tokens=50)) as server:
        chat(server, [{"role": "user", "content": "hi"}])
        chat(server, [{"role": "user", "content": "y" * 400}])
        records = server.requests()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == records
    assert [(r["kind"], r["status"]) for r in lines] == [("chat", 200), ("chat", 400)]
    assert lines[0]["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert lines[0]["prompt_tokens"] == 5
    assert lines[0]["completion_tokens"] == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
async def test_langchain_client_parses_responses(streaming):
    with run_in_thread() as server:
        model = ChatOpenAI(
            base_url=server.base_url, api_key="x", model="gpt-4o-mini", streaming=streaming, stream_usage=True
        )
        question = "Which cluster is the project on?"
        result = await model.ainvoke([("system", "Project PRJ-123 is on EU."), ("human", question)])
    assert result.content == "From our conversation: PRJ-123, EU"
    assert result.usage_metadata["output_tokens"] == 9
    assert server.requests()[0]["body"].get("stream", False) is streaming


def test_output_faults_and_timeout(server):
    messages = [{"role": "user", "content": "hi"}]
    server.config.empty_output = True
    assert answer(chat(server, messages)) == ""
    server.config.empty_output, server.config.garbage_output = False, True
    garbage = answer(chat(server, messages))
    assert len(garbage.split()) == 2000
    assert "Key facts:" not in garbage
    server.config.timeout_s = 5
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base_url}/chat/completions", json={"messages": messages}, timeout=0.2)


@pytest.mark.parametrize(("temperature", "shown"), [(0, "0"), (0.0, "0"), (0.2, "0.2")])
def test_reasoning_model_rejects_non_default_temperature(server, temperature, shown):
    messages = [{"role": "user", "content": "hi"}]
    response = chat(server, messages, model="gpt-5.4-mini", temperature=temperature)
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": f"Unsupported value: 'temperature' does not support {shown} with this model. "
            "Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
    assert [(r["kind"], r["status"]) for r in server.requests()] == [("chat", 400)]
    assert server.requests()[0]["body"]["temperature"] == temperature


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("gpt-5.4-mini", {}),
        ("gpt-5.4-mini", {"temperature": None}),
        ("gpt-5.4-mini", {"temperature": 1}),
        ("gpt-5-chat-latest", {"temperature": 0}),
        ("gpt-4o-mini", {"temperature": 0}),
    ],
)
def test_temperature_accepted(server, model, extra):
    assert answer(chat(server, [{"role": "user", "content": "hi"}], model=model, **extra)) == "OK: hi"


@pytest.mark.parametrize("model", ["gpt-5.4", "o1", "o3-mini", "o4-mini"])
def test_other_reasoning_models_reject_temperature(server, model):
    assert chat(server, [{"role": "user", "content": "hi"}], model=model, temperature=0).status_code == 400


def test_temperature_check_can_be_turned_off():
    with run_in_thread(FakeModelConfig(reject_temperature_for_reasoning_models=False)) as server:
        response = chat(server, [{"role": "user", "content": "hi"}], model="gpt-5.4-mini", temperature=0)
    assert answer(response) == "OK: hi"


def test_langchain_client_sees_openai_temperature_error(server):
    plain = ChatOpenAI(model="gpt-5.4-mini", base_url=server.base_url, api_key="sk-local")
    with pytest.raises(openai.BadRequestError, match="'temperature' does not support"):
        plain.model_copy(update={"temperature": 0}).invoke("hi")
    # ChatOpenAI's constructor drops the temperature for gpt-5 models, so this one answers.
    validated = ChatOpenAI(model="gpt-5.4-mini", temperature=0, base_url=server.base_url, api_key="sk-local")
    assert validated.invoke("hi").content == "OK: hi"
    sent = [(r["body"].get("temperature"), r["status"]) for r in server.requests()]
    assert sent == [(0, 400), (None, 200)]


def test_an_answer_note_follows_answers_in_words_and_the_next_answer_is_unchanged_by_it():
    """``make run``'s note ("the bundled test server ..."): after answers in words, never in a summary or a tool call,
    and a conversation holding it is answered as one without it."""
    from langflow_session_memory.launcher import ANSWER_NOTE

    fact = {"role": "user", "content": "Our project is PRJ-123 on the EU cluster."}
    question = {"role": "user", "content": "Which cluster and project were we on?"}
    with run_in_thread(FakeModelConfig(answer_note=ANSWER_NOTE)) as noted:
        first = answer(chat(noted, [fact]))
        assert first.endswith(f"\n\n{ANSWER_NOTE}")
        later = answer(chat(noted, [fact, {"role": "assistant", "content": first}, question]))
        summary = answer(chat(noted, [fact, {"role": "user", "content": SUMMARY_INSTRUCTIONS}]))
    assert later == f"From our conversation: PRJ-123, EU\n\n{ANSWER_NOTE}"
    assert ANSWER_NOTE not in summary
