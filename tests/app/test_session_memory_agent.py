"""The Session Memory Agent through the real Langflow app and its /api/v1 endpoints."""

import importlib.util
import json
import uuid
from pathlib import Path
from types import SimpleNamespace

from lfx.components.models_and_agents.agent import AgentComponent

import langflow_session_memory
from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.agent.playground import (
    STEP_NAME,
    WAITING_FOR_FOLDS,
    step_facts,
    step_text,
)
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_FRAME
from langflow_session_memory.services.session_memory.settings import WAIT_FOR_FOLDS_VARIABLE
from tests.app.langflow_client import BACKLOG_SESSION_TURNS, BATCH, FOLDED_SESSION_TURNS, slow_folds, turns_to_fold

FACT = "Our project is PRJ-123 on the EU cluster."
QUESTION = "Which cluster and project were we on?"
SUMMARY_PREFIX = SUMMARY_FRAME.split("{summary}")[0].strip()
COMPONENT_FILE = Path(langflow_session_memory.__file__).parent / "components/session_memory/session_memory_agent.py"


def chat_requests(fake_model, since: int = 0) -> list[dict]:
    return [r for r in fake_model.requests()[since:] if r["kind"] == "chat"]


def summary_requests(fake_model, since: int = 0) -> list[dict]:
    return [r for r in fake_model.requests()[since:] if r["kind"] == "summary"]


def contents(request: dict) -> list[tuple[str, str]]:
    return [
        (m["role"], m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
        for m in request["body"]["messages"]
    ]


def talk(langflow, flow_id, session_id, turns: int, tweaks=None):
    for i in range(turns):
        langflow.run(flow_id, f"Filler turn {i}, tell me something small.", session_id=session_id, tweaks=tweaks)


def test_langflow_starts_on_a_database_that_carries_our_table(langflow):
    assert langflow.http.get("/health").status_code == 200
    assert langflow.sql("SELECT version_num FROM alembic_version_session_memory") == [(runner.head_revision(),)]
    assert len(langflow.sql("SELECT version_num FROM alembic_version")) == 1
    assert langflow.sql("SELECT count(*) FROM session_memory_state WHERE session_id = :s", s="none") == [(0,)]
    assert langflow.rows_after_start == 0  # a start writes no state row


def test_catalogue_shows_the_switch_off_and_n_on_the_node(langflow):
    entry = langflow.catalogue_entry("SessionMemoryAgent")
    switch = entry["template"]["summarize_older_messages"]
    assert switch["display_name"] == "Summarize Older Messages"
    assert (switch["advanced"], switch["value"]) == (False, False)
    assert entry["template"]["n_messages"]["advanced"] is False
    assert "summar" in entry["description"].lower()
    stock = langflow.catalogue_entry("Agent")
    assert stock["template"]["n_messages"]["advanced"] is True  # the stock Agent is not changed
    assert "context_id" in entry["template"]


def test_switch_on_carries_the_first_facts_that_the_stock_window_drops(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    session_id = f"session-{uuid.uuid4()}"
    langflow.run(flow_id, FACT, session_id=session_id)
    talk(langflow, flow_id, session_id, turns_to_fold(2) - 1)  # 10 at the default

    before = len(fake_model.requests())
    langflow.run(flow_id, QUESTION, session_id=session_id)
    off_request = chat_requests(fake_model, before)[-1]
    assert not any("PRJ-123" in content for _, content in contents(off_request))
    assert summary_requests(fake_model, before) == []

    before = len(fake_model.requests())
    response = langflow.run(
        flow_id, QUESTION, session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}}, stream=True
    )
    # A batch and one older than the window (21 at the default): sent raw (at most two batches), then folded after
    # the answer.
    assert [r["kind"] for r in fake_model.requests()[before:]] == ["chat", "summary"]
    on_request = chat_requests(fake_model, before)[-1]
    system, (role, first), *_ = contents(on_request)
    assert system[0] == "system"
    assert (role, first) == ("user", FACT)
    events = [json.loads(chunk) for chunk in response.text.split("\n\n") if chunk.strip()]
    chat_events = [event for event in events if event["event"] != "log"]  # "log" is the Agent's own prompt trace
    assert {"add_message", "end"} <= {event["event"] for event in chat_events}
    for event in chat_events:  # the summary appears only as the "Session memory" step's output, never as chat text
        assert "Key facts" not in json.dumps(without_step_outputs(event))

    [(version, folded_count)] = langflow.sql(
        "SELECT version, folded_count FROM session_memory_state WHERE session_id = :s", s=session_id
    )
    assert version >= 1
    assert folded_count == BATCH
    assert langflow.sql("SELECT count(*) FROM message WHERE text LIKE '%Key facts%'") == [(0,)]
    assert any("session_summary_fold latency_ms=" in line and session_id in line for line in langflow.log_lines())

    before = len(fake_model.requests())
    langflow.run(
        flow_id, "One more small thing.", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}}
    )
    assert summary_requests(fake_model, before) == []
    first = chat_requests(fake_model, before)[-1]["body"]["messages"][1]["content"]
    assert first.startswith(SUMMARY_PREFIX)
    assert "PRJ-123" in first
    assert "EU" in first


