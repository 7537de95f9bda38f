"""What a real deployment hits, through the real Langflow app: the extension never makes Langflow worse."""

import asyncio
import threading
import time
import uuid

import pytest
from sqlalchemy import text

from langflow_session_memory.migrations import runner
from tests.app.langflow_client import BACKLOG_SESSION_TURNS, BATCH, slow_folds, turns_to_fold

FACT = "Our project is PRJ-123 on the EU cluster."
QUESTION = "Which cluster and project were we on?"
REASONING_MODEL = [{"name": "gpt-5.4-mini", "provider": "OpenAI", "metadata": {}}]


def session() -> str:
    return f"hardening-{uuid.uuid4()}"


def talk(langflow, flow_id, session_id, turns: int, tweaks=None):
    for i in range(turns):
        langflow.run(flow_id, f"Filler turn {i}, tell me something small.", session_id=session_id, tweaks=tweaks)


def summary_requests(fake_model, since: int) -> list[dict]:
    return [r for r in fake_model.requests()[since:] if r["kind"] == "summary"]


@pytest.mark.expect_log("session_memory_fallback", "session_memory_cleanup_failed")
def test_with_the_table_dropped_turns_and_deletes_still_work_and_migrate_brings_memory_back(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=2)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    dropped = session()
    talk(langflow, memory_flow, dropped, 2, tweaks=on)
    with langflow.engine.begin() as connection:
        connection.execute(text("DROP TABLE session_memory_state"))
    log_start = len(langflow.log_lines())
    try:
        for flow_id, tweaks in ((stock_flow, None), (memory_flow, None), (memory_flow, on)):
            talk(langflow, flow_id, dropped, 2, tweaks=tweaks)  # each answers 200 (checked by run)
        assert langflow.http.delete(f"/api/v1/monitor/messages/session/{dropped}").status_code == 204
        assert langflow.http.delete(f"/api/v1/flows/{stock_flow}").status_code == 200
    finally:
        asyncio.run(runner.upgrade(langflow.engine.url.render_as_string(hide_password=False)))

    logged = "\n".join(langflow.log_lines()[log_start:])
    assert "session_memory_cleanup_failed" in logged
    assert "reason=table_missing" in logged
    assert "python -m langflow_session_memory migrate" in logged
    assert langflow.sql("SELECT count(*) FROM message WHERE session_id = :s", s=dropped) == [(0,)]

    back = session()  # the table is back: memory works again, no restart
    langflow.run(memory_flow, FACT, session_id=back, tweaks=on)
    talk(langflow, memory_flow, back, turns_to_fold(2), tweaks=on)  # one turn past the first fold: 11 at the default
    assert langflow.sql("SELECT folded_count FROM session_memory_state WHERE session_id = :s", s=back) == [(BATCH,)]


def test_folding_works_on_a_model_that_rejects_temperature(langflow, fake_model):
    assert fake_model.config.reject_temperature_for_reasoning_models
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True, "model": REASONING_MODEL}}
    session_id = session()
    before = len(fake_model.requests())
    langflow.run(flow_id, FACT, session_id=session_id, tweaks=on)
    talk(langflow, flow_id, session_id, turns_to_fold(2) - 1, tweaks=on)  # the first batch folds after the last
    response = langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=on)

    requests = fake_model.requests()[before:]
    assert {r["body"]["model"] for r in requests} == {"gpt-5.4-mini"}
    assert [r["status"] for r in requests if r["kind"] == "summary"] == [200]
    [(folded_count, paused_until)] = langflow.sql(
        "SELECT folded_count, paused_until FROM session_memory_state WHERE session_id = :s", s=session_id
    )
    assert (folded_count, paused_until) == (BATCH, None)
    assert "PRJ-123" in response.text
    assert "EU" in response.text


