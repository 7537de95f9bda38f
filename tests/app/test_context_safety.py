"""A pasted log against a small context window: the stock Agent gets stuck, ours keeps answering."""

import uuid

import pytest

from langflow_session_memory.services.session_memory.rules.context_size import CONTEXT_TOO_LONG

CONTEXT_LIMIT = 3000
PASTED_LOG = "Here is the log:\n" + "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 72


def script() -> list[str]:
    turns = ["Our project is PRJ-123 on the EU cluster.", "Filler turn 1, tell me something small.", PASTED_LOG]
    return turns + [f"Filler turn {i}, tell me something small." for i in range(3, 40)]


def test_pasted_log_keeps_answering_where_the_stock_agent_fails(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=100)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=100)
    on = {agent_id: {"summarize_older_messages": True, "context_window_tokens": CONTEXT_LIMIT}}
    fake_model.config.context_limit_tokens = CONTEXT_LIMIT
    try:
        stock = [langflow.run(stock_flow, t, session_id="paste", check=False).status_code for t in script()]
        ours = [langflow.run(memory_flow, t, session_id="paste", tweaks=on, check=False).status_code for t in script()]
    finally:
        fake_model.config.context_limit_tokens = None

    first_failure = stock.index(500)
    assert 3 < first_failure < len(stock) - 1
    assert set(stock[first_failure:]) == {500}  # stuck: every later turn fails too
    assert ours == [200] * len(script())
    assert len(PASTED_LOG) >= 5000


@pytest.mark.expect_log("session_context_overflow")
def test_a_message_too_long_for_any_compaction_gets_one_clear_answer_and_no_retry_loop(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=100)
    on = {agent_id: {"summarize_older_messages": True, "context_window_tokens": CONTEXT_LIMIT}}
    session_id = f"oversized-{uuid.uuid4()}"
    langflow.run(flow_id, "Our project is PRJ-123 on the EU cluster.", session_id=session_id, tweaks=on)
    fake_model.config.context_limit_tokens = CONTEXT_LIMIT
    try:
        before = len(fake_model.requests())
        response = langflow.run(flow_id, "x " * 5000, session_id=session_id, tweaks=on, check=False)
        attempts = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]
        before = len(fake_model.requests())
        after = langflow.run(flow_id, "Which cluster were we on?", session_id=session_id, tweaks=on, check=False)
        next_turn = [r["status"] for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    finally:
        fake_model.config.context_limit_tokens = None

    assert response.status_code != 200
    assert CONTEXT_TOO_LONG in response.text
    assert "Traceback" not in response.text
    assert len(attempts) == 1
    assert after.status_code == 200
    assert next_turn == [200]  # the stored oversized message is folded early, not sent and refused again
