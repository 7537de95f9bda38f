"""The Langflow adapter's own rules: what a context-length refusal may retry, and reading the switch."""

import asyncio
from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage
from lfx.schema.message import Message
from lfx.schema.properties import Properties, Usage
from sqlalchemy.exc import OperationalError

from langflow_session_memory.services.session_memory.agent import component_hooks, component_inputs, guard
from langflow_session_memory.services.session_memory.agent.component_hooks import (
    agent_model,
    finish_turn,
    history_with_memory,
    run_with_context_recovery,
)
from langflow_session_memory.services.session_memory.agent.component_inputs import memory_switched_on
from langflow_session_memory.services.session_memory.agent.guard import begin_turn
from langflow_session_memory.services.session_memory.agent.playground import memory_step, step_facts
from langflow_session_memory.services.session_memory.agent.request_size import request_tokens
from langflow_session_memory.services.session_memory.agent.run import Phase, run_of
from langflow_session_memory.services.session_memory.agent.search_tool import SEARCH_UNAVAILABLE, search_tool
from langflow_session_memory.services.session_memory.rules.assembly import summary_messages
from langflow_session_memory.services.session_memory.rules.context_size import CONTEXT_TOO_LONG
from langflow_session_memory.services.session_memory.rules.state import SessionState
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.service import History, SessionMemoryService
from tests.agent_inputs import read_as
from tests.chat import ScriptedChatModel

MARKER = "PARTIAL-ANSWER-MARKER-4471"
REFUSAL = ValueError(
    f"This model's maximum context length is 3000 tokens. Please reduce the length of the messages. {MARKER}"
)


@pytest.fixture
def compaction_that_works(monkeypatch):
    """Compaction as it goes with a database: a summary-only history (so only the tool rule can stop a retry)."""

    async def compacted(_run):
        return SimpleNamespace(messages=[])

    monkeypatch.setattr(component_hooks, "_compacted_history", compacted)


def agent_with_memory(model, key) -> SimpleNamespace:
    """An Agent whose run has a Turn (memory applies) and a history, as the history hook leaves it."""
    component = SimpleNamespace(n_messages=10, chat_history=[Message(text="an earlier message " * 40)])
    agent_model(component, model)
    run = run_of(component)
    run.turn = Turn(key, 10, None)
    run.enter(Phase.HISTORY_READ)
    return component


async def test_a_run_refused_after_a_tool_ran_is_not_run_again(compaction_that_works, captured_logs, key):
    """The refused call after a tool is the call-fitting middleware's to retry (tests/services/test_call_fit.py)."""
    model = ScriptedChatModel(script=["call the lookup tool", REFUSAL, "an answer", "another answer"])
    component = agent_with_memory(model, key)
    tool_calls = []

    async def agent_run(_agent):  # the Agent's tool loop: model, tool, model again with the tool's result
        await model.ainvoke("What is in ticket T-1?")
        tool_calls.append("lookup")
        await model.ainvoke("What is in ticket T-1? Tool result: a very long ticket")

    with pytest.raises(ValueError, match="maximum context length"):
        await run_with_context_recovery(component, agent=None, run=agent_run)

    assert tool_calls == ["lookup"]
    assert len(model.calls) == 2
    assert not [log for log in captured_logs if MARKER in str(log)]  # the provider's text never reaches a log
    assert CONTEXT_TOO_LONG.startswith("This conversation no longer fits")


async def test_a_run_refused_at_its_first_model_call_is_retried_once(compaction_that_works, key):
    """Compacted to the summary alone (``compaction_that_works``): smaller than the refused history, so sent."""
    model = ScriptedChatModel(script=[REFUSAL, "an answer"])
    component = agent_with_memory(model, key)

    async def agent_run(_agent):
        return await model.ainvoke("What is in ticket T-1?")

    answer = await run_with_context_recovery(component, agent=None, run=agent_run)
    assert answer.content == "an answer"
    assert len(model.calls) == 2


@pytest.mark.parametrize(("value", "on"), [(True, True), ("true", True), ("1", True), (False, False), ("false", False)])
def test_the_switch_is_read_like_a_bool_input(value, on):
    assert memory_switched_on(SimpleNamespace(summarize_older_messages=value)) is on


def test_an_agent_that_never_set_the_switch_has_it_off():
    assert memory_switched_on(SimpleNamespace()) is False


TEXT = "WHAT-A-USER-WROTE-6613"
DATABASE_ERROR = OperationalError(
    "UPDATE session_memory_state SET summary=:summary", {"summary": TEXT}, Exception(f"disk full near '{TEXT}'")
)


@pytest.fixture
def broken_database(monkeypatch, key):
    """Memory applies to the turn, and every statement fails with an error that quotes what a user wrote."""

    def failing_session():
        raise DATABASE_ERROR

    service = SessionMemoryService(sessions=failing_session)
    monkeypatch.setattr(guard, "get_session_memory_service", lambda: service)
    monkeypatch.setattr(guard, "read_inputs", read_as(key))


