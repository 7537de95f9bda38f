"""The Agent's ``search_earlier_messages`` tool through the real Langflow app, against the bundled model server.

The model server calls the tool when a recall question's answer is not in its request, and
answers from the tool's result (see ``fake_openai``), so what reaches the model is observable.
"""

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from langflow_session_memory.services.session_memory.agent.playground import STEP_NAME
from langflow_session_memory.services.session_memory.agent.search_tool import TOOL_DESCRIPTION, TOOL_NAME
from tests.app.langflow_client import MESSAGE, insert_state_row, message_row
from tests.app.test_session_memory_agent import chat_requests, talk

N_MESSAGES = 2
LOCKER_FACT = (
    "Team {team} keeps its locker code in the blue binder on the third shelf near the loading dock behind the old "
    "printer, next to the spare keys and the visitor badges, and the code written there is VAULT-{team}."
)
# Said without a question mark or a question word first (``rules.recall.asks``): a question's words would quote
# the fact from the full-text index without any tool call (tests/app/test_search_index.py); these test the tool.
QUESTION = "The locker code of team 10, what was it"
ASKED = "What is the locker code of team 10?"
ANSWER = "From our conversation: VAULT-10"


def switched_on(agent_id: str, **inputs) -> dict:
    return {agent_id: {"summarize_older_messages": True, **inputs}}


def answer_text(response) -> str:
    return response.json()["outputs"][0]["outputs"][0]["results"]["message"]["text"]


def tool_steps(blocks) -> list[dict]:
    """The tool calls among an Agent message's steps, at the top or inside a group, in order."""
    found = []
    for block in blocks or []:
        if block.get("type") == "tool_use":
            found.append(block)
        found += tool_steps(block.get("contents"))
    return found


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


def test_the_catalogue_shows_search_older_messages_as_an_advanced_input_on_by_default(langflow):
    search = langflow.catalogue_entry("SessionMemoryAgent")["template"]["search_older_messages"]
    assert search["display_name"] == "Search Older Messages"
    assert (search["advanced"], search["value"]) == (True, True)


def test_a_fact_the_summary_dropped_is_found_by_the_tool_and_reaches_the_model(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    session_id = f"recall-{uuid.uuid4()}"
    on = switched_on(agent_id)
    for team in range(1, 11):  # turns 1-10: messages 1-20, folded by turn 12
        langflow.run(flow_id, LOCKER_FACT.format(team=team), session_id=session_id, tweaks=on)
    talk(langflow, flow_id, session_id, 2, tweaks=on)
    [(summary,)] = langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=session_id)
    kept = re.findall(r"VAULT-\d+", summary)
    assert "VAULT-1" in kept
    assert "VAULT-10" not in kept  # the 300-word cap left the last teams out of the summary

    before = len(fake_model.requests())
    response = langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=on)

    asked, answered = chat_requests(fake_model, before)
    assert "VAULT-10" not in json.dumps(asked["body"]["messages"])
    assert asked["tool_query"] == "locker code team 10"
    [result] = tool_results(answered)
    assert "VAULT-10" in result
    assert answer_text(response) == ANSWER
    stored = langflow.sql(
        "SELECT sender, content_blocks FROM message WHERE session_id = :s ORDER BY timestamp", s=session_id
    )
    assert len(stored) == 2 * 13  # each turn stores the question and the answer; the search result is no message
    sender, blocks = stored[-1]
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    assert sender == "Machine"
    assert [step["name"] for step in tool_steps(blocks)] == [STEP_NAME, TOOL_NAME]  # shown like any tool


def store_messages(langflow, rows: list[tuple]) -> list[dict]:
    """Messages as Langflow stores them: ``(flow_id, owner_id, session_id, sender, text, minutes_ago)``."""
    now = datetime.now(UTC)
    stored = [
        message_row(
            flow_id=flow_id,
            owner_id=owner_id,
            session_id=session_id,
            timestamp=now - timedelta(minutes=minutes_ago),
            sender=sender,
            text_=text_,
        )
        for flow_id, owner_id, session_id, sender, text_, minutes_ago in rows
    ]
    with langflow.engine.begin() as connection:
        connection.execute(insert(MESSAGE), stored)
    return stored


