"""The fold request: its instructions, the transcript of a batch, and its cut on a small window."""

from langchain_openai import ChatOpenAI

from langflow_session_memory.services.session_memory.rules.policy import SUMMARY
from langflow_session_memory.services.session_memory.rules.token_estimate import estimate_tokens
from langflow_session_memory.services.session_memory.summary.model_call import output_budget
from langflow_session_memory.services.session_memory.summary.prompt import (
    FACT_QUESTION,
    SUMMARY_INSTRUCTIONS,
    ChatLine,
    fold_budget,
    fold_request,
    speaker,
    transcript_chunks,
)
from tests.services.summaries import BATCH


def test_the_fold_request_holds_the_batch_alone_and_asks_about_it_after_it():
    system, human = fold_request(BATCH)
    assert system.content == SUMMARY_INSTRUCTIONS
    assert human.content.startswith("Conversation:\nUser: we deploy project PRJ-123")
    assert human.content.endswith(FACT_QUESTION)  # a small model follows what it read last
    assert "Current notes" not in human.content  # shown its notes, Qwen 1.5B copied them back fold after fold


def test_a_pasted_log_keeps_its_head_and_its_tail_in_the_fold_request():
    log = "start of the log\n" + "noise " * 5_000 + "\nexit status 2: disk full"
    sent = fold_request([ChatLine("User", log)])[-1].content
    assert "start of the log" in sent
    assert "exit status 2: disk full" in sent
    assert "more characters ...]" in sent


def test_the_format_is_described_without_sample_lines_a_small_model_would_copy():
    # Qwen2.5-Coder 0.5B returned these sample lines of the earlier prompt as its summary.
    for text in (SUMMARY_INSTRUCTIONS, FACT_QUESTION):
        assert "one short line per fact (who, what" not in text
        assert not [line for line in text.splitlines() if line.startswith("- ")]


def test_the_fold_instructions_carry_nothing_for_tests():
    for text in (SUMMARY_INSTRUCTIONS, FACT_QUESTION):
        assert "[" not in text
        assert "SESSION-MEMORY" not in text.upper()


def test_a_small_context_window_leaves_room_for_the_summary():
    budget = fold_budget(output_budget(ChatOpenAI(model="a-local-model", api_key="sk-local")), 2048)
    assert budget.output_tokens == 512
    assert budget.transcript_tokens + budget.output_tokens < 2048 * 0.75
    assert fold_budget(SUMMARY.output_tokens, None).transcript_tokens is None


def test_long_messages_on_a_small_window_fold_in_several_requests_in_order():
    long_batch = [ChatLine("User", f"message {i} " + "word " * 150) for i in range(20)]
    chunks = transcript_chunks(long_batch, fold_budget(SUMMARY.output_tokens, 2048))
    assert len(chunks) > 1
    assert [line.text.split()[1] for chunk in chunks for line in chunk] == [str(i) for i in range(20)]
    budget = fold_budget(SUMMARY.output_tokens, 2048)
    huge = transcript_chunks([ChatLine("User", "x" * 50_000)], budget)
    assert len(huge) == 1
    clipped = huge[0][0].text
    assert estimate_tokens(clipped) <= budget.transcript_tokens  # clipped to one request, its marker included
    assert clipped.startswith("x" * 100)
    assert clipped.endswith("x" * 100)
    assert "more characters ...]" in clipped


def test_the_transcript_keeps_langflows_sender_where_the_flow_named_nobody():
    assert speaker("User", "User") == "User"
    assert speaker("Machine", "AI") == "Machine"
    assert speaker("User", None) == "User"
    assert speaker("User", "Caroline") == "Caroline"
