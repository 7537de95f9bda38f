"""The request shapes ``make eval`` simulates beside the one sent: pure rewrites and replays of recorded requests."""

from benchmarks.cache_options import (
    NOTES_OPENING,
    anthropic_replay,
    billed,
    folds_reusing_the_chat_prefix,
    openai_replay,
    option_ratios,
)
from langflow_session_memory.services.session_memory.summarizer import SUMMARY_INSTRUCTIONS

SYSTEM = {"role": "system", "content": "You are a helpful assistant. " * 200}  # about 1,500 tokens
NOTES = {"role": "user", "content": NOTES_OPENING + "Key facts:\n- PRJ-123\nConversation so far:\n- greetings"}


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


def test_without_breakpoints_anthropic_caches_nothing_and_with_them_the_next_turn_reads_the_last_one():
    records = [chat(0, NOTES, QUESTION), chat(1, NOTES, QUESTION, ANSWER, NEXT)]
    assert all(served.cache_read == served.cache_write == 0 for served in anthropic_replay(records, breakpoints=False))
    first, second = anthropic_replay(records, breakpoints=True)
    assert (first.cache_read, first.cache_write > 0) == (0, True)
    assert second.cache_read == first.cache_write  # the previous request's last breakpoint
    assert billed([second], "anthropic") < second.total


def test_every_option_is_a_ratio_against_today_s_stock_agent_at_its_rate():
    sessions = {
        "stock": [chat(0, QUESTION), chat(1, NEXT)],
        "ours": [chat(0, QUESTION), chat(1, QUESTION, ANSWER, NEXT)],
    }
    ratios = option_ratios(sessions, "stock")
    assert ratios[("as sent (OpenAI)", "gpt-5")]["stock"] == 1.0
    assert ratios[("Anthropic, no breakpoints", "anthropic")]["stock"] == 1.0
    # without a fold to rewrite, that option is the requests as sent
    assert ratios[("folds reuse the chat prefix (OpenAI)", "gpt-5")] == ratios[("as sent (OpenAI)", "gpt-5")]
    assert ratios[("Anthropic, breakpoints", "anthropic")]["stock"] < 1.0  # against none: reads from the 2nd turn
