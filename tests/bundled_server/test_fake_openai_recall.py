"""The fake server answers a targeted recall question with the right fact, and searches when the request lacks it."""

import json

import httpx
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from langflow_session_memory.bundled_server.fake_openai import (
    SEARCH_TOOL,
    Reply,
    chat_reply,
    key_words,
    run_in_thread,
    tool_result_texts,
)

SEARCH = {
    "type": "function",
    "function": {
        "name": SEARCH_TOOL,
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
OLD = {"role": "user", "content": "The badge code of team 17 is LYNX-17."}
OTHER = {"role": "user", "content": "The badge code of team 4 is HERON-4."}
UPDATE = {"role": "user", "content": "Change: team 17 has a new badge code, OTTER-17."}
QUESTION = {"role": "user", "content": "What is the badge code of team 17?"}
SEARCH_RESULT = "\n".join(
    [
        "3 earlier message(s) of this conversation, best match first:",
        "- [2026-11-30T21:05:00+00:00] AI (Machine): OK: Change: team 17 has a new badge code, OTTER-17.",
        "- [2026-11-30T21:00:00+00:00] User (User): The badge code of team 17 is LYNX-17.",
        "- [2026-11-30T21:06:00+00:00] User (User): Step 17: the nightly export job.",
    ]
)


def after_search(result: str) -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": "{}"}}
    return [QUESTION, {"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "content": result}]


def test_key_words_drop_question_and_stop_words():
    assert key_words("What is the badge code of team 17?") == ["badge", "code", "team", "17"]
    assert key_words("Which cluster and project were we on?") == ["cluster", "project"]


def test_targeted_question_gets_only_the_matching_sentences_facts():
    assert chat_reply([OLD, OTHER, QUESTION]) == Reply("From our conversation: LYNX-17")


def test_newest_matching_sentence_wins_so_an_update_replaces_the_old_value():
    assert chat_reply([OLD, UPDATE, QUESTION]) == Reply("From our conversation: OTTER-17")


def test_question_no_sentence_shares_a_word_with_is_not_answered_with_other_facts():
    question = {"role": "user", "content": "Which project and cluster were we using?"}
    assert chat_reply([OLD, OTHER, question]) == Reply("I don't know.")


def test_question_sharing_some_words_gets_the_closest_sentences_facts():
    question = {"role": "user", "content": "Which heron badge?"}
    assert chat_reply([OLD, OTHER, question]) == Reply("From our conversation: HERON-4")


def test_the_time_a_quoted_line_was_said_is_no_word_a_question_shares():
    quoted = {
        "role": "user",
        "content": "Older messages of this conversation:\n"
        "- [2026-12-07 02:25] User: The owner of site 16 is GW-1007.\n"
        "- [2026-12-07 01:10] User: Service 25 belongs to MARGOT.",
    }
    question = {"role": "user", "content": "What is the owner of service 25?"}
    assert chat_reply([quoted, question]) == Reply("From our conversation: MARGOT")


def test_a_question_the_words_find_is_answered_by_the_reply_after_it():
    asked = {"role": "user", "content": "Did you pick a supplier for the gearbox parts yet?"}
    replied = {"role": "assistant", "content": "Yes, SUP-7731, the small workshop in Porto."}
    earlier = {"role": "user", "content": "Which supplier makes our gearbox parts?"}
    question = {"role": "user", "content": "Which supplier makes our gearbox parts?"}
    assert chat_reply([asked, replied, earlier, question]) == Reply("From our conversation: SUP-7731")
    assert chat_reply([asked, earlier, question]) == Reply("I don't know.")


NATURAL_CHAT = [
    {"role": "system", "content": "You are a helpful AI assistant. Answer briefly."},
    {"role": "user", "content": "Our code name is Bluebird, and Dana leads the rollout."},
    {"role": "assistant", "content": "OK: Our code name is Bluebird, and Dana leads"},
    {"role": "user", "content": "The deadline is March 3."},
    {"role": "assistant", "content": "From our conversation: AI"},
]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What's the capital of Australia?", "I don't know."),
        ("What was our code name?", "From our conversation: Our code name is Bluebird, and Dana leads the rollout."),
        ("When is the deadline?", "From our conversation: The deadline is March 3."),
    ],
)
def test_a_natural_chat_is_answered_from_what_was_said_never_from_the_system_prompt_or_an_earlier_answer(
    question, answer
):
    assert chat_reply([*NATURAL_CHAT, {"role": "user", "content": question}]) == Reply(answer)


def test_missing_answer_with_the_search_tool_offered_is_a_search_for_the_key_words():
    assert chat_reply([OTHER, QUESTION], [SEARCH]) == Reply(tool_query="badge code team 17")


def test_other_tools_do_not_trigger_a_search():
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    assert chat_reply([OTHER, QUESTION], [lookup]) == Reply("From our conversation: HERON-4")


def test_answer_in_the_request_needs_no_search():
    assert chat_reply([OLD, QUESTION], [SEARCH]) == Reply("From our conversation: LYNX-17")


def test_tool_result_is_read_newest_first_by_its_times_without_the_sender():
    assert tool_result_texts(SEARCH_RESULT)[-2:] == [
        "OK: Change: team 17 has a new badge code, OTTER-17.",
        "Step 17: the nightly export job.",
    ]
    assert chat_reply(after_search(SEARCH_RESULT), [SEARCH]) == Reply("From our conversation: OTTER-17")


def test_failed_search_is_not_repeated():
    reply = chat_reply(after_search("No earlier messages of this conversation contain any of: badge."), [SEARCH])
    assert reply == Reply("I don't know.")


@pytest.fixture
def server():
    with run_in_thread() as running:
        yield running


def test_tool_call_over_http_without_streaming(server):
    body = {"model": "gpt-4o-mini", "messages": [QUESTION], "tools": [SEARCH]}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10).json()
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == SEARCH_TOOL
    assert json.loads(call["function"]["arguments"]) == {"query": "badge code team 17"}
    assert server.requests()[0]["tool_query"] == "badge code team 17"


def test_tool_call_over_http_streamed(server):
    body = {"model": "gpt-4o-mini", "messages": [QUESTION], "tools": [SEARCH], "stream": True}
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=10) as response:
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    chunks = [json.loads(e)["choices"][0] for e in events[:-1]]
    calls = [part for c in chunks for part in c["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == SEARCH_TOOL
    assert json.loads("".join(part["function"]["arguments"] for part in calls)) == {"query": "badge code team 17"}
    assert chunks[-1]["finish_reason"] == "tool_calls"


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
async def test_langchain_tool_loop_ends_with_the_searched_fact(server, streaming):
    @tool(SEARCH_TOOL)
    def search(query: str) -> str:
        """Search earlier messages."""
        return SEARCH_RESULT

    model = ChatOpenAI(base_url=server.base_url, api_key="x", model="gpt-4o-mini", streaming=streaming)
    model = model.bind_tools([search])
    question = HumanMessage(QUESTION["content"])
    call = await model.ainvoke([question])
    assert call.tool_calls[0]["args"] == {"query": "badge code team 17"}
    result = ToolMessage(search.invoke(call.tool_calls[0]["args"]), tool_call_id=call.tool_calls[0]["id"])
    answer = await model.ainvoke([question, call, result])
    assert answer.content == "From our conversation: OTTER-17"