async def running_agent():
    """An Agent past its history hook: its run's Turn read (by the guard the fixture sets up)."""
    component = SimpleNamespace(n_messages=10)
    agent_model(component, ScriptedChatModel())
    await begin_turn(component)
    return component


async def build_the_history():
    component = SimpleNamespace(n_messages=10)
    agent_model(component, ScriptedChatModel())
    assert await history_with_memory(component, stock=lambda: asyncio.sleep(0, result=[])) == []


async def search_older_messages():
    tool = search_tool(run_of(await running_agent()))
    assert await tool.ainvoke({"query": "vault code"}) == SEARCH_UNAVAILABLE


async def keep_the_last_calls_size():
    component = await running_agent()
    run_of(component).history = History(messages=[])
    run_of(component).calls.last_call_tokens = 900  # 90% of the window: worth keeping
    await finish_turn(component, Message(text="the answer"))


@pytest.mark.parametrize(
    ("path", "event"),
    [
        (build_the_history, "session_memory_fallback"),
        (search_older_messages, "session_memory_search_failed"),
        (keep_the_last_calls_size, "session_memory_call_size_failed"),
    ],
)
async def test_a_failure_is_logged_at_error_with_its_kind_and_no_text(broken_database, captured_logs, path, event):
    await path()

    [failure] = [log for log in captured_logs if log["event"].startswith(event)]
    assert failure["log_level"] == "error"
    assert failure["event"] == f"{event} reason=OperationalError driver=Exception"
    assert not [log for log in captured_logs if TEXT in str(log)]


async def a_turn_of_two_calls(key, captured_logs, usages: list[dict], **fold_costs) -> tuple[str, dict]:
    """A turn whose two model calls (a tool call, then the answer) reported ``usages``, with folds that cost
    ``fold_costs``: the turn's ``session_memory_turn`` line and its Session memory step's facts."""
    model = ScriptedChatModel(script=[AIMessage(content="x", usage_metadata=usage) for usage in usages])
    component = agent_with_memory(model, key)
    for question in ("What is in ticket T-1?", "What is in ticket T-1? Tool result: the ticket"):
        await model.ainvoke(question)
    summary = "Key facts:\n- customer ACME\nConversation so far:\n- greetings"
    state = SessionState(key=key, summary=summary, folded_count=20, version=1)
    history = History(messages=[], summary=summary, state=state, **fold_costs)
    run_of(component).history = history
    step = memory_step(history)
    spent = {name: sum(usage[name] for usage in usages) for name in ("input_tokens", "output_tokens", "total_tokens")}
    answer = Message(text="the answer", properties=Properties(usage=Usage(**spent)), content_blocks=[step])

    result = await finish_turn(component, answer)

    [line] = [log["event"] for log in captured_logs if log["event"].startswith("session_memory_turn ")]
    [shown] = result.content_blocks
    return line, step_facts(shown)


async def test_the_turn_reports_the_input_served_from_the_provider_s_cache_for_chats_and_folds_apart(
    key, captured_logs
):
    reported = {"input_tokens": 2000, "output_tokens": 20, "total_tokens": 2020}
    usages = [{**reported, "input_token_details": {"cache_read": cached}} for cached in (1792, 1920)]

    line, facts = await a_turn_of_two_calls(
        key, captured_logs, usages, fold_usage=TokenUsage(input_tokens=1500, output_tokens=40, cached_input_tokens=1024)
    )

    assert "input_tokens=5500 " in line
    assert " cached_input_tokens=3712 cache_write_input_tokens=0 fold_cached_input_tokens=1024 " in line
    assert (facts["cached_input_tokens"], facts["fold_input_tokens"], facts["fold_cached_input_tokens"]) == (
        3712,
        1500,
        1024,
    )
    assert "cache_write_input_tokens" not in facts


async def test_the_turn_reports_the_input_written_to_the_provider_s_cache_as_langchain_reads_anthropic_s_usage(
    key, captured_logs
):
    # Anthropic's usage as langchain-anthropic maps it: written input as cache_creation, or split by lifetime.
    details = ({"cache_read": 0, "cache_creation": 0, "ephemeral_5m_input_tokens": 1800}, {"cache_creation": 230})
    reported = {"input_tokens": 2030, "output_tokens": 9, "total_tokens": 2039}

    line, facts = await a_turn_of_two_calls(
        key, captured_logs, [{**reported, "input_token_details": d} for d in details]
    )

    assert " cached_input_tokens=0 cache_write_input_tokens=2030 " in line
    assert facts["cache_write_input_tokens"] == 2030