def test_eight_concurrent_turns_on_one_session_never_fold_twice_or_recreate_the_row(langflow, fake_model):
    """Each fold call commits (no duplicate calls for one batch), and the row only moves forward.

    A message stored late behind the cursor (its timestamp was taken before a concurrent
    turn's fold passed it) may reset the summary: that is a logged refold, not a duplicate.
    """
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = session()
    before, log_start = len(fake_model.requests()), len(langflow.log_lines())
    seen_by_worker: dict[int, list[tuple]] = {}
    errors = []

    def worker(index: int) -> None:
        seen = seen_by_worker.setdefault(index, [])
        for turn in range(3):
            text_ = f"Worker {index} turn {turn}, tell me something small."
            response = langflow.run(flow_id, text_, session_id=session_id, tweaks=on, check=False)
            if response.status_code != 200:
                errors.append(response.status_code)
            seen += langflow.sql(
                "SELECT version, created_at FROM session_memory_state WHERE session_id = :s", s=session_id
            )

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    [(version, folded_count, created_at)] = langflow.sql(
        "SELECT version, folded_count, created_at FROM session_memory_state WHERE session_id = :s", s=session_id
    )
    ours = [line for line in langflow.log_lines()[log_start:] if session_id in line]
    commits = [line for line in ours if "session_summary_fold latency_ms=" in line]
    resets = [line for line in ours if "session_summary_reset" in line]
    assert errors == []
    assert folded_count >= BATCH
    assert len(summary_requests(fake_model, before)) == len(commits)
    assert version == len(commits) + len(resets)
    for seen in seen_by_worker.values():
        assert [v for v, _ in seen] == sorted(v for v, _ in seen)  # the version never goes backwards
        assert {c for _, c in seen} <= {created_at}  # the row is never deleted and re-created


def test_a_context_window_that_is_not_a_number_gets_langflows_own_input_validation(langflow, fake_model):
    stock_flow, stock_id = langflow.create_agent_flow(session_memory=False, n_messages=2)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    stock = langflow.run(stock_flow, FACT, session_id=session(), tweaks={stock_id: {"n_messages": "abc"}}, check=False)
    ours = langflow.run(
        memory_flow,
        FACT,
        session_id=session(),
        tweaks={agent_id: {"summarize_older_messages": True, "context_window_tokens": "abc"}},
        check=False,
    )
    assert ours.status_code == stock.status_code
    assert "Could not convert 'abc' to integer for input n_messages" in stock.text
    assert "Could not convert 'abc' to integer for input context_window_tokens" in ours.text


@pytest.mark.parametrize("switch", ["1", "true", True])
def test_the_switch_given_as_text_or_bool_turns_memory_on(langflow, fake_model, switch):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    session_id = session()
    talk(langflow, flow_id, session_id, turns_to_fold(2) + 1, tweaks={agent_id: {"summarize_older_messages": switch}})
    assert langflow.sql("SELECT folded_count FROM session_memory_state WHERE session_id = :s", s=session_id) == [
        (BATCH,)
    ]


def test_a_number_for_the_switch_gets_its_default_as_langflow_gives_every_bool_input(langflow, fake_model):
    """Langflow ignores a number given to a bool field and keeps the input's default (lfx param_handler)."""
    stock_flow, stock_id = langflow.create_agent_flow(session_memory=False, n_messages=2)
    before = len(fake_model.requests())
    langflow.run(stock_flow, "hello", session_id=session(), tweaks={stock_id: {"add_current_date_tool": 0}})
    stock_tools = [tool["function"]["name"] for tool in fake_model.requests()[before:][-1]["body"]["tools"]]
    assert "get_current_date" in stock_tools  # 0 did not turn the stock Agent's date tool (default on) off

    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    session_id = session()
    talk(langflow, flow_id, session_id, turns_to_fold(2) + 1, tweaks={agent_id: {"summarize_older_messages": 1}})
    assert langflow.sql("SELECT count(*) FROM session_memory_state WHERE session_id = :s", s=session_id) == [(0,)]


def test_zero_messages_with_a_context_error_reads_and_writes_nothing(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=0)
    on = {agent_id: {"summarize_older_messages": True, "context_window_tokens": 3000}}
    session_id = session()
    talk(langflow, flow_id, session_id, 3, tweaks=on)
    fake_model.config.context_limit_tokens = 3000
    try:
        before = len(fake_model.requests())
        response = langflow.run(flow_id, "x " * 7000, session_id=session_id, tweaks=on, check=False)
    finally:
        fake_model.config.context_limit_tokens = None
    assert response.status_code != 200
    assert [r["kind"] for r in fake_model.requests()[before:]] == ["chat"]
    assert langflow.sql("SELECT count(*) FROM session_memory_state WHERE session_id = :s", s=session_id) == [(0,)]


