"""The failure rule in every hook and middleware of ours (issue 39): a fault injected into one leaves the turn
answered as the stock Agent answers it, with a named log event. One test per place, through the real app.

The fault is a ``RuntimeError`` raised by the function of ours that the place calls first; each test fails
(a 500, or a missing event) where that place is outside the fallback.
"""

import uuid

import pytest

from langflow_session_memory.services.session_memory.agent import (
    component_hooks,
    playground,
    prompt_caching,
    search_tool,
)
from langflow_session_memory.services.session_memory.folding.background import BackgroundFolds
from langflow_session_memory.services.session_memory.rules import call_fit
from tests.app.langflow_client import CLAUDE, MODEL, turns_to_fold
from tests.app.test_tool_results import OWNER, OWNER_HEAD, answer_of, walk

QUESTION = "Use read_build_owner: whose build is it?"
ANSWER = f"From the tools: {OWNER_HEAD}"
FALLBACK = "session_memory_fallback"


class InjectedFault(RuntimeError):
    pass


def fail(*_args, **_kwargs):
    raise InjectedFault("injected by the test")


def answered(langflow, *, memory: bool, model=MODEL):
    """One turn of the tool question on a session with a summary (its Session memory step has one to show)."""
    session_id = f"failure-rule-{uuid.uuid4()}"
    flow_id, agent_id = langflow.seeded_folded_session(session_id, tools=(OWNER,), model=model)
    tweaks = {agent_id: {"summarize_older_messages": memory, "context_window_tokens": 100_000}}
    return langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=tweaks, check=False)


def steps_of(response) -> list[str]:
    blocks = response.json()["outputs"][0]["outputs"][0]["results"]["message"]["content_blocks"]
    return [block.get("name") for block in walk(blocks) if block.get("type") == "tool_use"]


PLACES = [
    pytest.param(call_fit, "fit_call", MODEL, f"{FALLBACK} where=call_fit", id="call-fitting"),
    pytest.param(playground, "memory_step", MODEL, f"{FALLBACK} where=memory_step", id="session-memory-step"),
    pytest.param(component_hooks, "_chat_usage", MODEL, f"{FALLBACK} where=usage", id="usage-accounting"),
    pytest.param(playground, "stored_form", MODEL, f"{FALLBACK} where=stored_message", id="stored-message"),
    pytest.param(playground, "without_summary", MODEL, f"{FALLBACK} where=handed_on", id="answer-handed-on"),
    pytest.param(component_hooks, "ModelCalls", MODEL, f"{FALLBACK} where=agent_model", id="agent-model"),
    pytest.param(
        component_hooks, "CallFitMiddleware", MODEL, f"{FALLBACK} where=agent_middleware", id="agent-middleware"
    ),
    pytest.param(search_tool, "search_tool", MODEL, f"{FALLBACK} where=agent_tools", id="agent-tools"),
    pytest.param(
        prompt_caching,
        "_marked_summary",
        CLAUDE,
        "session_memory_cache_breakpoint_failed",
        id="cache-breakpoints",
        marks=pytest.mark.expect_log("session_memory_cache_breakpoint_failed"),
    ),
]


@pytest.mark.expect_log(FALLBACK)
@pytest.mark.parametrize(("module", "name", "model", "event"), PLACES)
def test_a_fault_in_one_place_leaves_the_turn_answered_as_the_stock_agent_answers_it(
    langflow, fake_model, monkeypatch, module, name, model, event
):
    stock = answered(langflow, memory=False, model=model)
    log_start = len(langflow.log_lines())
    monkeypatch.setattr(module, name, fail)
    ours = answered(langflow, memory=True, model=model)
    monkeypatch.undo()

    assert stock.status_code == 200, stock.text
    assert ours.status_code == 200, ours.text
    assert answer_of(ours) == answer_of(stock) == ANSWER
    if name != "without_summary":  # the answer handed on without its steps: never with the summary
        assert "read_build_owner" in steps_of(ours)  # the tool's step is shown, as on the stock Agent
    logged = "\n".join(langflow.log_lines()[log_start:])
    assert event in logged
    assert "reason=InjectedFault" in logged


@pytest.mark.expect_log(FALLBACK)
def test_a_fault_in_the_fold_after_the_answer_leaves_every_turn_answered(langflow, fake_model, monkeypatch):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = f"failure-rule-{uuid.uuid4()}"
    log_start = len(langflow.log_lines())
    monkeypatch.setattr(BackgroundFolds, "start", fail)
    for i in range(turns_to_fold(2)):
        response = langflow.run(flow_id, f"Filler turn {i}, note code CODE-{i}.", session_id=session_id, tweaks=on)
        assert response.status_code == 200
    monkeypatch.undo()

    logged = "\n".join(langflow.log_lines()[log_start:])
    assert f"{FALLBACK} reason=InjectedFault" in logged
    assert langflow.sql("SELECT folded_count FROM session_memory_state WHERE session_id = :s", s=session_id) in (
        [],
        [(0,)],
    )