async def test_no_hook_reads_the_component_again_once_the_turn_is_read(monkeypatch, key):
    """The Turn is read once, at the history hook; the search tool, the answer's hooks and a compaction are
    handed it (a second read would call back into the component mid-run: ``_get_llm``, remediation context)."""
    reads = []
    read = read_as(key, None)
    monkeypatch.setattr(
        guard, "read_inputs", lambda component, model: reads.append(component) or read(component, model)
    )

    async def history(_turn, _llm, _embedder, _on_wait):
        return History(messages=[], fold_due=True)

    folds = []
    service = SimpleNamespace(
        build_history=history,
        background=SimpleNamespace(available=lambda: False),
        fold_after_turn=lambda turn, _llm: asyncio.sleep(0, result=folds.append(turn)),
        record_call_size=lambda _key, _tokens: asyncio.sleep(0),
    )
    monkeypatch.setattr(guard, "get_session_memory_service", lambda: service)
    component = SimpleNamespace(n_messages=10)
    agent_model(component, ScriptedChatModel())

    await history_with_memory(component, stock=lambda: asyncio.sleep(0, result=[]))
    await search_tool(run_of(component)).ainvoke({"query": ""})
    await finish_turn(component, Message(text="the answer"))

    assert len(reads) == 1
    assert folds == [run_of(component).turn]


def attempt_services(monkeypatch, key, histories: list) -> None:
    """Memory applies to every attempt; the service hands out ``histories`` in turn."""
    monkeypatch.setattr(guard, "read_inputs", read_as(key))
    service = SimpleNamespace(
        build_history=lambda _turn, _llm, _embedder, _on_wait: asyncio.sleep(0, result=histories.pop(0))
    )
    monkeypatch.setattr(guard, "get_session_memory_service", lambda: service)


async def an_attempt(component, model, second_model):
    """One attempt as lfx's Agent makes it: a model to read the history with, the history, a model for the agent."""
    assert agent_model(component, model) is model
    await history_with_memory(component, stock=lambda: asyncio.sleep(0, result=[]))
    return agent_model(component, second_model)


async def test_the_agent_runs_the_model_its_turn_folds_with_and_whose_calls_are_counted(monkeypatch, key):
    attempt_services(monkeypatch, key, [History(messages=[])])
    component = SimpleNamespace(n_messages=10)
    first, second = ScriptedChatModel(), ScriptedChatModel()

    runs = await an_attempt(component, first, second)

    state = run_of(component)
    assert runs is first
    assert state.fold_model is first
    assert any(handler is state.calls for handler in first.callbacks)


async def test_an_attempt_after_a_model_remediation_carries_nothing_of_the_one_before(monkeypatch, key):
    attempt_services(monkeypatch, key, [History(messages=[], fold_due=True), History(messages=[])])
    component = SimpleNamespace(n_messages=10)
    await an_attempt(component, ScriptedChatModel(), ScriptedChatModel())
    before = run_of(component)
    before.reductions.add(SimpleNamespace(), retry=True)  # a call fitted to the window in the failed attempt
    remediated = ScriptedChatModel()

    runs = await an_attempt(component, remediated, ScriptedChatModel())

    state = run_of(component)
    assert state is not before
    assert runs is remediated
    assert (state.reductions.calls, state.reductions.retried, state.history.fold_due) == (0, False, False)


def test_a_server_is_one_server_with_or_without_a_trailing_slash():
    """Langflow's OpenAI provider passes ``.../v1``; a model built with no base URL has the client's ``.../v1/``
    from ``OPENAI_BASE_URL``: the turn must still see the fold runs on its own server (and wait for it)."""
    from langchain_openai import ChatOpenAI

    given = ChatOpenAI(model="gpt-4o-mini", base_url="http://127.0.0.2:8765/v1", api_key="sk-local")
    from_client = ChatOpenAI(model="gpt-4o-mini", api_key="sk-local")
    from_client.root_client.base_url = "http://127.0.0.2:8765/v1/"

    assert component_inputs.model_url(given) == component_inputs.model_url(from_client) == "http://127.0.0.2:8765/v1"


async def test_a_run_whose_compacted_history_is_no_smaller_is_not_run_again(monkeypatch, key, captured_logs):
    model = ScriptedChatModel(script=[REFUSAL, "an answer"])
    component = agent_with_memory(model, key)

    async def as_large(_run):  # a summary as long as the history it replaces
        return SimpleNamespace(messages=list(component.chat_history))

    monkeypatch.setattr(component_hooks, "_compacted_history", as_large)

    async def agent_run(_agent):
        return await model.ainvoke("What is in ticket T-1?")

    with pytest.raises(ValueError, match="maximum context length"):  # the provider's refusal, as the stock Agent's
        await run_with_context_recovery(component, agent=None, run=agent_run)
    assert len(model.calls) == 1


async def test_a_compacted_history_over_a_small_window_keeps_the_newest_notes_that_fit(key):
    summary = "Key facts:\n" + "".join(f"- fact {i}: the base model wrote this line\n" for i in range(30))
    turn = Turn(key, 10, None, context_window=2048, fixed_tokens=1700)  # a pasted log fills most of the window
    assert request_tokens(turn, summary_messages(summary, [])) > 2048

    history = await component_hooks._with_newest_notes(
        turn, History(messages=summary_messages(summary, []), summary=summary)
    )

    assert request_tokens(turn, history.messages) <= 2048
    assert history.summary.splitlines()[-2] == "- fact 29: the base model wrote this line"  # the newest kept