def test_a_large_last_model_call_is_recorded_for_the_next_early_fold(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=10)
    on = {agent_id: {"summarize_older_messages": True, "context_window_tokens": 2000}}
    session_id = session()
    before = len(fake_model.requests())
    langflow.run(
        flow_id, "Here is the log:\n" + "ERROR worker-7 connection reset\n" * 40, session_id=session_id, tweaks=on
    )
    [chat] = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    assert chat["prompt_tokens"] >= 800  # at least 40% of the window: worth keeping
    recorded = langflow.sql("SELECT last_call_tokens FROM session_memory_state WHERE session_id = :s", s=session_id)
    assert recorded == [(chat["prompt_tokens"] + chat["completion_tokens"],)]


SLOW_FOLD_SECONDS = 6.0


def test_no_turn_waits_for_a_routine_fold_and_recall_is_unchanged(langflow, fake_model):
    """Folds run after answers; a turn that comes while its session's fold runs is answered at once, beside it
    (the bundled server plays a hosted provider; on a self-hosted one the turn would wait for the fold)."""
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = session()
    before = len(fake_model.requests())
    turns = []  # (started, ended) of each turn, as the client sees it
    with slow_folds(fake_model, SLOW_FOLD_SECONDS):
        # Three turns past the first fold (14 at the default): with the question, still short of a second batch.
        for i in range(turns_to_fold(2) + 3):
            started = time.time()
            text_ = FACT if i == 0 else f"Filler turn {i}."
            langflow.run(flow_id, text_, session_id=session_id, tweaks=on, settle=False)
            turns.append((started, time.time()))
        langflow.settle_folds()
    response = langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=on)

    requests = fake_model.requests()[before:]
    folds = [r for r in requests if r["kind"] == "summary"]  # a streamed fold is logged as it arrives
    assert folds
    assert all(r["status"] == 200 for r in folds)
    first_fold = folds[0]["ts"]
    assert any(r["kind"] == "chat" and r["ts"] < first_fold for r in requests), "the fold started before any answer"
    in_flight = [
        (start, end) for start, end in turns if any(f["ts"] < start < f["ts"] + SLOW_FOLD_SECONDS for f in folds)
    ]
    assert in_flight, "no turn started while a fold ran"
    assert all(end - start < SLOW_FOLD_SECONDS / 2 for start, end in in_flight)  # none waited for the fold
    assert langflow.sql("SELECT folded_count FROM session_memory_state WHERE session_id = :s", s=session_id) == [
        (BATCH,)
    ]
    assert "PRJ-123" in response.text
    assert "EU" in response.text
    ours = [line for line in langflow.log_lines() if session_id in line]
    folded = [line for line in ours if "session_summary_fold " in line]
    assert len(folded) == 1
    assert "mode=background" in folded[0]
    assert len(folds) == 1  # one fold request, beside the turns: none was cut short or sent again
    assert not [line for line in ours if "session_summary_fold_waited" in line]


def test_deleting_a_session_while_its_background_fold_runs_leaves_no_row_and_no_text(langflow, fake_model):
    flow_id, agent_id = langflow.seeded_folded_session(session_id := session(), turns=BACKLOG_SESSION_TURNS)
    on = {agent_id: {"summarize_older_messages": True}}
    before = len(fake_model.requests())
    with slow_folds(fake_model, SLOW_FOLD_SECONDS):
        langflow.run(flow_id, "One more turn.", session_id=session_id, tweaks=on, settle=False)
        langflow.wait_for_fold_claim(session_id)
        assert langflow.http.delete(f"/api/v1/monitor/messages/session/{session_id}").status_code == 204
        langflow.settle_folds()

    assert [r["status"] for r in summary_requests(fake_model, before)] == [200]  # the model did answer
    assert langflow.sql("SELECT count(*) FROM session_memory_state WHERE session_id = :s", s=session_id) == [(0,)]
    assert langflow.sql("SELECT count(*) FROM message WHERE session_id = :s", s=session_id) == [(0,)]
