"""The request shapes ``make eval`` simulates beside the one sent: pure rewrites and replays of recorded requests."""

from benchmarks.cache_options import (
    ANTHROPIC_OPTIONS,
    OPENAI_OPTIONS,
    SUMMARY_OPENING,
    anthropic_replay,
    billed,
    folds_reusing_the_chat_prefix,
    langchain_middleware_and_summary,
    openai_replay,
    option_ratios,
    without_breakpoints,
)
from langflow_session_memory.bundled_server.fake_anthropic import breakpoints_marked
from langflow_session_memory.services.session_memory.summary.prompt import SUMMARY_INSTRUCTIONS

SYSTEM = {"role": "system", "content": "You are a helpful assistant. " * 200}  # about 1,500 tokens
SUMMARY = {"role": "user", "content": SUMMARY_OPENING + "Key facts:\n- PRJ-123\nConversation so far:\n- greetings"}


def chat(ts: float, *messages: dict) -> dict:
    return {"kind": "chat", "ts": ts, "body": {"model": "gpt-4o-mini", "messages": [SYSTEM, *messages]}}


def fold(ts: float) -> dict:
    transcript = "Current notes:\n(none yet)\n\nNext messages:\nUser: our project is PRJ-123\nMachine: noted, PRJ-123"
    messages = [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": transcript}]
    return {"kind": "summary", "ts": ts, "body": {"model": "gpt-4o-mini", "messages": messages}}


QUESTION = {"role": "user", "content": "our project is PRJ-123"}
ANSWER = {"role": "assistant", "content": "noted, PRJ-123"}
NEXT = {"role": "user", "content": "and the cluster is EU"}


def test_a_request_that_repeats_the_previous_one_is_read_from_the_cache_by_openai_s_rules():
    first, second = openai_replay([chat(0, QUESTION), chat(1, QUESTION, ANSWER, NEXT)])
    assert first.cache_read == 0
    assert second.cache_read >= 1024
    assert (second.cache_read - 1024) % 128 == 0


def test_a_fold_rewritten_to_reuse_the_chat_prefix_is_that_request_then_the_answer_then_the_instructions():
    records = [chat(0, QUESTION), fold(1)]

    _chat, rewritten = folds_reusing_the_chat_prefix(records)

    messages = rewritten["body"]["messages"]
    assert messages[:2] == [SYSTEM, QUESTION]
    assert messages[2] == {"role": "assistant", "content": "noted, PRJ-123"}
    assert messages[3]["content"].startswith(SUMMARY_INSTRUCTIONS)
    assert "first 2 messages" in messages[3]["content"]
    assert rewritten["kind"] == "summary"
    assert openai_replay(folds_reusing_the_chat_prefix(records))[1].cache_read >= 1024
    assert openai_replay(records)[1].cache_read == 0  # as sent, the fold shares no prefix with the chat


def claude(ts: float, *messages: dict, kind: str = "chat") -> dict:
    """A request as the bundled server logs one to its Anthropic route: the wire body, sent with no breakpoint."""
    system = SYSTEM["content"] if kind == "chat" else SUMMARY_INSTRUCTIONS
    wire = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 1024, "system": system, "messages": list(messages)}
    if kind == "chat":
        wire["tools"] = [{"name": "search_earlier_messages", "input_schema": {"type": "object"}}]
    return {"kind": kind, "ts": ts, "wire": wire}


def test_the_switch_s_breakpoints_are_the_last_tool_the_system_prompt_the_summary_and_the_last_block():
    sent = langchain_middleware_and_summary(claude(0, SUMMARY, QUESTION)["wire"])

    assert breakpoints_marked(sent) == ["tool search_earlier_messages", "system", "message 0", "top level"]
    assert breakpoints_marked(without_breakpoints(sent)) == []


def test_without_breakpoints_anthropic_caches_nothing_and_with_them_the_next_turn_reads_the_last_one():
    records = [claude(0, SUMMARY, QUESTION), claude(1, SUMMARY, QUESTION, ANSWER, NEXT)]
    nothing = anthropic_replay(records, lambda body: body)
    assert all(served.cache_read == served.cache_write == 0 for served in nothing)

    first, second = anthropic_replay(records, langchain_middleware_and_summary)

    assert (first.cache_read, first.cache_write) == (0, first.total)
    assert second.cache_read == first.total  # the previous request's last block
    assert billed([second], "anthropic") < second.total


def test_a_fold_request_is_never_marked():
    fold_request = claude(0, {"role": "user", "content": "Current notes: (none yet)"}, kind="summary")

    [served] = anthropic_replay([fold_request, fold_request], langchain_middleware_and_summary)[1:]

    assert served.cache_read == served.cache_write == 0


def test_every_option_is_a_ratio_against_the_stock_agent_s_requests_as_sent_at_its_rate():
    sessions = {
        "stock": [chat(0, QUESTION), chat(1, NEXT)],
        "ours": [chat(0, QUESTION), chat(1, QUESTION, ANSWER, NEXT)],
    }
    ratios = option_ratios(OPENAI_OPTIONS, sessions, "stock")
    assert ratios[("as sent", "gpt-5")]["stock"] == 1.0
    # without a fold to rewrite, that option is the requests as sent
    assert ratios[("folds reuse the chat prefix", "gpt-5")] == ratios[("as sent", "gpt-5")]

    on_claude = {
        "stock": [claude(0, QUESTION), claude(1, NEXT)],
        "ours": [claude(0, QUESTION), claude(1, QUESTION, ANSWER, NEXT)],
    }
    ratios = option_ratios(ANTHROPIC_OPTIONS, on_claude, "stock")
    assert ratios[("no breakpoints", "anthropic")]["stock"] == 1.0
    assert ratios[("LangChain's middleware + summary", "anthropic")]["ours"] < 1.0  # the 2nd turn reads the 1st
