"""An attempt's run goes through its phases in lfx's order; a hook out of that order is logged and left stock."""

import asyncio
import inspect
import uuid
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lfx.schema.message import Message

from langflow_session_memory.services.session_memory.agent import guard
from langflow_session_memory.services.session_memory.agent.component_hooks import (
    agent_middleware,
    agent_model_once,
    agent_tools,
    finish_turn,
    history_with_memory,
    run_with_context_recovery,
    with_memory_step,
)
from langflow_session_memory.services.session_memory.agent.run import ENTERED_FROM, Phase, Run, run_of
from langflow_session_memory.services.session_memory.agent.search import TOOL_NAME
from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.service import History
from tests.agent_inputs import read_as
from tests.chat import ScriptedChatModel

OUT_OF_ORDER = "session_memory_hook_out_of_order"


def stock_history():
    return asyncio.sleep(0, result=[])


def stock_run(_agent):
    return asyncio.sleep(0, result=Message(text="the stock answer"))


# Every hook of the component, as lfx calls it with the switch on.
HOOKS = {
    "model": lambda agent: agent._get_llm(),
    "history": lambda agent: history_with_memory(agent, stock=stock_history),
    "tools": lambda agent: agent_tools(agent, []),
    "middleware": lambda agent: agent_middleware(agent, ScriptedChatModel(), []),
    "step": lambda agent: with_memory_step(agent, Message(text="")),
    "run": lambda agent: run_with_context_recovery(agent, None, stock_run),
    "finish": lambda agent: finish_turn(agent, Message(text="the answer")),
}
# lfx's attempt: its first model, the history, the tools, the agent's model and middleware, the run, the answer.
IN_ORDER = ("model", "history", "tools", "model", "middleware", "run", "step", "finish")


async def call(hook: str, agent):
    result = HOOKS[hook](agent)
    return await result if inspect.isawaitable(result) else result


def an_agent() -> SimpleNamespace:
    """The parts of the component the hooks read; its ``_get_llm`` hands Langflow's build to the model hook."""
    agent = SimpleNamespace(n_messages=10, summarize_older_messages=True)
    agent.set_tools_callbacks = lambda _tools, _callbacks: None
    agent._get_llm = lambda: agent_model_once(agent, ScriptedChatModel)
    return agent


@pytest.fixture
def memory_applies(monkeypatch):
    """Every attempt's history hook reads a Turn; the service builds an empty history and indexes nothing."""
    key = SessionKey(flow_id=uuid.uuid4(), owner_id=uuid.uuid4(), session_id="New Session 0")
    monkeypatch.setattr(guard, "read_inputs", read_as(key))
    service = SimpleNamespace(
        build_history=lambda _turn, _llm, _embedder, _on_wait: asyncio.sleep(0, result=History(messages=[])),
        retrieval=SimpleNamespace(index_older=lambda _turn, **_batches: asyncio.sleep(0, result=0)),
    )
    monkeypatch.setattr(guard, "get_session_memory_service", lambda: service)


def out_of_order(logs) -> list[str]:
    return [log["event"] for log in logs if log["event"].startswith(OUT_OF_ORDER)]


@given(st.lists(st.sampled_from(sorted(ENTERED_FROM)), max_size=12))
def test_a_phase_is_entered_only_from_the_phases_before_it(phases):
    run = Run()
    for phase in phases:
        before = run.phase
        moved = run.enter(phase)
        assert run.phase == (phase if moved else before)
        assert moved == (before in ENTERED_FROM[phase])
        assert run.phase >= before


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=150)
@given(st.lists(st.sampled_from(sorted(HOOKS)), max_size=14))
def test_any_order_of_hooks_never_raises_and_never_goes_back_but_to_a_new_attempt(memory_applies, captured_logs, hooks):
    agent = an_agent()

    async def attempt():
        for hook in hooks:
            before = run_of(agent)
            phase_before = before.phase if before is not None else None
            await call(hook, agent)
            after = run_of(agent)
            if after is before:
                assert after is None or after.phase >= phase_before
            else:  # only an attempt's first hooks begin a run: its first model, or its history
                assert hook in ("model", "history")
                assert after.phase <= Phase.HISTORY_READ

    asyncio.run(attempt())
    assert not [log for log in captured_logs if log["event"].startswith("session_memory_fallback")]


async def test_an_attempt_in_lfx_s_order_goes_through_every_phase_and_logs_nothing_out_of_order(
    memory_applies, captured_logs
):
    agent = an_agent()
    phases = []
    for hook in IN_ORDER:
        await call(hook, agent)
        phases.append(run_of(agent).phase)

    assert phases == [
        Phase.CREATED,
        Phase.HISTORY_READ,
        Phase.HISTORY_READ,
        Phase.AGENT_BUILT,
        Phase.AGENT_BUILT,
        Phase.AGENT_BUILT,
        Phase.AGENT_BUILT,
        Phase.FINISHED,
    ]
    assert out_of_order(captured_logs) == []


async def test_the_history_hook_begins_the_attempt_of_a_component_version_without_the_model_hook(
    memory_applies, captured_logs
):
    """The first saved version (2026-11-30) hooks only the history and the answer: memory still applies."""
    agent = an_agent()
    agent._get_llm = ScriptedChatModel  # Langflow's own model, built without our hook

    await call("history", agent)
    assert run_of(agent).turn is not None
    await call("finish", agent)

    assert run_of(agent).phase is Phase.FINISHED
    assert out_of_order(captured_logs) == []


async def test_a_hook_that_finds_no_run_is_logged_and_goes_on_as_the_stock_agent(memory_applies, captured_logs):
    agent = an_agent()

    assert await call("middleware", agent) == []
    assert [tool.name for tool in await agent_tools(agent, [])] == []

    assert out_of_order(captured_logs) == [
        f"{OUT_OF_ORDER} hook=agent_middleware phase=none",
        f"{OUT_OF_ORDER} hook=agent_tools phase=none",
    ]
    assert run_of(agent) is None  # no run made up for them


async def test_a_hook_before_the_history_is_read_is_logged_and_goes_on_as_the_stock_agent(
    memory_applies, captured_logs
):
    agent = an_agent()
    await call("model", agent)

    answer = await run_with_context_recovery(agent, None, stock_run)

    assert answer.text == "the stock answer"
    assert out_of_order(captured_logs) == [f"{OUT_OF_ORDER} hook=run_with_context_recovery phase=created"]
    assert run_of(agent).phase is Phase.CREATED


async def test_the_search_tool_is_offered_between_the_history_and_the_answer_only(memory_applies, captured_logs):
    agent = an_agent()
    for hook in IN_ORDER[:2]:
        await call(hook, agent)
    offered = [tool.name for tool in await agent_tools(agent, [])]
    for hook in IN_ORDER[2:]:
        await call(hook, agent)

    after_the_answer = await agent_tools(agent, [])

    assert offered == [TOOL_NAME]
    assert after_the_answer == []
    assert out_of_order(captured_logs) == [f"{OUT_OF_ORDER} hook=agent_tools phase=finished"]
