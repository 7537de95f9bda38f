"""What real servers and real models do, through the real Langflow app, on SQLite and PostgreSQL.

The bundled server plays llama-cpp-python (its ``llama-cpp-python`` profile) and models that echo their prompt,
head sections their own way or write a long summary, each as first seen against a real model (docs/real-model.md).
"""

import json
import uuid
from contextlib import contextmanager

import httpx
import pytest

from langflow_session_memory.services.session_memory.rules.assembly import HISTORY_START_NOTE
from langflow_session_memory.services.session_memory.rules.policy import SUMMARY
from langflow_session_memory.services.session_memory.settings import WAIT_FOR_FOLDS_VARIABLE
from langflow_session_memory.services.session_memory.summary.prompt import SUMMARY_INSTRUCTIONS
from tests.app.langflow_client import BATCH, turns_to_fold

FACT = "Our project is PRJ-123 on the EU cluster."
FOLD_TURNS = turns_to_fold(2)  # at N=2, the turns after which the first batch is folded: 11 at the default


@contextmanager
def behaving(fake_model, **settings):
    """The bundled server with ``settings`` for the block, restored afterwards."""
    saved = {name: getattr(fake_model.config, name) for name in settings}
    for name, value in settings.items():
        setattr(fake_model.config, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(fake_model.config, name, value)


def new_session() -> str:
    return f"real-server-{uuid.uuid4()}"


def state(langflow, session_id: str):
    rows = langflow.sql(
        "SELECT summary, folded_count, version, paused_until, last_error FROM session_memory_state "
        "WHERE session_id = :s",
        s=session_id,
    )
    return rows[0] if rows else None


def talk(langflow, flow_id, session_id, texts, tweaks, **run):
    return [langflow.run(flow_id, text, session_id=session_id, tweaks=tweaks, **run) for text in texts]


def folds(fake_model, since: int) -> list[dict]:
    return [r for r in fake_model.requests()[since:] if r["kind"] == "summary"]


def test_the_fold_writes_a_whole_summary_whatever_the_agent_s_max_tokens(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True, "max_tokens": 150}}
    session_id, before = new_session(), len(fake_model.requests())
    with behaving(fake_model, verbose_summary=True):
        talk(
            langflow,
            flow_id,
            session_id,
            [f"Turn {i}: we reviewed the rollout checklist item {i}." for i in range(FOLD_TURNS)],
            on,
        )

    [fold] = folds(fake_model, before)
    assert fold["body"]["max_completion_tokens"] == SUMMARY.output_tokens  # not the Agent's 150
    summary, folded_count, _version, paused_until, _error = state(langflow, session_id)
    assert (folded_count, paused_until) == (BATCH, None)
    last = BATCH // 2 - 1  # the batch's last turn: 9 at the default
    not_cut_short = f"The user wrote: Turn {last}: we reviewed the rollout checklist item {last}."
    assert summary.endswith(not_cut_short)