def memory_steps(blocks) -> list[dict]:
    """The "Session memory" steps in a message's content blocks, at the top or inside a group."""
    found = []
    for block in blocks or []:
        if block.get("type") == "tool_use" and block.get("name") == STEP_NAME:
            found.append(block)
        found += memory_steps(block.get("contents"))
    return found


def without_step_outputs(payload):
    """``payload`` with every "Session memory" step's output blanked, wherever it sits."""
    if isinstance(payload, list):
        return [without_step_outputs(item) for item in payload]
    if not isinstance(payload, dict):
        return payload
    if payload.get("type") == "tool_use" and payload.get("name") == STEP_NAME:
        return {**payload, "output": None}
    return {name: without_step_outputs(value) for name, value in payload.items()}


def switch_on_in_flow(langflow, flow_id: str, agent_id: str) -> None:
    """Turn the switch on in the saved flow, as a builder does on the node (the Playground sends no tweaks)."""
    flow = langflow.http.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
    node = next(n for n in flow["data"]["nodes"] if n["id"] == agent_id)
    node["data"]["node"]["template"]["summarize_older_messages"]["value"] = True
    langflow.http.patch(f"/api/v1/flows/{flow_id}", json={"data": flow["data"]}).raise_for_status()


def playground_turn(langflow, flow_id: str, text_: str, session_id: str) -> list[dict]:
    """One turn as the Playground runs it: build the flow, then read the job's events."""
    body = {"inputs": {"input_value": text_, "session": session_id}}
    job = langflow.http.post(f"/api/v1/build/{flow_id}/flow", json=body).raise_for_status().json()
    events = langflow.http.get(f"/api/v1/build/{job['job_id']}/events").raise_for_status()
    langflow.settle_folds()
    return [json.loads(line) for line in events.text.splitlines() if line.strip()]


