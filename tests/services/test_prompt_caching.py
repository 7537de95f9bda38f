"""Cache breakpoints on the Agent's requests to Claude: where they go, how many, and what Anthropic then bills.

The requests go through LangChain's ``create_agent`` (what Langflow's Agent runs) and langchain-anthropic to the
bundled server's Messages API, which refuses what Anthropic refuses and caches by its rules.
"""

from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from langflow_session_memory.bundled_server.fake_anthropic import breakpoints_marked, cache_blocks
from langflow_session_memory.services.session_memory.agent.prompt_caching import (
    CACHE_CONTROL,
    MAX_BREAKPOINTS,
    SummaryBreakpoint,
    breakpoints,
    cache_breakpoints,
)
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_ACKNOWLEDGEMENT, summary_text
from tests.claude import SONNET, claude, search_earlier_messages

SUMMARY = summary_text("Key facts:\n- The project is PRJ-123 on the EU cluster.\nConversation so far:\n- greetings")
SYSTEM_PROMPT = "You are a helpful assistant. " * 250  # about 1,750 tokens: over Sonnet's 1,024-token minimum
UNSERVED_CLAUDE = ChatAnthropic(model=SONNET, api_key="sk-ant-test")  # for requests that never reach a server


async def ask(claude_server, messages, summary: str | None = SUMMARY) -> dict:
    """One Agent turn on Claude with the switch's middleware; the request as the server received it."""
    llm = claude(claude_server)
    agent = create_agent(
        model=llm,
        tools=[search_earlier_messages],
        system_prompt=SYSTEM_PROMPT,
        middleware=cache_breakpoints(llm, lambda: summary),
    )
    before = len(claude_server.requests())
    await agent.ainvoke({"messages": messages})
    [request] = claude_server.requests()[before:]
    assert request["status"] == 200, request
    return request


def test_only_a_claude_model_gets_breakpoints():
    assert cache_breakpoints(ChatOpenAI(model="gpt-4o-mini", api_key="sk-test"), lambda: SUMMARY) == []
    assert len(cache_breakpoints(UNSERVED_CLAUDE, lambda: SUMMARY)) == 2


async def test_claude_gets_the_tools_the_system_prompt_the_summary_and_the_last_block_marked(claude_server):
    messages = [HumanMessage(SUMMARY), AIMessage(SUMMARY_ACKNOWLEDGEMENT), HumanMessage("Which cluster were we on?")]

    request = await ask(claude_server, messages)

    assert breakpoints_marked(request["wire"]) == ["tool search_earlier_messages", "system", "message 0", "top level"]
    assert request["wire"]["messages"][0]["content"][0] == {
        "type": "text",
        "text": SUMMARY,
        "cache_control": CACHE_CONTROL,
    }


async def test_without_a_summary_the_history_is_sent_as_langchain_s_middleware_marks_it(claude_server):
    messages = [HumanMessage("Our project is PRJ-123."), AIMessage("OK"), HumanMessage("Please go on.")]

    request = await ask(claude_server, messages, summary=None)

    assert breakpoints_marked(request["wire"]) == ["tool search_earlier_messages", "system", "top level"]


async def test_the_next_turn_reads_the_whole_previous_request_from_claude_s_cache(claude_server):
    first_turn = [HumanMessage(SUMMARY), AIMessage(SUMMARY_ACKNOWLEDGEMENT), HumanMessage("Hello there.")]
    first = await ask(claude_server, first_turn)
    second = await ask(claude_server, [*first_turn, AIMessage("OK: Hello there."), HumanMessage("And now?")])

    assert (first["cached_tokens"], first["cache_write_tokens"]) == (0, first["prompt_tokens"])
    assert second["cached_tokens"] == first["prompt_tokens"]
    assert second["cache_write_tokens"] == second["prompt_tokens"] - first["prompt_tokens"]


async def test_a_fold_keeps_the_tools_and_the_system_prompt_read_from_the_cache(claude_server):
    question = [AIMessage(SUMMARY_ACKNOWLEDGEMENT), HumanMessage("Hello there.")]
    first = await ask(claude_server, [HumanMessage(SUMMARY), *question])
    refolded = SUMMARY.replace("greetings", "greetings, then a hello")

    after_fold = await ask(claude_server, [HumanMessage(refolded), *question], summary=refolded)

    tools_and_system = sum(b.tokens for b in cache_blocks(after_fold["wire"]) if b.content[0] in ("tool", "system"))
    assert first["cache_write_tokens"] == first["prompt_tokens"]
    assert after_fold["cached_tokens"] == tools_and_system > 1024


def request_with(marks: int, *, summary: bool) -> ModelRequest:
    """A request already carrying ``marks`` breakpoints on earlier user messages, with or without the summary."""
    earlier = [
        HumanMessage([{"type": "text", "text": f"document {i}", "cache_control": CACHE_CONTROL}]) for i in range(marks)
    ]
    messages = [*earlier, *([HumanMessage(SUMMARY)] if summary else []), HumanMessage("question")]
    return ModelRequest(model=UNSERVED_CLAUDE, messages=messages)


@given(marks=st.integers(0, 6), summary=st.booleans(), system=st.booleans(), settings=st.booleans())
def test_the_summary_is_marked_only_where_the_request_stays_within_four_breakpoints(marks, summary, system, settings):
    request = request_with(marks, summary=summary)
    request = request.override(
        system_message=SystemMessage([{"type": "text", "text": "be brief", "cache_control": CACHE_CONTROL}])
        if system
        else None,
        model_settings={"cache_control": CACHE_CONTROL} if settings else {},
    )
    sent = []

    SummaryBreakpoint(lambda: SUMMARY).wrap_model_call(request, sent.append)

    [final] = sent
    before = marks + system + settings
    added = summary and before < MAX_BREAKPOINTS
    assert breakpoints(final) == before + added
    assert [m.text for m in final.messages] == [m.text for m in request.messages]  # the text never changes


def test_a_failure_to_mark_the_summary_sends_the_request_unmarked_and_says_so(captured_logs):
    def broken_summary() -> str:
        raise ValueError(SUMMARY)  # the error's text is the summary: it must not reach the log

    request = request_with(0, summary=True)
    sent = []

    SummaryBreakpoint(broken_summary).wrap_model_call(request, sent.append)

    assert sent == [request]
    [logged] = [log for log in captured_logs if log["event"].startswith("session_memory_cache_breakpoint_failed")]
    assert logged["log_level"] == "error"
    assert "PRJ-123" not in logged["event"]