def scoped_session(langflow, summary: str) -> tuple[str, str, str]:
    """A session whose locker fact is folded, with the same fact under another value stored newer in another
    session, another flow and for another user; ``summary`` is the session's summary. Its flow, Agent and id."""
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    session_id = f"scoped-{uuid.uuid4()}"
    owner = langflow.user_id
    planted = LOCKER_FACT.format(team=10).replace("VAULT-10", "VAULT-666")
    folded = store_messages(
        langflow,
        [
            (flow_id, owner, session_id, "User", LOCKER_FACT.format(team=10), 30),
            (flow_id, owner, session_id, "Machine", "OK: noted.", 29),
            (flow_id, owner, session_id, "User", "Filler: the weather is fine.", 28),
        ],
    )
    store_messages(
        langflow,
        [
            (flow_id, owner, session_id, "Machine", "OK: noted.", 27),
            # Newer than this session's fact, so a search that leaked would answer with them.
            (flow_id, owner, f"another-{session_id}", "User", planted, 5),
            (uuid.uuid4(), owner, session_id, "User", planted, 5),
            (flow_id, uuid.uuid4(), session_id, "User", planted, 5),
        ],
    )
    with langflow.engine.begin() as connection:  # the fact is folded, and the summary does not hold its value
        insert_state_row(
            connection,
            flow_id=flow_id,
            owner_id=owner,
            session_id=session_id,
            summary=summary,
            cursor=(folded[-1]["timestamp"], folded[-1]["id"]),
            folded_count=len(folded),
        )
    return flow_id, agent_id, session_id


def test_the_tool_never_returns_another_sessions_flows_or_users_message(langflow, fake_model):
    # A request quotes no older message (it does not ask), so the model searches.
    summary = "Key facts:\n- The locker code of team 10 was agreed.\nConversation so far:\n- The weather."
    flow_id, agent_id, session_id = scoped_session(langflow, summary)

    before = len(fake_model.requests())
    response = langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=switched_on(agent_id))

    asked, answered = chat_requests(fake_model, before)
    assert "VAULT-10" not in json.dumps(asked["body"]["messages"])
    [result] = tool_results(answered)
    assert "VAULT-10" in result
    assert "VAULT-666" not in result
    assert answer_text(response) == ANSWER


def test_older_messages_quoted_without_a_tool_call_are_the_session_s_own(langflow, fake_model):
    summary = "Key facts:\n- The weather is fine.\nConversation so far:\n- The user talked about the weather."
    flow_id, agent_id, session_id = scoped_session(langflow, summary)

    before = len(fake_model.requests())
    response = langflow.run(flow_id, ASKED, session_id=session_id, tweaks=switched_on(agent_id))

    [asked] = chat_requests(fake_model, before)  # answered from the quoted message: no tool call
    sent = json.dumps(asked["body"]["messages"])
    assert "VAULT-10" in sent
    assert "VAULT-666" not in sent
    assert answer_text(response) == ANSWER


def test_the_tool_is_offered_only_with_the_switch_and_search_on_and_adds_only_its_description(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    runs = {
        "stock Agent": (stock_flow, {}),
        "switch off": (flow_id, {}),
        "search off": (flow_id, switched_on(agent_id, search_older_messages=False)),
        "search on": (flow_id, switched_on(agent_id)),
    }
    bodies = {}
    for name, (flow, tweaks) in runs.items():
        before = len(fake_model.requests())
        langflow.run(flow, "Hello there, a short note.", session_id=f"tools-{uuid.uuid4()}", tweaks=tweaks)
        [request] = chat_requests(fake_model, before)
        bodies[name] = request["body"]

    assert [bodies[name].get("tools") for name in ("stock Agent", "switch off", "search off")] == [None] * 3
    [tool] = bodies["search on"]["tools"]
    assert tool["function"]["name"] == TOOL_NAME
    assert tool["function"]["description"] == TOOL_DESCRIPTION
    assert list(tool["function"]["parameters"]["properties"]) == ["query"]
    assert {key: value for key, value in bodies["search on"].items() if key != "tools"} == bodies["search off"]
