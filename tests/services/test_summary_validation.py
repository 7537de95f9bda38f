"""Summary validation: what a fold's answer or a person's edit must pass; an answer over its cap shortened."""

import re

import pytest

from langflow_session_memory.services.session_memory.summary.prompt import (
    SUMMARY_INSTRUCTIONS,
    ChatLine,
)
from langflow_session_memory.services.session_memory.summary.validation import (
    SummaryRejectedError,
    validate_edited_summary,
    validate_summary,
    within_word_limit,
    word_count,
)
from tests.services.summaries import BATCH, COPIED, FACT_LINES, GOOD, OVER_THE_CAP


def test_good_summary_is_accepted_and_stripped():
    assert validate_summary(f"  {GOOD}\n", batch=BATCH) == GOOD


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("Error generating summary: rate limit", "error text"),
        ("I'm sorry, I can't help with that. Key facts: Conversation so far:", "error text"),
        ("Traceback (most recent call last): Key facts Conversation so far", "error text"),
        ("Key facts:\n" + "word " * 301 + "\nConversation so far:", "over the 300-word cap"),
        ("Key facts:\n- PRJ-123 is on the EU cluster", "lacks the section"),
    ],
)
def test_bad_summaries_are_rejected(candidate, reason):
    with pytest.raises(SummaryRejectedError, match=reason):
        validate_summary(candidate, batch=BATCH)


def test_a_summary_about_errors_the_users_discussed_is_accepted():
    summary = (
        "Key facts:\n- the API returns an internal server error under load\n- I am sorry-proofing the rate limit"
        "\nConversation so far:\n- users hit the rate limit at 100 requests per second"
    )
    assert validate_summary(summary, batch=BATCH) == summary


def by_model(candidate: str) -> str:
    return validate_summary(candidate, batch=BATCH)


WRITERS = pytest.mark.parametrize("validate", [by_model, validate_edited_summary], ids=["model", "person"])


@WRITERS
def test_a_few_huge_words_are_over_the_character_cap(validate):
    huge = f"Key facts:\n- {'x' * 2_000} {'y' * 2_000}\nConversation so far:\n- two words"
    with pytest.raises(SummaryRejectedError, match=f"has {len(huge)} characters, over the 4000-character cap"):
        validate(huge)


@WRITERS
@pytest.mark.parametrize(
    ("character", "named"),
    [
        ("\x00", "control character U+0000"),
        ("\x1b", "control character U+001B"),
        ("\ud800", "unpaired surrogate U+D800"),
    ],
)
def test_nul_and_other_unstorable_characters_are_refused_with_their_position(validate, character, named):
    with pytest.raises(SummaryRejectedError, match=re.escape(f"contains the {named} at position 16; remove it")):
        validate(GOOD.replace("project", f"pro{character}ject", 1))


@WRITERS
def test_zero_width_characters_alone_are_an_empty_summary(validate):
    with pytest.raises(SummaryRejectedError, match="empty summary"):
        validate("\u200b \u200d\ufeff\u2060")


@WRITERS
def test_tabs_line_breaks_and_characters_joined_by_zero_width_joiners_are_kept(validate):
    summary = GOOD.replace("- project", "-\tproject \U0001f469\u200d\U0001f4bb").replace("\n", "\r\n")
    assert validate(summary) == summary


def test_summary_larger_than_what_it_replaces_and_the_floor_is_rejected():
    tiny_batch = [ChatLine("User", "hi"), ChatLine("Machine", "hello")]
    long_summary = "Key facts:\n" + "- the user greeted the assistant warmly\n" * 20 + "Conversation so far:\n- hi"
    with pytest.raises(SummaryRejectedError, match="more than the 2 it replaces"):
        validate_summary(long_summary, batch=tiny_batch)


def test_a_summary_of_a_batch_of_short_messages_may_be_longer_than_the_batch():
    acknowledgements = [ChatLine("User" if i % 2 == 0 else "Machine", "ok") for i in range(20)]
    summary = (
        "Key facts:\n- no new facts; the user only acknowledged the answers one by one\n"
        "Conversation so far:\n- the user and the assistant exchanged twenty short acknowledgements\n"
        "- the user confirmed each step of the plan with a single word and asked nothing new"
    )
    assert validate_summary(summary, batch=acknowledgements) == summary


@pytest.mark.parametrize(
    "written",
    [
        "## Key facts\n- project PRJ-123 runs on the EU cluster\n## Conversation so far\n- deployment steps",
        "**Key Facts:**\n- project PRJ-123 runs on the EU cluster\n**Conversation So Far:**\n- deployment steps",
        "### KEY FACTS\n- project PRJ-123 runs on the EU cluster\n### CONVERSATION SO FAR:\n- deployment steps",
    ],
)
def test_headings_as_models_write_them_are_normalised(written):
    assert validate_summary(written, batch=BATCH) == (
        "Key facts:\n- project PRJ-123 runs on the EU cluster\nConversation so far:\n- deployment steps"
    )


def test_a_summary_that_parrots_the_instructions_is_rejected():
    # A model that copies the format description instead of writing a summary, and one that copies the whole prompt.
    parroted = (
        "Key facts:\n- people and their names, relatives, pets, things bought or owned\n"
        "Conversation so far:\n- one line starting with naming the topics"
    )
    for answer in (parroted, SUMMARY_INSTRUCTIONS):
        with pytest.raises(SummaryRejectedError, match="repeats the fold instructions"):
            validate_summary(answer, batch=BATCH)


def test_a_summary_over_the_cap_keeps_its_key_facts_and_loses_repeats_then_the_oldest_conversation_lines():
    assert word_count(OVER_THE_CAP) > 200

    summary, dropped = within_word_limit(OVER_THE_CAP, 200)

    assert word_count(summary) <= 200
    assert summary.startswith("Key facts:\n" + "\n".join(FACT_LINES))
    conversation = summary.split("Conversation so far:\n", 1)[1].splitlines()
    assert FACT_LINES[0] not in conversation  # a repeat of a key fact goes first
    assert conversation == COPIED[-len(conversation) :]  # then the oldest lines: the newest are kept
    assert dropped == len(COPIED) * 2 - len(conversation)


def test_a_summary_within_the_limit_is_left_as_written():
    assert within_word_limit(GOOD, 300) == (GOOD, 0)


def test_a_summary_whose_key_facts_alone_are_over_the_limit_is_left_for_the_checks_to_refuse():
    long_facts = "Key facts:\n" + "- word word word\n" * 120 + "Conversation so far:\n- the user listed words"
    assert within_word_limit(long_facts, 300) == (long_facts, 0)
