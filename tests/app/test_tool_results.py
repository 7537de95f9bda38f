"""A huge tool result inside a turn (issue 28): the stock Agent fails, ours answers from the result's head.

Real custom components connected in tool mode to the Agent's Tools, the bundled server at a 16,000-token
window (it calls the tools a message names: ``fake_openai``, "Named tools"), both databases. The turn's
first model call fits; the call after the 200 KB result would not.
"""

import json
import uuid

import pytest

from langflow_session_memory.services.session_memory.agent.playground import STEP_NAME, step_facts
from tests.app.langflow_client import CLAUDE, MODEL
from tests.app.test_real_server_behaviour import behaving

WINDOW = 16_000
HEAD = "Build 4711 failed at step compile: missing header core.h."
OWNER_HEAD = "Owner: Dana Whitfield, platform team."


def tool_component(class_name: str, method: str, argument: str, text_expression: str) -> str:
    """A custom component whose one output, in tool mode, is a tool named ``method`` returning the text."""
    return f'''
from lfx.custom.custom_component.component import Component
from lfx.io import MessageTextInput, Output
from lfx.schema.message import Message


class {class_name}(Component):
    display_name = "{class_name}"
    description = "Reads {argument} for the agent."
    name = "{class_name}"
    inputs = [MessageTextInput(name="{argument}", display_name="{argument}", tool_mode=True)]
    outputs = [Output(name="text_output", display_name="Text", method="{method}")]

    def {method}(self) -> Message:
        return Message(text={text_expression})
'''


# 200 KB of a real-looking build log (about 52,000 tokens): its first line says why the build failed.
BUILD_LOG = tool_component(
    "BuildLog",
    "read_build_log",
    "build_id",
    f'"{HEAD}\\n" + "".join(f"[{{i:05d}}] cc -c src/module_{{i % 97}}.c -o build/module.o: ok\\n"'
    " for i in range(3600))",
)
OWNER = tool_component("BuildOwner", "read_build_owner", "team", f'"{OWNER_HEAD}"')


def turn(langflow, fake_model, *, memory: bool, question: str, model=MODEL, declared: bool = False, **server):
    """One turn on a fresh flow with both tools, after the seeded turns (12, a summary of the first 20 messages, at
    the default; N=2 raw)."""
    session_id = f"tools-{uuid.uuid4()}"
    flow_id, agent_id = langflow.seeded_folded_session(session_id, tools=(BUILD_LOG, OWNER), model=model)
    tweaks = {agent_id: {"summarize_older_messages": memory}}
    if declared:
        tweaks[agent_id]["context_window_tokens"] = WINDOW
    before = len(fake_model.requests())
    with behaving(fake_model, context_limit_tokens=WINDOW, **server):
        response = langflow.run(flow_id, question, session_id=session_id, tweaks=tweaks, check=False)
    requests = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    return (
        response,
        requests,
        langflow.sql("SELECT COUNT(*) FROM message WHERE session_id = :s AND text = :t", s=session_id, t=question)[0][
            0
        ],
    )


def answer_of(response) -> str:
    return response.json()["outputs"][0]["outputs"][0]["results"]["message"]["text"]


def stock_fails_ours_answers(langflow, fake_model, question: str, answer: str, **settings):
    """The turn on the stock Agent (a 500: the provider's refusal or empty stream), then on ours (``answer``)."""
    stock, stock_requests, _ = turn(langflow, fake_model, memory=False, question=question, **settings)
    ours, requests, stored = turn(langflow, fake_model, memory=True, question=question, **settings)
    assert stock.status_code == 500
    assert ours.status_code == 200, ours.text
    assert answer_of(ours) == answer
    assert stored == 1  # the user's message is stored once
    return stock_requests, ours, requests


def answer_step_facts(response) -> dict:
    blocks = response.json()["outputs"][0]["outputs"][0]["results"]["message"]["content_blocks"]
    return next(step_facts(block) for block in walk(blocks) if block.get("name") == STEP_NAME)


def walk(blocks):
    for block in blocks or []:
        yield block
        yield from walk(block.get("contents"))


def tool_results_sent(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m.get("role") == "tool"]


