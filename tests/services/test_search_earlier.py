"""``search_earlier_messages`` on SQLite and PostgreSQL, with real rows in Langflow's message table."""

import time
import uuid
from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace

import pytest
from langchain_core.callbacks import AsyncCallbackHandler

from langflow_session_memory.components.session_memory.session_memory_agent import SessionMemoryAgentComponent
from langflow_session_memory.services.session_memory.agent import component_inputs, guard
from langflow_session_memory.services.session_memory.agent.run import Phase, Run, begin_run
from langflow_session_memory.services.session_memory.agent.search_tool import (
    SEARCH_UNAVAILABLE,
    TOOL_NAME,
    search_tool,
    with_search_tool,
)
from langflow_session_memory.services.session_memory.folding.background import BackgroundFolds
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from tests.agent_inputs import read_as
from tests.chat import START, chat_rows, store_rows

WINDOW = 10
SESSION_LENGTH = 40  # rows 0-29 lie before the window (rows 30-39, the last one the input)
FACT = "The vault code is ZEBRA-42, keep it safe."


def said(rows, index: int, text: str):
    """Row ``index`` of ``rows`` saying ``text`` instead of its filler."""
    rows[index].text = text
    return rows


async def seed(sessions, key, texts: dict[int, str] | None = None, count: int = SESSION_LENGTH) -> Turn:
    rows = chat_rows(key, count)
    for index, text in (texts or {}).items():
        said(rows, index, text)
    await store_rows(sessions, rows)
    return Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id)


async def search(sessions, turn, query: str):
    """The tool's matches where the full-text index is not filled yet: the newest messages holding the words."""
    matches, _words = await SessionMemoryService(sessions=sessions).retrieval.earlier(turn, query)
    return matches


async def test_a_fact_older_than_the_window_is_found_with_sender_and_time(sessions, key):
    turn = await seed(sessions, key, {3: FACT})

    [match] = await search(sessions, turn, "what was the vault code?")

    assert "ZEBRA-42" in match.excerpt
    assert (match.sender, match.sender_name) == ("Machine", "AI")
    assert match.timestamp.replace(tzinfo=START.tzinfo) == START + timedelta(seconds=3)


async def test_the_window_is_not_searched_and_its_oldest_message_is_its_edge(sessions, key):
    edge = SESSION_LENGTH - WINDOW
    turn = await seed(sessions, key, {edge: "kiwi inside the window", edge - 1: "kiwi just before the window"})

    matches = await search(sessions, turn, "kiwi")

    assert [match.excerpt for match in matches] == ["kiwi just before the window"]


async def test_an_answer_stored_while_the_turn_runs_does_not_move_the_window(sessions, key):
    edge = SESSION_LENGTH - WINDOW
    turn = await seed(sessions, key, {edge: "kiwi inside the window"})
    await store_rows(sessions, chat_rows(key, 1, first=SESSION_LENGTH))  # the Agent's partial answer, after the input

    assert await search(sessions, turn, "kiwi") == []


async def test_a_session_no_longer_than_the_window_has_nothing_older(sessions, key):
    turn = await seed(sessions, key, {0: FACT}, count=WINDOW)
    assert await search(sessions, turn, "vault") == []


async def test_another_sessions_flows_users_or_contexts_message_is_never_returned(sessions, key):
    keyed = replace(key, context_id="ctx-a")
    planted = {
        "session": replace(keyed, session_id="another session"),
        "flow": replace(keyed, flow_id=uuid.uuid4()),
        "owner": replace(keyed, owner_id=uuid.uuid4()),
        "context": replace(keyed, context_id="ctx-b"),
    }
    for name, other in planted.items():
        await store_rows(sessions, [said(chat_rows(other, 1), 0, f"kiwi planted in another {name}")[0]])
    error_row = said(chat_rows(keyed, 1, first=-1), 0, "kiwi in an error message")[0]
    error_row.error = True
    await store_rows(sessions, [error_row])
    turn = await seed(sessions, keyed, {5: "kiwi in this session"})

    matches = await search(sessions, turn, "kiwi")

    assert [match.excerpt for match in matches] == ["kiwi in this session"]