def test_the_playground_shows_a_session_memory_step_and_no_stored_row_keeps_the_summary(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    switch_on_in_flow(langflow, flow_id, agent_id)
    session_id = f"step-{uuid.uuid4()}"
    langflow.run(flow_id, FACT, session_id=session_id)
    talk(langflow, flow_id, session_id, turns_to_fold(2) - 1)  # the first batch folds after the last of them

    events = playground_turn(langflow, flow_id, QUESTION, session_id)

    steps = [
        step for e in events if e.get("event") == "add_message" for step in memory_steps(e["data"]["content_blocks"])
    ]
    assert any("PRJ-123" in (step_text(step) or "") for step in steps)  # the summary, while the answer is written
    final = steps[-1]
    assert final["tool_input"] == {}  # Langflow would show them as the step's "Arguments"
    assert step_facts(final)["earlier_messages_summarized"] == BATCH
    assert step_facts(final)["folded_this_turn"] == 0  # folded after the previous answer
    summary_page = f"/api/v1/session_memory/{flow_id}/summary?session_id={session_id}"
    assert step_facts(final)["summary_page"] == summary_page
    link = f"The summary is not stored with the answer: [read it][1] (with your Langflow login).\n\n[1]: {summary_page}"
    said, _ = step_text(final).split(link)  # what the turn did, then a link the Playground opens
    assert said.startswith(f"The summary covers the first **{BATCH}** messages of this session.")
    assert "PRJ-123" not in said

    stored = langflow.sql(
        "SELECT text, content_blocks FROM message WHERE session_id = :s AND sender = 'Machine' ORDER BY timestamp",
        s=session_id,
    )
    blocks = [json.loads(b) if isinstance(b, str) else b for _, b in stored]
    assert memory_steps(blocks[-1])  # the step is stored, with counts only
    assert all(step_text(step).endswith(link) for b in blocks for step in memory_steps(b))
    assert not any("Key facts" in json.dumps(b) for b in blocks)
    assert not any("Key facts" in text for text, _ in stored)

    response = langflow.run(flow_id, "One more thing.", session_id=session_id).json()
    answer = response["outputs"][0]["outputs"][0]["results"]["message"]
    [step] = memory_steps(answer["content_blocks"])  # the API's answer carries the step too, without the summary
    assert step_text(step).endswith(link)
    assert "Key facts" not in step_text(step)


def load_component_class():
    """The class as Langflow loads a bundle file: by path, under a synthetic module name."""
    spec = importlib.util.spec_from_file_location("_lfx_ext_test.session_memory_agent", COMPONENT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SessionMemoryAgentComponent


def test_an_agent_built_without_init_reads_the_stock_history_and_never_tries_memory(langflow):
    """Built as Langflow's own Agent tests build one (no ``__init__``: the switch never set), on a folded session."""
    session_id = f"bare-{uuid.uuid4()}"
    flow_id, _ = langflow.seeded_folded_session(session_id)  # 24 messages, the first 20 summarized, at the default
    graph = SimpleNamespace(session_id=session_id, flow_id=flow_id, user_id=str(langflow.user_id), end_user_id=None)

    def bare(cls):
        agent = cls.__new__(cls)
        agent.n_messages, agent.context_id, agent.input_value = 5, "", "hello"
        agent._vertex = SimpleNamespace(graph=graph)
        return agent

    log_start = len(langflow.log_lines())
    ours = langflow.on_app_loop(bare(load_component_class()).get_memory_data)
    stock = langflow.on_app_loop(bare(AgentComponent).get_memory_data)

    last = FOLDED_SESSION_TURNS - 1
    assert [m.text for m in stock][-2:] == [
        f"Turn {last}: note code CODE-{last}.",
        f"OK: Turn {last}: note code CODE-{last}.",
    ]
    assert [(m.sender, m.text) for m in ours] == [(m.sender, m.text) for m in stock]
    assert len(ours) == 5
    logged = langflow.log_lines()[log_start:]
    assert [line for line in logged if "session_memory_" in line or "session_summary_" in line] == []  # not even tried


def test_switch_off_sends_exactly_the_stock_agents_requests(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=3)
    memory_flow, _ = langflow.create_agent_flow(session_memory=True, n_messages=3)
    bodies = {}
    for flow_id in (stock_flow, memory_flow):
        before = len(fake_model.requests())
        langflow.run(flow_id, FACT, session_id="same session")
        talk(langflow, flow_id, "same session", 4)
        langflow.run(flow_id, QUESTION, session_id="same session")
        bodies[flow_id] = [request["body"] for request in fake_model.requests()[before:]]
    assert len(bodies[stock_flow]) == 6
    assert bodies[memory_flow] == bodies[stock_flow]


def test_a_background_folds_tokens_are_added_to_the_next_turns_stored_usage(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    session_id = f"usage-{uuid.uuid4()}"
    on = {agent_id: {"summarize_older_messages": True}}
    talk(langflow, flow_id, session_id, turns_to_fold(2) - 1, tweaks=on)
    before = len(fake_model.requests())
    langflow.run(flow_id, f"The turn after which {BATCH} older messages wait.", session_id=session_id, tweaks=on)
    [fold] = summary_requests(fake_model, before)

    before = len(fake_model.requests())
    langflow.run(flow_id, "And the next thing.", session_id=session_id, tweaks=on)
    turn_requests = [fold, *fake_model.requests()[before:]]
    assert [r["kind"] for r in turn_requests] == ["summary", "chat"]

    [(properties,)] = langflow.sql(
        "SELECT properties FROM message WHERE session_id = :s AND sender = 'Machine' ORDER BY timestamp DESC LIMIT 1",
        s=session_id,
    )
    usage = (json.loads(properties) if isinstance(properties, str) else properties)["usage"]
    assert usage["input_tokens"] == sum(r["prompt_tokens"] for r in turn_requests)
    assert usage["output_tokens"] == sum(r["completion_tokens"] for r in turn_requests)


def test_fifty_turns_against_a_strict_alternation_model_never_get_a_400(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=4)
    session_id = f"strict-{uuid.uuid4()}"
    fake_model.config.strict_alternation = True
    try:
        before = len(fake_model.requests())
        langflow.run(flow_id, FACT, session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}})
        talk(langflow, flow_id, session_id, 49, tweaks={agent_id: {"summarize_older_messages": True}})
        statuses = [r["status"] for r in fake_model.requests()[before:]]
    finally:
        fake_model.config.strict_alternation = False
    # Every full batch older than the window folds: 50 turns at N=4 leave 96 messages older (4 batches at the default).
    assert len(summary_requests(fake_model, before)) >= (2 * 50 - 4) // BATCH
    assert set(statuses) == {200}


def test_switch_on_builds_the_agents_model_once_a_turn(langflow, monkeypatch):
    """lfx builds the Agent's model twice a run (to read the history, then to build the agent); each build of an
    OpenAI model opens two HTTP clients that load the system's certificates. With the switch on the second build
    is answered with the first model, so Langflow's own ``_get_llm`` runs once a turn."""
    builds = []
    langflow_build = AgentComponent._get_llm

    def counted(component):
        builds.append(type(component).__name__)
        return langflow_build(component)

    monkeypatch.setattr(AgentComponent, "_get_llm", counted)
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    session_id = f"builds-{uuid.uuid4()}"
    for switch in (False, True):
        langflow.run(flow_id, FACT, session_id=session_id, tweaks={agent_id: {"summarize_older_messages": switch}})
    assert builds == ["SessionMemoryAgentComponent"] * 3  # two with the switch off, as the stock Agent; one on


def build_events(langflow, flow_id: str, text_: str, session_id: str) -> list[dict]:
    """One Playground turn's events, leaving the fold it starts after its answer running."""
    body = {"inputs": {"input_value": text_, "session": session_id}}
    job = langflow.http.post(f"/api/v1/build/{flow_id}/flow", json=body).raise_for_status().json()
    events = langflow.http.get(f"/api/v1/build/{job['job_id']}/events").raise_for_status()
    return [json.loads(line) for line in events.text.splitlines() if line.strip()]


def waiting_messages(events: list[dict]) -> list[tuple[int, dict]]:
    """The messages shown with the waiting step, with their place among the events."""
    return [
        (place, e["data"])
        for place, e in enumerate(events)
        if e.get("event") == "add_message"
        and any(step_text(step) == WAITING_FOR_FOLDS for step in memory_steps(e["data"].get("content_blocks")))
    ]


WAITED_FOLD_SECONDS = 6.0  # long enough that the next turn is sent while the fold runs


def test_a_turn_that_waits_for_a_fold_on_its_server_shows_a_waiting_step_until_its_answer(
    langflow, fake_model, monkeypatch
):
    """Issue 54 item 8: on a one-slot local server a turn waits for the fold still running there, and the
    Playground showed only "..." meanwhile. Now the Agent's message in progress says older messages are being
    summarized, and the answer's message takes its place; nothing of it is stored."""
    monkeypatch.setenv(WAIT_FOR_FOLDS_VARIABLE, "self-hosted")  # the default: the server plays a local llama.cpp
    session_id = f"waits-{uuid.uuid4()}"
    flow_id, agent_id = langflow.seeded_folded_session(session_id, turns=BACKLOG_SESSION_TURNS)
    switch_on_in_flow(langflow, flow_id, agent_id)
    before = len(fake_model.requests())
    with slow_folds(fake_model, WAITED_FOLD_SECONDS):
        first = build_events(langflow, flow_id, "One more turn.", session_id)  # a batch folds after its answer
        langflow.wait_for_fold_claim(session_id)
        events = build_events(langflow, flow_id, QUESTION, session_id)
        langflow.settle_folds()

    assert waiting_messages(first) == []  # no fold ran on the server: no wait, no step
    [(shown_at, shown)] = waiting_messages(events)
    assert (shown["sender"], shown["properties"]["state"]) == ("Machine", "partial")
    assert (shown["session_id"], str(shown["flow_id"])) == (session_id, flow_id)  # where the Playground files it
    [(removed_at, removed)] = [(place, e["data"]) for place, e in enumerate(events) if e["event"] == "remove_message"]
    assert removed == {"id": shown["id"], "session_id": session_id, "flow_id": flow_id}
    answer = [
        (place, e["data"])
        for place, e in enumerate(events)
        if e["event"] == "add_message" and e["data"]["sender"] == "Machine" and e["data"]["id"] != shown["id"]
    ]
    assert shown_at < removed_at < answer[0][0]
    assert [r["status"] for r in summary_requests(fake_model, before)] == [200]  # the fold landed
    assert any("session_summary_fold_waited" in line for line in langflow.log_lines())
    [step] = memory_steps(answer[-1][1]["content_blocks"])  # the usual step in its place
    assert step_facts(step)["earlier_messages_summarized"] == 2 * BATCH  # the summary the fold wrote

    stored = langflow.sql("SELECT sender, text, content_blocks FROM message WHERE session_id = :s", s=session_id)
    assert sum(sender == "Machine" for sender, _, _ in stored) == BACKLOG_SESSION_TURNS + 2  # one answer a turn
    assert not any(WAITING_FOR_FOLDS in f"{text_} {blocks}" for _, text_, blocks in stored)