READ_LOG = "Read the build log with read_build_log and tell me why it failed."


@pytest.mark.parametrize("declared", [False, True], ids=["refused-then-retried", "window-declared"])
@pytest.mark.expect_log("session_context_overflow")
def test_a_200_kb_tool_result_on_a_16k_window_is_answered_from_its_head(langflow, fake_model, declared):
    stock_requests, ours, requests = stock_fails_ours_answers(
        langflow, fake_model, READ_LOG, f"From the tools: {HEAD}", declared=declared
    )

    assert [r["status"] for r in stock_requests] == [200, 400]
    # Refused once and retried smaller in the same turn; with the window declared, never sent too large.
    assert [r["status"] for r in requests] == ([200, 200] if declared else [200, 400, 200])
    assert all(r["prompt_tokens"] <= WINDOW for r in requests if r["status"] == 200)
    [result] = tool_results_sent(requests[-1])  # the tool ran once; its head and tail were kept
    assert result.startswith(HEAD)
    assert "characters of this tool result were cut here" in result
    facts = answer_step_facts(ours)
    assert facts["tool_results_clipped"] == 1
    assert facts["retried_after_too_long"] is not declared
    before, after = (int(n) for n in facts["tool_result_tokens"].split(" -> "))
    assert before > 50_000 > WINDOW > after
    assert facts["history_left_out"] == 4  # the 4 unfolded messages (gap and window, sent raw); the summary stays
    full = json.dumps(ours.json())
    assert full.count("cc -c src/module_") >= 3600  # the whole result is in the Agent's stored step


@pytest.mark.expect_log("session_context_overflow")
def test_parallel_tool_calls_with_one_huge_result_keep_each_call_with_its_result(langflow, fake_model):
    question = "Use read_build_log and read_build_owner at once: why did it fail and whose is it?"
    _, ours, requests = stock_fails_ours_answers(
        langflow, fake_model, question, f"From the tools: {HEAD} | {OWNER_HEAD}"
    )

    assert [r["status"] for r in requests] == [200, 400, 200]
    retried = requests[-1]["body"]["messages"]
    [calls] = [m["tool_calls"] for m in retried if m.get("tool_calls")]
    results = [m for m in retried if m.get("role") == "tool"]
    assert [c["id"] for c in calls] == [m["tool_call_id"] for m in results]
    assert results[1]["content"] == OWNER_HEAD  # the small result is not touched
    assert answer_step_facts(ours)["tool_results_clipped"] == 1


@pytest.mark.expect_log("session_context_overflow")
def test_a_refusal_on_the_third_model_call_is_retried_and_no_tool_runs_twice(langflow, fake_model):
    question = "First read_build_owner, then read_build_log: whose build failed and why?"
    _, _, requests = stock_fails_ours_answers(langflow, fake_model, question, f"From the tools: {OWNER_HEAD} | {HEAD}")

    assert [r["status"] for r in requests] == [200, 200, 400, 200]
    called = [c["function"]["name"] for m in requests[-1]["body"]["messages"] for c in m.get("tool_calls") or []]
    assert called == ["read_build_owner", "read_build_log"]


def test_a_llama_cpp_server_is_never_sent_a_call_it_would_answer_with_an_empty_stream(langflow, fake_model):
    # The stock Agent's 500 is "No generations found in stream": the server's empty stream on overflow.
    _, _, requests = stock_fails_ours_answers(
        langflow, fake_model, READ_LOG, f"From the tools: {HEAD}", declared=True, profile="llama-cpp-python"
    )

    assert len(requests) == 2
    assert all(r["prompt_tokens"] < WINDOW for r in requests)  # as llama.cpp counts them


@pytest.mark.expect_log("session_context_overflow")
def test_claude_s_prompt_is_too_long_after_a_tool_use_is_retried_in_the_same_turn(langflow, fake_model):
    _, _, requests = stock_fails_ours_answers(langflow, fake_model, READ_LOG, f"From the tools: {HEAD}", model=CLAUDE)

    assert [(r["api"], r["status"]) for r in requests] == [("anthropic", 200), ("anthropic", 400), ("anthropic", 200)]