@pytest.mark.expect_log("session_summary_fold_failed", "session_summary_paused")
def test_a_summary_that_parrots_the_prompt_is_never_stored_and_the_pause_says_why(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = new_session()
    with behaving(fake_model, echo_output=True, fail_only_summaries=True):
        talk(langflow, flow_id, session_id, [FACT, *(f"Filler turn {i}." for i in range(FOLD_TURNS - 1))], on)

    summary, folded_count, _version, paused_until, last_error = state(langflow, session_id)
    assert (summary, folded_count) == ("", 0)
    assert SUMMARY_INSTRUCTIONS.splitlines()[0] not in summary
    assert paused_until is not None
    assert last_error.startswith("SummaryRejectedError: summary has ")
    assert last_error.endswith("copied from the fold instructions)")


def test_headings_a_model_writes_its_own_way_are_stored_as_ours(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = new_session()
    with behaving(fake_model, heading_style="bold"):
        talk(langflow, flow_id, session_id, [FACT, *(f"Filler turn {i}." for i in range(FOLD_TURNS - 1))], on)
    summary, folded_count, *_ = state(langflow, session_id)
    assert folded_count == BATCH
    assert summary.startswith("Key facts:\n- Our project is PRJ-123 on the EU cluster.")
    assert "\nConversation so far:\n" in summary


def test_a_session_of_short_messages_keeps_folding(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = new_session()
    with behaving(fake_model, verbose_summary=True):
        talk(langflow, flow_id, session_id, ["ok"] * turns_to_fold(2, batches=2), on)  # 21 at the default
    summary, folded_count, _version, paused_until, _error = state(langflow, session_id)
    assert (folded_count, paused_until) == (2 * BATCH, None)  # longer than the one-word messages: no reason to stop
    assert summary.endswith("Conversation so far:\n- The user wrote: ok")  # written once, however often it was said


LLAMA = {"profile": "llama-cpp-python", "context_limit_tokens": 2048}
LONG = "Here is the build log:\n" + "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 20


@pytest.mark.expect_log("session_context_overflow")
def test_an_empty_stream_from_llama_cpp_python_is_recognised_and_compacted(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=8)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=8)
    on = {agent_id: {"summarize_older_messages": True}}  # no Context Window: the overflow is met when it comes
    script = [FACT, *[LONG] * 5, "Which cluster and project were we on?"]
    stock_session, session_id = new_session(), new_session()
    with behaving(fake_model, **LLAMA):
        stock = [langflow.run(stock_flow, text, session_id=stock_session, check=False).status_code for text in script]
        ours = [langflow.run(memory_flow, t, session_id=session_id, tweaks=on, check=False) for t in script]
    assert 500 in stock  # the stock Agent meets the empty stream as "No generations found in stream"
    assert [response.status_code for response in ours] == [200] * len(script)
    logged = "\n".join(langflow.log_lines())
    assert "session_context_overflow attempt=1 result=refused" in logged
    assert "session_context_overflow attempt=2 result=answered" in logged
    assert "PRJ-123" in ours[-1].text


def test_with_the_context_window_declared_long_messages_fold_early_instead_of_overflowing(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=8)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=8)
    on = {agent_id: {"summarize_older_messages": True, "context_window_tokens": 2048}}
    script = [FACT, *[LONG] * 5, "Which cluster and project were we on?"]
    session_id = new_session()
    with behaving(fake_model, **LLAMA):
        stock = [langflow.run(stock_flow, text, session_id=new_session(), check=False).status_code for text in script]
        before = len(fake_model.requests())
        ours = [langflow.run(memory_flow, t, session_id=session_id, tweaks=on, check=False) for t in script]
    chat = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    assert [response.status_code for response in ours] == [200] * len(script)
    assert all(r["prompt_tokens"] < 2048 for r in chat)  # prevented, not met: no request overflowed
    assert len(chat) == len(script)
    assert "session_context_early_fold" in "\n".join(langflow.log_lines())
    assert "PRJ-123" in ours[-1].text
    assert stock  # the stock Agent's statuses at the same N are in the report, not asserted: it may fit


@pytest.mark.expect_log("session_summary_fold_failed", "session_summary_paused")
def test_a_paused_backlog_opens_with_a_user_message_for_strict_chat_templates(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=4)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = new_session()
    with behaving(fake_model, fail_status=500, fail_only_summaries=True):
        # Over two batches older than the window when the question comes (25 fillers at the default).
        talk(langflow, flow_id, session_id, [FACT, *(f"Filler turn {i}." for i in range(BATCH + 5))], on)
    with behaving(fake_model, strict_alternation=True):
        response = langflow.run(flow_id, "Which cluster were we on?", session_id=session_id, tweaks=on, check=False)
        last = fake_model.requests()[-1]
    assert response.status_code == 200
    first = next(m for m in last["body"]["messages"] if m["role"] != "system")
    assert (first["role"], first["content"]) == ("user", HISTORY_START_NOTE)
    assert "session_memory_history_trimmed" in "\n".join(langflow.log_lines())


def test_without_usage_in_streams_the_turn_reports_an_estimate_and_says_so(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = new_session()
    with behaving(fake_model, profile="llama-cpp-python"):
        talk(langflow, flow_id, session_id, [FACT, *(f"Filler turn {i}." for i in range(FOLD_TURNS))], on)
    [(properties,)] = langflow.sql(
        "SELECT properties FROM message WHERE session_id = :s AND sender = 'Machine' ORDER BY timestamp DESC LIMIT 1",
        s=session_id,
    )
    usage = (properties if isinstance(properties, dict) else json.loads(properties))["usage"]
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert "usage=estimated" in "\n".join(langflow.log_lines())


# Qwen2.5-Coder 1.5B on two cores (docs/real-model.md) is 67 and 10 tokens a second; here 40x faster, so that a
# fold still runs when the next turn comes (the turns are sent back to back) and the session takes seconds.
ONE_SLOT = {"profile": "llama-cpp-python", "prompt_tokens_per_s": 2700.0, "output_tokens_per_s": 400.0}
FOLDS_DUE_AFTER = (turns_to_fold(4), turns_to_fold(4, batches=2))  # at N=4: after turns 12 and 22 at the default
BACK_TO_BACK_TURNS = FOLDS_DUE_AFTER[-1] + 2  # 24 at the default


def back_to_back(langflow, fake_model, *, session_memory: bool) -> tuple[list[dict], str]:
    """The same script at N=4, each turn sent as soon as the previous answer came, from a slot that holds nothing
    of it (one short request first); the chat requests it made."""
    flow_id, agent_id = langflow.create_agent_flow(session_memory=session_memory, n_messages=4)
    tweaks = {agent_id: {"summarize_older_messages": True}} if session_memory else {}
    evict = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello."}]}
    httpx.post(f"{fake_model.base_url}/chat/completions", json=evict, timeout=30).raise_for_status()
    session_id, before = new_session(), len(fake_model.requests())
    script = [FACT, *(f"Filler turn {i}." for i in range(1, BACK_TO_BACK_TURNS))]
    talk(langflow, flow_id, session_id, script, tweaks, settle=False)
    langflow.settle_folds()
    return [r for r in fake_model.requests()[before:] if r["kind"] == "chat"], session_id


def whole_prompt_evaluated(requests: list[dict]) -> list[int]:
    """The requests (by position) the slot's cached prompt did not serve at all."""
    return [index for index, r in enumerate(requests) if r["evaluated_tokens"] == r["prompt_tokens"]]


def test_back_to_back_turns_on_a_one_slot_server_let_every_fold_land_and_keep_the_cached_prompt(
    langflow, fake_model, monkeypatch
):
    """Issue 27: a new turn cancelled its session's fold, which evicted the cached prompt anyway, and the next
    turn started it again: no fold ever landed and every turn evaluated its whole prompt. Now a turn on a
    self-hosted server waits for the fold, which lands once; between folds the prompt holds still."""
    monkeypatch.setenv(WAIT_FOR_FOLDS_VARIABLE, "self-hosted")  # the default: the server plays a local llama.cpp
    with behaving(fake_model, **ONE_SLOT):
        ours, session_id = back_to_back(langflow, fake_model, session_memory=True)
        stock, _ = back_to_back(langflow, fake_model, session_memory=False)

    summary, folded_count, _version, paused_until, _error = state(langflow, session_id)
    assert (folded_count, paused_until) == (2 * BATCH, None)  # both folds landed, none failed
    assert "PRJ-123" in summary
    assert "session_summary_fold_waited" in "\n".join(langflow.log_lines())
    # The first turn, and the turn after each fold (the slot held the fold's prompt), evaluate their whole
    # prompt; every other turn only its new message, fewer tokens than the stock Agent's, whose window slides.
    assert whole_prompt_evaluated(ours) == [0, *FOLDS_DUE_AFTER]
    assert whole_prompt_evaluated(stock) == [0]
    between_folds = [turn for turn in range(2, BACK_TO_BACK_TURNS) if turn not in FOLDS_DUE_AFTER]
    assert all(ours[turn]["evaluated_tokens"] < stock[turn]["evaluated_tokens"] for turn in between_folds)
