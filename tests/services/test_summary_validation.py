"""What a fold's answer is salvaged to, line by line, and what a person's edit must pass (issue 53)."""

import re

import pytest

from langflow_session_memory.services.session_memory.summary.prompt import (
    FACT_QUESTION,
    SUMMARY_INSTRUCTIONS,
    ChatLine,
)
from langflow_session_memory.services.session_memory.summary.validation import (
    SummaryRejectedError,
    allowed_words,
    salvaged,
    validate_edited_summary,
    word_count,
)
from tests.services.summaries import BATCH, COPIED, FACT_LINES, GOOD, OVER_THE_CAP


def kept(answer: str, batch=BATCH) -> str:
    return salvaged(answer, batch=batch).update.text()


def test_good_summary_is_kept_as_written():
    assert kept(f"  {GOOD}\n") == GOOD
    assert salvaged(GOOD, batch=BATCH).repairs == ()


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ("", "empty summary"),
        ("   \n", "empty summary"),
        ("Sure! Here is a poem about clouds.", "neither section heading"),
        ("Error generating summary: rate limit", "error text"),
        ("I'm sorry, I can't help with that. Key facts: Conversation so far:", "error text"),
        ("Traceback (most recent call last): Key facts Conversation so far", "error text"),
        ("Key facts:\nConversation so far:", "no usable line"),
    ],
)
def test_an_answer_with_nothing_usable_is_refused(candidate, reason):
    with pytest.raises(SummaryRejectedError, match=reason):
        salvaged(candidate, batch=BATCH)


def test_a_summary_about_errors_the_users_discussed_is_kept():
    summary = (
        "Key facts:\n- the API returns an internal server error under load\n- I am sorry-proofing the rate limit"
        "\nConversation so far:\n- users hit the rate limit at 100 requests per second"
    )
    assert kept(summary) == summary


def test_a_line_copied_from_the_instructions_is_dropped_and_the_facts_kept():
    answer = (
        "Key facts:\n- project PRJ-123 runs on the EU cluster\n- people and their names, relatives, pets, things bought"
        "\nConversation so far:\n- deployment steps"
    )
    result = salvaged(answer, batch=BATCH)
    assert result.update.facts == ("project PRJ-123 runs on the EU cluster",)
    assert (result.repairs, result.lines_dropped) == (("copied_instructions",), 1)


@pytest.mark.parametrize("answer", [SUMMARY_INSTRUCTIONS, f"Key facts:\n{FACT_QUESTION}"], ids=["prompt", "question"])
def test_an_answer_that_only_parrots_the_instructions_is_refused(answer):
    with pytest.raises(SummaryRejectedError, match=r"copied from the fold instructions|neither section heading"):
        salvaged(answer, batch=BATCH)


@pytest.mark.parametrize(
    "written",
    [
        "## Key facts\n- project PRJ-123 runs on the EU cluster\n## Conversation so far\n- deployment steps",
        "**Key Facts:**\n- project PRJ-123 runs on the EU cluster\n**Conversation So Far:**\n- deployment steps",
        "### KEY FACTS\n- project PRJ-123 runs on the EU cluster\n### CONVERSATION SO FAR:\n- deployment steps",
        "Key fact:\n- project PRJ-123 runs on the EU cluster\nConversation:\n- deployment steps",
        "Facts:\n- project PRJ-123 runs on the EU cluster\nTopics:\n- deployment steps",
    ],
)
def test_headings_as_models_write_or_misspell_them_are_repaired(written):
    assert (
        kept(written)
        == "Key facts:\n- project PRJ-123 runs on the EU cluster\nConversation so far:\n- deployment steps"
    )


@pytest.mark.parametrize(
    "answer",
    [
        "Key facts:\n- project PRJ-123 runs on the EU cluster",
        "- project PRJ-123 runs on the EU cluster\nConversation so far:",
    ],
    ids=["no-conversation-heading", "no-key-facts-heading"],
)
def test_a_missing_heading_is_repaired_and_its_lines_kept(answer):
    result = salvaged(answer, batch=BATCH)
    assert result.update.facts == ("project PRJ-123 runs on the EU cluster",)
    assert "headings_repaired" in result.repairs


def test_characters_no_database_stores_are_removed_from_a_folds_answer():
    result = salvaged(GOOD.replace("project", "pro\x00ject\ud800", 1), batch=BATCH)
    assert result.update.text() == GOOD
    assert result.repairs == ("unstorable_characters",)


