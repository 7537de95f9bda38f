"""A model call after a tool ran, fitted to the window: the pure rules (``call_fit``), then the middleware
through LangChain's ``create_agent`` (what Langflow's Agent runs) against the bundled server."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread
from langflow_session_memory.services.session_memory.agent.call_fit_middleware import CallFitMiddleware
from langflow_session_memory.services.session_memory.rules import clipping, token_estimate
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_ACKNOWLEDGEMENT, summary_text
from langflow_session_memory.services.session_memory.rules.call_fit import (
    CLIP_MARKER,
    after_tool,
    compacted,
    fit_call,
    retry_target,
    water_level,
)
from langflow_session_memory.services.session_memory.rules.context_size import ContextTooLongError, window_named_in
from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT
from langflow_session_memory.services.session_memory.rules.token_estimate import message_tokens, messages_tokens
from tests.services.test_overflow_signals import OVERFLOW_TEXTS
from tests.services.token_samples import url_page_table

SUMMARY = summary_text("Key facts:\n- The project is PRJ-123 on the EU cluster.\nConversation so far:\n- greetings")
HEAD = "Build 4711 failed at step compile."
HUGE = HEAD + "\n" + "compile: warning W1 in module core\n" * 6000 + "exit status 2"


def call(tool_id: str, name: str = "read_build_log") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": tool_id, "name": name, "args": {"build_id": "4711"}}])


def history(turns: int) -> list:
    pairs = [
        [HumanMessage(f"Earlier question {i} " * 20), AIMessage(f"Earlier answer {i} " * 20)] for i in range(turns)
    ]
    return [HumanMessage(SUMMARY), AIMessage(SUMMARY_ACKNOWLEDGEMENT), *(m for pair in pairs for m in pair)]


def turn(*results: str) -> list:
    """The user's message, then one model call per result, each followed by its tool's result."""
    messages = [HumanMessage("Read the build log with read_build_log and tell me why it failed.")]
    for index, result in enumerate(results):
        messages += [call(f"call_{index}"), ToolMessage(content=result, tool_call_id=f"call_{index}")]
    return messages


def test_a_call_that_fits_is_sent_as_it_is():
    messages = [*history(3), *turn("short result")]
    fitted = fit_call(messages, fixed_tokens=100, limit=10_000, result_cap=1_000, summary=SUMMARY)
    assert fitted.messages == messages
    assert not fitted.reduction.changed


def test_a_huge_newest_result_leaves_out_the_history_then_is_clipped_to_fit_head_and_tail_kept():
    messages = [*history(5), *turn(HUGE)]
    fitted = fit_call(messages, fixed_tokens=300, limit=4_000, result_cap=400, summary=SUMMARY)

    assert fitted.size <= 4_000
    assert fitted.messages[:2] == [HumanMessage(SUMMARY), AIMessage(SUMMARY_ACKNOWLEDGEMENT)]
    assert fitted.messages[2:4] == messages[12:14]  # the user's message and the tool call, whole
    result = fitted.messages[-1]
    assert result.content.startswith(HEAD)
    assert result.content.endswith("exit status 2")
    assert f"of {len(HUGE):,} characters of this tool result were cut here" in result.content
    assert "call the tool again with a narrower request" in result.content
    assert fitted.reduction.history_left_out == 10
    assert fitted.reduction.results_clipped == 1
    assert fitted.reduction.result_tokens_before == message_tokens(messages[-1])


def test_a_result_already_read_is_clipped_to_its_share_and_the_newest_is_kept_whole():
    read, newest = "r" * 20_000, "n" * 2_000
    fitted = fit_call(
        [*history(1), *turn(read, newest)], fixed_tokens=0, limit=100_000, result_cap=1_000, summary=SUMMARY
    )
    assert message_tokens(fitted.messages[-3]) <= 1_000 < message_tokens(ToolMessage(content=read, tool_call_id="x"))
    assert fitted.messages[-1].content == newest
    assert fitted.reduction.history_left_out == 0
    assert fitted.reduction.results_clipped == 1


def test_without_a_summary_the_history_is_left_out_whole():
    messages = [HumanMessage("old " * 3000), AIMessage("old answer"), *turn("r" * 400)]
    fitted = fit_call(messages, fixed_tokens=0, limit=1_000, result_cap=None, summary=None)
    assert fitted.messages[0] == messages[2]  # the user's message opens the call
    assert fitted.reduction.history_left_out == 2
    assert fitted.reduction.results_clipped == 0


def test_parallel_results_are_clipped_to_one_size_the_small_one_untouched():
    parallel = AIMessage(
        content="",
        tool_calls=[
            {"id": "a", "name": "read_build_log", "args": {}},
            {"id": "b", "name": "read_test_report", "args": {}},
            {"id": "c", "name": "read_owner", "args": {}},
        ],
    )
    messages = [
        HumanMessage("Use read_build_log, read_test_report and read_owner at once."),
        parallel,
        ToolMessage(content=HUGE, tool_call_id="a"),
        ToolMessage(content="t" * 30_000, tool_call_id="b"),
        ToolMessage(content="Owner: Dana.", tool_call_id="c"),
    ]
    fitted = fit_call(messages, fixed_tokens=0, limit=6_000, result_cap=None, summary=None)
    assert fitted.size <= 6_000
    assert [m.tool_call_id for m in fitted.messages[2:]] == ["a", "b", "c"]
    assert fitted.messages[-1].content == "Owner: Dana."
    assert fitted.reduction.results_clipped == 2
    assert abs(message_tokens(fitted.messages[2]) - message_tokens(fitted.messages[3])) <= 1


tool_turns = st.lists(st.integers(min_value=1, max_value=60_000), min_size=1, max_size=5)


@given(results=tool_turns, earlier=st.integers(0, 6), limit=st.integers(500, 20_000), cap=st.integers(100, 5_000))
def test_fitting_keeps_every_call_with_its_result_and_fits_whenever_the_turn_s_own_part_can(
    results, earlier, limit, cap
):
    messages = [*history(earlier), *turn(*("x" * size for size in results))]
    fitted = fit_call(messages, fixed_tokens=200, limit=limit, result_cap=cap, summary=SUMMARY)

    start = len(fitted.messages) - (1 + 2 * len(results))
    kept_turn = fitted.messages[start:]
    assert [type(m) for m in kept_turn] == [type(m) for m in turn(*results_as_text(results))]
    assert [getattr(m, "tool_call_id", None) for m in kept_turn] == [
        getattr(m, "tool_call_id", None) for m in messages[-len(kept_turn) :]
    ]
    assert all(
        message_tokens(a) <= message_tokens(b) for a, b in zip(kept_turn, messages[-len(kept_turn) :], strict=True)
    )
    floor = (
        200 + messages_tokens(history(0)) + messages_tokens([m for m in kept_turn if not isinstance(m, ToolMessage)])
    )
    if floor + CALL_FIT.min_clipped_tokens * len(results) <= limit:
        assert fitted.size <= limit
    assert fitted.size <= fitted.reduction.size_before


def results_as_text(results: list[int]) -> list[str]:
    return ["x" * size for size in results]


@given(sizes_=st.lists(st.integers(1, 100_000), min_size=1, max_size=8), excess=st.integers(1, 200_000))
def test_the_water_level_frees_enough_unless_it_reached_its_floor(sizes_, excess):
    level = water_level(sizes_, excess)
    freed = sum(size - level for size in sizes_ if size > level)
    assert freed >= excess or level == CALL_FIT.min_clipped_tokens
    assert (
        level == CALL_FIT.min_clipped_tokens or sum(size - (level + 1) for size in sizes_ if size > level + 1) < excess
    )


@given(text=st.text(min_size=0, max_size=5_000), cap=st.integers(60, 2_000))
def test_a_clipped_text_fits_its_cap_and_keeps_its_start(text, cap):
    clipped = clipping.clipped(text, cap, CLIP_MARKER)
    assert token_estimate.estimate_tokens(clipped) <= cap
    kept = clipped.split("\n[... ")[0]
    assert text.startswith(kept)


@given(text=st.text(alphabet=st.sampled_from("ab1.\n\t  "), max_size=400))
def test_compacting_keeps_every_word_in_order_and_every_line_and_never_grows(text):
    once = compacted(text)
    assert once.split() == text.split()
    assert len(once) <= len(text)
    assert compacted(once) == once
    assert [line.split() for line in once.split("\n") if line.strip()] == [
        line.split() for line in text.split("\n") if line.strip()
    ]


def test_a_padded_dataframe_clipped_keeps_the_page_s_first_line_not_its_padding():
    """Issue 39: the URL tool's DataFrame as LangChain hands it to the model: the header padded to the page's
    width. Clipped by characters alone, the head kept was padding and the page's first line was gone."""
    table = url_page_table()
    padded = ToolMessage(content=table, tool_call_id="t1")
    fitted = fit_call(
        [HumanMessage("Read the release notes."), call("t1", "fetch_content"), padded],
        fixed_tokens=0,
        limit=1_000,
        result_cap=None,
        summary=None,
    )
    head = fitted.messages[-1].content[:300]
    assert "Release 7.2 ships on 3 March" in head
    assert (
        "Release 7.2 ships on 3 March" not in clipping.clipped(table, 1_000, CLIP_MARKER)[:300]
    )  # what clipping alone kept


