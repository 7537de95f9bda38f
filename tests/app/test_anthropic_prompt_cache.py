"""Claude through the real app: with the switch on, the Agent marks Anthropic cache breakpoints and each turn
reads the previous one from the provider's cache; with it off, the stock Agent's requests, no breakpoint.

Langflow's Anthropic provider (langchain-anthropic) talks to the bundled server's Messages API, which refuses
a request as Anthropic does (more than 4 breakpoints included) and reports what it read from its cache and
wrote to it (``bundled_server/fake_anthropic``).
"""

import re
import uuid
from itertools import pairwise

import pytest

from langflow_session_memory.bundled_server.fake_anthropic import breakpoints_marked
from langflow_session_memory.bundled_server.prompt_cache import anthropic_minimum_tokens
from tests.app.langflow_client import BATCH, CLAUDE
from tests.app.test_search_earlier_messages import LOCKER_FACT, QUESTION, switched_on
from tests.app.test_session_memory_agent import FACT, talk

N_MESSAGES = 4
TOOLS_SYSTEM_AND_LAST_BLOCK = ["tool search_earlier_messages", "system", "top level"]
# What is marked does not depend on the database: these run on SQLite only (the database paths run on both with
# the OpenAI provider), which keeps the suite's time.
pytestmark = pytest.mark.parametrize("langflow", ["sqlite"], indirect=True)


def test_switch_on_marks_breakpoints_and_each_turn_reads_the_one_before_from_claude_s_cache(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES, model=CLAUDE)
    session_id = f"claude-{uuid.uuid4()}"
    on = switched_on(agent_id)
    texts = [LOCKER_FACT.format(team=team) for team in range(1, 13)] + [QUESTION, "Thanks, that is all."]
    fake_model.clear_prompt_cache()  # an earlier test may have sent the same first turn
    firsts, start = [], len(fake_model.requests())  # each turn's first request to the model
    for text_ in texts:
        before, log_start = len(fake_model.requests()), len(langflow.log_lines())
        langflow.run(flow_id, text_, session_id=session_id, tweaks=on)
        firsts.append(next(r for r in fake_model.requests()[before:] if r["kind"] == "chat"))
    turn_requests = fake_model.requests()[before:]
    requests = fake_model.requests()[start:]
    chats = [r for r in requests if r["kind"] == "chat"]
    folds = [r for r in requests if r["kind"] == "summary"]

    assert {(r["api"], r["status"]) for r in requests} == {("anthropic", 200)}  # no fifth breakpoint refused
    assert folds
    assert all(breakpoints_marked(fold["wire"]) == [] for fold in folds)  # a fold is never read again
    with_summary = [r for r in chats if r["body"]["messages"][1]["content"].startswith("Notes on the earlier part")]
    assert with_summary
    assert all(
        breakpoints_marked(r["wire"]) == [*TOOLS_SYSTEM_AND_LAST_BLOCK[:2], "message 0", "top level"]
        for r in with_summary
    )
    assert all(breakpoints_marked(r["wire"]) == TOOLS_SYSTEM_AND_LAST_BLOCK for r in chats if r not in with_summary)
    assert any(r["tool_query"] for r in chats)  # a search, and its follow-up, are in the comparison

    # Between two folds a turn reads all of the previous turn's first request from the cache (once it is long
    # enough to be cached at all).
    minimum, compared = anthropic_minimum_tokens(CLAUDE[0]["name"]), 0
    for earlier, later in pairwise(firsts):
        between = requests[requests.index(earlier) : requests.index(later)]
        if any(r["kind"] == "summary" for r in between):
            assert later["cached_tokens"] < earlier["prompt_tokens"]
            continue
        read = earlier["prompt_tokens"] if earlier["prompt_tokens"] >= minimum else 0
        assert later["cached_tokens"] == read
        assert later["cache_write_tokens"] == (
            later["prompt_tokens"] - read if later["prompt_tokens"] >= minimum else 0
        )
        compared += bool(read)
    # Every pair but the first turns (too short to be cached) and those a fold came between: one at the default.
    folds_between = (2 * (len(firsts) - 1) - N_MESSAGES) // BATCH
    assert compared >= len(firsts) - 3 - folds_between

    # The turn reports what the provider read and wrote; Langflow's usage has no field for either.
    [line] = [line for line in langflow.log_lines()[log_start:] if "session_memory_turn " in line]
    read = int(re.search(r" cached_input_tokens=(\d+)", line).group(1))
    written = int(re.search(r" cache_write_input_tokens=(\d+)", line).group(1))
    turn_chats = [r for r in turn_requests if r["kind"] == "chat"]
    assert read == sum(r["cached_tokens"] for r in turn_chats) > 0
    assert written == sum(r["cache_write_tokens"] for r in turn_chats) > 0


def test_switch_off_sends_claude_exactly_the_stock_agents_requests_without_a_breakpoint(langflow, fake_model):
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=3, model=CLAUDE)
    memory_flow, _ = langflow.create_agent_flow(session_memory=True, n_messages=3, model=CLAUDE)
    sent = {}
    for flow_id in (stock_flow, memory_flow):
        session_id = f"claude-off-{uuid.uuid4()}"
        before = len(fake_model.requests())
        langflow.run(flow_id, FACT, session_id=session_id)
        talk(langflow, flow_id, session_id, 4)
        sent[flow_id] = [request["wire"] for request in fake_model.requests()[before:]]

    assert len(sent[stock_flow]) == 5
    assert sent[memory_flow] == sent[stock_flow]
    assert all(breakpoints_marked(wire) == [] for wire in sent[memory_flow])


@pytest.mark.expect_log("session_context_overflow")
def test_a_claude_turn_refused_as_too_long_is_retried_with_its_new_summary_marked(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=100, model=CLAUDE)
    session_id = f"claude-overflow-{uuid.uuid4()}"
    on = switched_on(agent_id)
    for turn in range(6):
        langflow.run(
            flow_id, f"Turn {turn}, cluster EU: " + "a long line of notes " * 55, session_id=session_id, tweaks=on
        )
    fake_model.config.context_limit_tokens = 2000  # the session no longer fits; no window was declared
    try:
        before = len(fake_model.requests())
        langflow.run(flow_id, "Which cluster were we on?", session_id=session_id, tweaks=on)
        chats = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    finally:
        fake_model.config.context_limit_tokens = None

    refused, retried = chats
    assert (refused["status"], retried["status"]) == (400, 200)
    assert retried["body"]["messages"][1]["content"].startswith("Notes on the earlier part")
    assert breakpoints_marked(retried["wire"]) == [*TOOLS_SYSTEM_AND_LAST_BLOCK[:2], "message 0", "top level"]
