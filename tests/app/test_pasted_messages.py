"""Huge pasted messages with no Context Window declared (issue 31): ours never sends more than the stock Agent.

The starter flow's shape at N=4 on the bundled server, through the real app, both databases: a fact, then a
200 KB log pasted three times with a question each time, then short turns. The stock Agent sends its last 4
messages; the switch must not add the pastes waiting beyond its window on top of them.
"""

import uuid

import pytest

from langflow_session_memory.services.session_memory.rules.context_size import CONTEXT_TOO_LONG
from tests.app.test_real_server_behaviour import behaving
from tests.app.test_tool_results import answer_of, answer_step_facts

N_MESSAGES = 4
PASTE = "Here is the log:\n" + "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 2850
SUMMARY_ALLOWANCE = 600  # the summary and its acknowledgement, at most 300 words


def three_pastes() -> list[str]:
    pastes = [f"{PASTE}\nWhat failed in paste {i}?" for i in range(1, 4)]
    return ["Our project is PRJ-123 on the EU cluster.", *pastes, *[f"Short turn {i}." for i in range(1, 6)]]


def first_request_tokens(
    langflow, fake_model, flow_id: str, tweaks: dict, script: list[str] | None = None
) -> tuple[list[int], list]:
    """Each turn's first chat request, in prompt tokens as the server counted them, and the turns' responses."""
    session_id, sizes, responses = f"paste-{uuid.uuid4()}", [], []
    for text in script if script is not None else three_pastes():
        before = len(fake_model.requests())
        responses.append(langflow.run(flow_id, text, session_id=session_id, tweaks=tweaks))
        sizes.append(next(r["prompt_tokens"] for r in fake_model.requests()[before:] if r["kind"] == "chat"))
    return sizes, responses


def test_three_pasted_logs_never_make_a_request_larger_than_the_stock_agent_s(langflow, fake_model):
    assert len(PASTE) >= 200_000
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    stock, _ = first_request_tokens(langflow, fake_model, stock_flow, {})
    ours, responses = first_request_tokens(
        langflow, fake_model, memory_flow, {agent_id: {"summarize_older_messages": True}}
    )

    assert all(o <= s + SUMMARY_ALLOWANCE for o, s in zip(ours, stock, strict=True)), list(
        zip(ours, stock, strict=True)
    )
    assert max(ours) < 2 * max(stock)
    folded_early = [answer_step_facts(r).get("folded_early_because") for r in responses if has_step(r)]
    assert any(why and "messages waiting over 32000 tokens" in why for why in folded_early)
    assert answer_of(responses[-1]).startswith("OK:")


def has_step(response) -> bool:
    try:
        answer_step_facts(response)
    except StopIteration:
        return False
    return True


BIG_PASTE = "Here is the dump:\n" + "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 8500
FACT = "Our project is PRJ-123 on the EU cluster."
QUESTION = "Which cluster and project were we on?"


@pytest.mark.expect_log("session_context_overflow")
def test_a_paste_larger_than_the_whole_window_fails_once_and_the_next_turn_answers(langflow, fake_model):
    assert len(BIG_PASTE) >= 600_000  # about 190,000 tokens: more than gpt-4o-mini's whole 128,000
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    on = {agent_id: {"summarize_older_messages": True}}
    stock_session, session_id = f"big-{uuid.uuid4()}", f"big-{uuid.uuid4()}"
    with behaving(fake_model, context_limit_tokens=128_000):
        stock = [
            langflow.run(stock_flow, t, session_id=stock_session, check=False) for t in (FACT, BIG_PASTE, QUESTION)
        ]
        ours = [
            langflow.run(memory_flow, t, session_id=session_id, tweaks=on, check=False)
            for t in (FACT, BIG_PASTE, QUESTION)
        ]

    assert [r.status_code for r in stock] == [200, 500, 500]  # the paste stays in its window: stuck
    assert [r.status_code for r in ours[:2]] == [200, 500]
    assert CONTEXT_TOO_LONG in ours[1].text  # the one clear message, no retry loop
    assert ours[2].status_code == 200, ours[2].text
    assert answer_of(ours[2]) == "From our conversation: PRJ-123, EU"


def test_a_llama_cpp_server_with_a_small_window_is_sent_no_more_than_the_stock_agent_sends(langflow, fake_model):
    stock_flow, stock_agent = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    declared = {"context_window_tokens": 8192}
    with behaving(fake_model, profile="llama-cpp-python", context_limit_tokens=8192):
        stock, _ = first_request_tokens(
            langflow, fake_model, stock_flow, {stock_agent: declared}, script=small_pastes()
        )
        ours, responses = first_request_tokens(
            langflow,
            fake_model,
            memory_flow,
            {agent_id: {"summarize_older_messages": True, **declared}},
            script=small_pastes(),
        )

    assert all(o <= s + SUMMARY_ALLOWANCE for o, s in zip(ours, stock, strict=True)), list(
        zip(ours, stock, strict=True)
    )
    assert max(ours) < 8192  # as llama.cpp counts: never an empty stream
    assert answer_of(responses[-1]) == "From our conversation: PRJ-123, EU"


def small_pastes() -> list[str]:
    """Three 5 KB logs, each over the 2,048 tokens that may wait in a 8,192-token window (2,246 tokens as Gemma 3's
    tokenizer counts them), then a question."""
    paste = "Here is the log:\n" + "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 70
    pastes = [f"{paste}\nWhat failed in paste {i}?" for i in range(1, 4)]
    return [FACT, *pastes, *[f"Short turn {i}." for i in range(1, 4)], QUESTION]