@given(refused=st.integers(1, 1_000_000), limit=st.one_of(st.none(), st.integers(1, 1_000_000)))
def test_a_retry_is_always_smaller_than_the_refused_call(refused, limit):
    assert retry_target(refused, limit) < refused


def test_the_window_is_read_from_the_refusals_that_state_it():
    named = {server: window_named_in(RuntimeError(text)) for server, _source, text in OVERFLOW_TEXTS}
    assert named["OpenAI chat completions"] == 128_000
    assert named["Anthropic"] == 200_000
    assert named["Mistral"] == 32_768
    assert named["Cerebras"] == 8_192
    assert named["OpenAI-compatible gateway"] == 272_000
    assert window_named_in(RuntimeError("prompt is too long")) is None


def test_the_first_call_of_a_turn_is_not_after_a_tool():
    assert not after_tool([*history(2), HumanMessage("hi")])
    assert after_tool(turn("result"))


@tool
def read_build_log(build_id: str) -> str:
    """The build log of a build."""
    return HUGE * 3


async def ask(
    server, *, window: int | None, declared: int | None, reports: list, question: str = "Why?", earlier: int = 2
) -> dict:
    """One Agent turn through create_agent with the middleware: read_build_log, then the answer."""
    llm = ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=server.base_url)
    fit = CallFitMiddleware(
        window=window,
        declared_window=declared,
        result_share=0.1,
        summary=lambda: SUMMARY,
        report=lambda reduction, retry: reports.append((reduction, retry)),
    )
    agent = create_agent(model=llm, tools=[read_build_log], middleware=[fit])
    messages = [*history(earlier), HumanMessage(f"{question} Read it with read_build_log.")]
    result = await agent.ainvoke({"messages": messages})
    return result["messages"][-1]