def test_an_answer_longer_than_its_batch_warrants_is_cut_by_the_notes_rule_and_its_facts_handed_back():
    tiny_batch = [ChatLine("User", "hi"), ChatLine("Machine", "hello")]
    facts = [f"the user greeted the assistant warmly, time {i}" for i in range(20)]
    answer = "Key facts:\n" + "".join(f"- {fact}\n" for fact in facts) + "Conversation so far:\n- hi"
    result = salvaged(answer, batch=tiny_batch)
    assert result.update.words() <= allowed_words(tiny_batch)
    assert result.dropped_facts + result.update.facts == tuple(facts)  # the oldest go, none is lost
    assert result.update.conversation == ()


def test_an_answer_over_the_cap_keeps_its_key_facts_and_loses_repeats_then_the_oldest_conversation_lines():
    assert word_count(OVER_THE_CAP) > 200
    batch = [ChatLine("User", "word " * 10)] * 19

    result = salvaged(OVER_THE_CAP, batch=batch)

    assert result.update.words() <= allowed_words(batch)
    assert result.update.facts == tuple(line[2:] for line in FACT_LINES)
    conversation = list(result.update.conversation)
    assert FACT_LINES[0][2:] not in conversation  # a repeat of a key fact goes first
    assert conversation == [line[2:] for line in COPIED[-len(conversation) :]]  # then the oldest lines
    assert result.dropped_conversation == len(COPIED) * 2 - len(conversation)


def test_a_few_huge_words_are_cut_to_the_character_cap():
    huge = f"Key facts:\n- {'x' * 2_000} {'y' * 2_000}\n- project PRJ-123\nConversation so far:\n- two words"
    result = salvaged(huge, batch=BATCH)
    assert result.update.facts == ("project PRJ-123",)
    assert len(result.dropped_facts) == 1


def test_a_persons_edit_over_the_character_cap_is_refused():
    huge = f"Key facts:\n- {'x' * 2_000} {'y' * 2_000}\nConversation so far:\n- two words"
    with pytest.raises(SummaryRejectedError, match=f"has {len(huge)} characters, over the 4000-character cap"):
        validate_edited_summary(huge)


@pytest.mark.parametrize(
    ("character", "named"),
    [
        ("\x00", "control character U+0000"),
        ("\x1b", "control character U+001B"),
        ("\ud800", "unpaired surrogate U+D800"),
    ],
)
def test_a_persons_edit_with_an_unstorable_character_is_refused_with_its_position(character, named):
    with pytest.raises(SummaryRejectedError, match=re.escape(f"contains the {named} at position 16; remove it")):
        validate_edited_summary(GOOD.replace("project", f"pro{character}ject", 1))


def test_zero_width_characters_alone_are_an_empty_summary():
    with pytest.raises(SummaryRejectedError, match="empty summary"):
        validate_edited_summary("\u200b \u200d\ufeff\u2060")
    with pytest.raises(SummaryRejectedError, match="no usable line"):
        salvaged("Key facts:\n- \u200b\u200d\nConversation so far:", batch=BATCH)


def test_tabs_line_breaks_and_characters_joined_by_zero_width_joiners_are_kept():
    summary = GOOD.replace("- project", "-\tproject \U0001f469\u200d\U0001f4bb").replace("\n", "\r\n")
    assert validate_edited_summary(summary) == summary
    assert "project \U0001f469\u200d\U0001f4bb" in kept(summary)


def test_a_summary_of_a_batch_of_short_messages_may_be_longer_than_the_batch():
    acknowledgements = [ChatLine("User" if i % 2 == 0 else "Machine", "ok") for i in range(20)]
    summary = (
        "Key facts:\n- no new facts; the user only acknowledged the answers one by one\n"
        "Conversation so far:\n- the user and the assistant exchanged twenty short acknowledgements\n"
        "- the user confirmed each step of the plan with a single word and asked nothing new"
    )
    assert kept(summary, acknowledgements) == summary


def test_headings_with_their_items_on_the_same_line_are_read_as_qwen_writes_them():
    result = salvaged("Key facts: - PRJ-123 on the EU cluster\nConversation so far: - work - the band", batch=BATCH)
    assert (result.update.facts, result.update.conversation) == (("PRJ-123 on the EU cluster",), ("work", "the band"))
    assert result.repairs == ()