async def test_without_a_context_every_context_of_the_session_is_searched_as_in_the_history(sessions, key):
    await store_rows(sessions, [said(chat_rows(replace(key, context_id="ctx-b"), 1, first=-1), 0, "kiwi in ctx-b")[0]])
    turn = await seed(sessions, key)

    assert [match.excerpt for match in await search(sessions, turn, "kiwi")] == ["kiwi in ctx-b"]


async def test_at_most_five_best_first_and_newest_first_among_equals(sessions, key):
    turn = await seed(sessions, key, {**{i: f"kiwi number {i}" for i in range(10, 20)}, 2: "kiwi and mango, old"})

    matches = await search(sessions, turn, "kiwi mango")

    assert len(matches) == RETRIEVAL.tool_results
    assert [match.excerpt for match in matches] == ["kiwi and mango, old"] + [
        f"kiwi number {i}" for i in (19, 18, 17, 16)
    ]


async def test_a_long_message_is_clipped_around_the_keyword(sessions, key):
    long_text = "filler " * 700 + "the vault code is ZEBRA-42 " + "filler " * 700
    turn = await seed(sessions, key, {4: long_text})

    [match] = await search(sessions, turn, "ZEBRA-42")

    assert len(match.excerpt) <= RETRIEVAL.excerpt_characters
    assert "ZEBRA-42" in match.excerpt


async def test_wildcards_in_the_query_match_only_themselves(sessions, key):
    turn = await seed(sessions, key, {3: "see file_name, src/app, v2.1", 4: "see fileXname, srcXapp, v2x1"})

    for query in ("file_name", "src/app", "v2.1"):
        assert [m.excerpt for m in await search(sessions, turn, query)] == ["see file_name, src/app, v2.1"]


async def test_a_query_with_a_100000_character_word_answers_at_once_and_still_finds(sessions, key):
    """The model writes the query: one huge word took 70 s to fail on PostgreSQL, and SQLite refused it."""
    turn = await seed(sessions, key, {3: FACT, 5: "the build hash is " + "q" * 200})

    started = time.perf_counter()
    matches = await search(sessions, turn, "ZEBRA-42 " + "q" * 100_000)

    assert time.perf_counter() - started < 5  # well under a second when measured alone; generous for a loaded CI
    assert sorted(match.excerpt[:17] for match in matches) == ["The vault code is", "the build hash is"]


async def test_case_does_not_matter(sessions, key):
    turn = await seed(sessions, key, {3: FACT})
    assert len(await search(sessions, turn, "zebra-42 VAULT")) == 1


@pytest.fixture
def memory_turn_of(monkeypatch):
    """The Langflow side of the tool: the turn the history guard gives, and the service's sessions."""

    def use(turn: Turn, sessions):
        monkeypatch.setattr(guard, "read_inputs", read_as(turn.key))
        monkeypatch.setattr(guard, "memory_turn", lambda _inputs: turn)
        service = SessionMemoryService(sessions=sessions, background=BackgroundFolds())
        monkeypatch.setattr(guard, "get_session_memory_service", lambda: service)

    return use


def run_with(turn: Turn) -> Run:
    """A run whose history hook read ``turn``."""
    return Run(turn=turn, phase=Phase.HISTORY_READ)


async def test_the_tool_answers_the_model_with_the_matches(sessions, key, memory_turn_of):
    turn = await seed(sessions, key, {3: FACT})
    memory_turn_of(turn, sessions)
    tool = search_tool(run_with(turn))

    text = await tool.ainvoke({"query": "vault code"})

    assert tool.name == TOOL_NAME
    assert "ZEBRA-42" in text
    assert f"[{(START + timedelta(seconds=3)).isoformat()}] AI (Machine):" in text


async def test_a_failing_search_answers_unavailable_and_logs_no_text(key, memory_turn_of, captured_logs):
    def broken_database():
        raise ConnectionRefusedError("database at db.internal refused ZEBRA-42")

    turn = Turn(key=key, n_messages=WINDOW, input_message_id=None)
    memory_turn_of(turn, broken_database)

    text = await search_tool(run_with(turn)).ainvoke({"query": "vault ZEBRA-42"})

    assert text == SEARCH_UNAVAILABLE
    [failure] = [log for log in captured_logs if log["event"].startswith("session_memory_search_failed")]
    assert failure["event"] == "session_memory_search_failed reason=ConnectionRefusedError"
    assert not [log for log in captured_logs if "ZEBRA" in str(log)]