@pytest.fixture
def small_window_server():
    with run_in_thread(FakeModelConfig(context_limit_tokens=8_000)) as running:
        yield running


async def test_with_the_window_known_the_call_after_a_huge_result_is_fitted_before_it_is_sent(small_window_server):
    reports = []
    answer = await ask(small_window_server, window=8_000, declared=8_000, reports=reports)
    assert answer.content == f"From the tools: {HEAD}"
    assert [r["status"] for r in small_window_server.requests()] == [200, 200]
    [(reduction, retry)] = reports
    assert not retry
    assert reduction.results_clipped == 1
    assert reduction.size_after <= 7_200


async def test_a_refusal_after_a_tool_is_retried_once_inside_the_window_the_provider_named(small_window_server):
    reports = []
    answer = await ask(small_window_server, window=128_000, declared=None, reports=reports)
    assert answer.content == f"From the tools: {HEAD}"
    assert [r["status"] for r in small_window_server.requests()] == [200, 400, 200]
    (_, before_sending), (reduction, retry) = reports  # fitted to the model profile's 128,000, then to 8,000
    assert (before_sending, retry) == (False, True)
    assert reduction.history_left_out == 4
    assert reduction.size_after <= 7_200


async def test_a_call_that_cannot_fit_even_reduced_ends_with_the_clear_message(small_window_server):
    question = "Why did the build fail? " * 320  # about 2,000 tokens: the first call fits, the next cannot
    small_window_server.config.context_limit_tokens = 2_100
    with pytest.raises(ContextTooLongError, match="no longer fits"):
        await ask(small_window_server, window=None, declared=None, reports=[], question=question, earlier=0)
    assert [r["status"] for r in small_window_server.requests()] == [200, 400, 400]
