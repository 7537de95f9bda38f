"""The fold request: its instructions, the transcript of a batch, and its cut on a small window."""

from langchain_openai import ChatOpenAI

from langflow_session_memory.services.session_memory.summary.model_call import (
    FOLD_OUTPUT_TOKENS,
    output_budget,
)
from langflow_session_memory.services.session_memory.summary.prompt import (
    SUMMARY_CHARACTER_LIMIT,
    SUMMARY_INSTRUCTIONS,
    ChatLine,
    fold_budget,
    fold_request,
    transcript_chunks,
)
from tests.services.summaries import BATCH


def test_the_fold_request_clips_a_previous_summary_over_the_cap():
    previous = "x" * (SUMMARY_CHARACTER_LIMIT + 6_000)
    sent = fold_request(previous, BATCH)[-1].content
    assert "x" * 3000 + " [... 6000 more characters ...] " + "x" * 1000 in sent
    assert "x" * (SUMMARY_CHARACTER_LIMIT + 1) not in sent


def test_a_pasted_log_keeps_its_head_and_its_tail_in_the_fold_request():
    log = "start of the log\n" + "noise " * 5_000 + "\nexit status 2: disk full"
    sent = fold_request("", [ChatLine("User", log)])[-1].content
    assert "start of the log" in sent
    assert "exit status 2: disk full" in sent
    assert "more characters ...]" in sent


def test_the_format_is_described_without_sample_lines_a_small_model_would_copy():
    # Qwen2.5-Coder 0.5B returned these sample lines of the earlier prompt as its summary.
    assert "one short line per fact (who, what" not in SUMMARY_INSTRUCTIONS
    assert not [line for line in SUMMARY_INSTRUCTIONS.splitlines() if line.startswith("- ")]


def test_the_fold_instructions_carry_nothing_for_tests():
    assert "[" not in SUMMARY_INSTRUCTIONS
    assert "SESSION-MEMORY" not in SUMMARY_INSTRUCTIONS.upper()


def test_a_small_context_window_leaves_room_for_the_summary():
    budget = fold_budget(output_budget(ChatOpenAI(model="a-local-model", api_key="sk-local")), 2048)
    assert budget.output_tokens == 512
    assert budget.transcript_tokens + budget.output_tokens < 2048 * 0.75
    assert fold_budget(FOLD_OUTPUT_TOKENS, None).transcript_tokens is None


def test_long_messages_on_a_small_window_fold_in_several_requests_in_order():
    long_batch = [ChatLine("User", f"message {i} " + "word " * 150) for i in range(20)]
    chunks = transcript_chunks(long_batch, fold_budget(FOLD_OUTPUT_TOKENS, 2048))
    assert len(chunks) > 1
    assert [line.text.split()[1] for chunk in chunks for line in chunk] == [str(i) for i in range(20)]
    huge = transcript_chunks([ChatLine("User", "x" * 50_000)], fold_budget(FOLD_OUTPUT_TOKENS, 2048))
    assert len(huge) == 1
    assert len(huge[0][0].text) < 3000