def history_read(agent, turn: Turn | None) -> None:
    """The agent's run as its history hook leaves it, with ``turn`` read."""
    run = begin_run(agent)
    run.turn = turn
    run.enter(Phase.HISTORY_READ)


class Agent(SimpleNamespace):
    """The parts of a running Agent the tool's guard reads: its switches, and its run's Turn once the history
    hook has read it (``turn``)."""

    def __init__(self, turn: Turn | None = None, **inputs):
        super().__init__(**inputs)
        history_read(self, turn)

    def set_tools_callbacks(self, tools, callbacks):
        self.callbacks_set_on = [tool.name for tool in tools]


@pytest.fixture
def memory_applies(key):
    return Turn(key, WINDOW, None)


@pytest.mark.parametrize(
    ("inputs", "offered"),
    [
        ({"summarize_older_messages": True}, True),
        ({"summarize_older_messages": True, "search_older_messages": "true"}, True),
        ({"summarize_older_messages": True, "search_older_messages": False}, False),
        ({"summarize_older_messages": False, "search_older_messages": True}, False),
        ({}, False),
    ],
)
async def test_the_tool_is_offered_only_with_both_switches_on(memory_applies, inputs, offered):
    stock = [SimpleNamespace(name="lookup")]
    tools = await with_search_tool(Agent(memory_applies, **inputs), stock)
    assert [tool.name for tool in tools] == (["lookup", TOOL_NAME] if offered else ["lookup"])


async def test_the_tool_is_not_offered_where_memory_does_not_apply():
    assert await with_search_tool(Agent(None, summarize_older_messages=True), None) is None


async def test_a_connected_tool_of_the_same_name_wins(memory_applies):
    connected = [SimpleNamespace(name=TOOL_NAME)]
    assert await with_search_tool(Agent(memory_applies, summarize_older_messages=True), connected) is connected


async def test_an_answer_stored_with_the_inputs_timestamp_does_not_move_the_window(sessions, key):
    """Langflow sets timestamps in Python: the Agent's answer can tie with the input it answers."""
    edge = SESSION_LENGTH - WINDOW
    rows = chat_rows(key, SESSION_LENGTH)
    said(rows, edge, "kiwi inside the window")
    said(rows, edge - 1, "kiwi just before the window")
    rows[-1].id = uuid.UUID(int=1)  # the input; the answer below sorts after it: same time, larger id
    answer = chat_rows(key, 1, first=SESSION_LENGTH)[0]
    answer.id, answer.timestamp = uuid.UUID(int=2), rows[-1].timestamp
    await store_rows(sessions, [*rows, answer])
    turn = Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id)

    assert [match.excerpt for match in await search(sessions, turn, "kiwi")] == ["kiwi just before the window"]


class Tracing(AsyncCallbackHandler):
    """What Langflow's tracing hands the Agent: it must see the tool's run under the Agent's."""

    def __init__(self):
        self.tool_runs = []

    async def on_tool_start(self, serialized, input_str, **kwargs):
        self.tool_runs.append(serialized["name"])


async def test_the_tool_runs_with_the_agents_tracing_callbacks(sessions, key, memory_turn_of):
    tracing = Tracing()
    agent = SessionMemoryAgentComponent.__new__(SessionMemoryAgentComponent)  # as Langflow's own Agent tests build one
    agent.summarize_older_messages, agent.shared_callbacks = True, [tracing]
    turn = replace(await seed(sessions, key, {3: FACT}), tracing=tuple(component_inputs.tracing_callbacks(agent)))
    memory_turn_of(turn, sessions)
    history_read(agent, turn)

    [tool] = await with_search_tool(agent, [])
    answer = await tool.ainvoke({"query": "vault code"})

    assert "ZEBRA-42" in answer
    assert tracing.tool_runs == [TOOL_NAME]
