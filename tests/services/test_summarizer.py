"""Summary validation and the fold call: what is rejected, and what the model is asked."""

import re

import pytest
from langchain_openai import ChatOpenAI
from lfx.base.models import model_remediation

from langflow_session_memory.services.session_memory.summarizer import (
    SUMMARY_CHARACTER_LIMIT,
    SUMMARY_REQUEST_MARKER,
    ChatLine,
    SummaryRejectedError,
    fold,
    fold_model,
    fold_request,
    validate_edited_summary,
    validate_summary,
)
from tests.chat import ScriptedChatModel

BATCH = [ChatLine("User", f"we deploy project PRJ-123 on the EU cluster, step {i}") for i in range(20)]
GOOD = "Key facts:\n- project PRJ-123 runs on the EU cluster\nConversation so far:\n- deployment steps 0 to 19"


def test_good_summary_is_accepted_and_stripped():
    assert validate_summary(f"  {GOOD}\n", previous_summary="", batch=BATCH) == GOOD


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
        validate_summary(candidate, previous_summary="", batch=BATCH)


def test_notes_about_errors_the_users_discussed_are_accepted():
    notes = (
        "Key facts:\n- the API returns an internal server error under load\n- I am sorry-proofing the rate limit"
        "\nConversation so far:\n- users hit the rate limit at 100 requests per second"
    )
    assert validate_summary(notes, previous_summary="", batch=BATCH) == notes


def by_model(candidate: str) -> str:
    return validate_summary(candidate, previous_summary="", batch=BATCH)


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
    notes = GOOD.replace("- project", "-\tproject \U0001f469\u200d\U0001f4bb").replace("\n", "\r\n")
    assert validate(notes) == notes


def test_the_fold_request_clips_a_previous_summary_over_the_cap():
    previous = "x" * (SUMMARY_CHARACTER_LIMIT + 6_000)
    sent = fold_request(previous, BATCH)[-1].content
    assert "x" * SUMMARY_CHARACTER_LIMIT + " [... 6000 more characters]" in sent
    assert "x" * (SUMMARY_CHARACTER_LIMIT + 1) not in sent


def test_summary_larger_than_what_it_replaces_is_rejected():
    tiny_batch = [ChatLine("User", "hi"), ChatLine("Machine", "hello")]
    with pytest.raises(SummaryRejectedError, match="more than the 2 it replaces"):
        validate_summary(GOOD, previous_summary="", batch=tiny_batch)


async def test_fold_asks_for_updated_notes_without_streaming_or_callbacks():
    model = ScriptedChatModel(script=[GOOD])
    result = await fold(model, "Key facts:\n- customer ACME", BATCH)

    system, human = model.calls[0]
    assert SUMMARY_REQUEST_MARKER in system.content
    assert "Key facts" in system.content
    assert "Conversation so far" in system.content
    assert "Current notes:\nKey facts:\n- customer ACME" in human.content
    assert "User: we deploy project PRJ-123 on the EU cluster, step 19" in human.content
    assert (result.summary, result.input_tokens, result.output_tokens) == (GOOD, 100, 10)


async def test_fold_runs_at_temperature_zero_on_a_copy():
    model = ScriptedChatModel(script=[GOOD])
    await fold(model, "", BATCH)
    assert model.temperatures == [0]
    assert model.temperature == 0.7  # the Agent's own model is not changed


async def test_fold_raises_when_the_model_answers_garbage():
    model = ScriptedChatModel(script=["Sure! Here is a poem about clouds."])
    with pytest.raises(SummaryRejectedError):
        await fold(model, "", BATCH)


OPENAI_TEMPERATURE_REFUSAL = (
    "Error code: 400 - {'error': {'message': \"Unsupported value: 'temperature' does not support 0 with this "
    "model. Only the default (1) value is supported.\", 'type': 'invalid_request_error', 'param': 'temperature', "
    "'code': 'unsupported_value'}}"
)


@pytest.fixture
def remediation_cache():
    yield
    model_remediation.reset_remediation_cache()


async def test_a_refused_temperature_is_dropped_and_the_fold_retried_once(remediation_cache):
    model = ScriptedChatModel(script=[ValueError(OPENAI_TEMPERATURE_REFUSAL), GOOD])
    result = await fold(model, "", BATCH, provider="OpenAI")
    assert result.summary == GOOD
    assert model.temperatures == [0, None]

    await fold(model, "", BATCH, provider="OpenAI")  # Langflow now knows this model's constraint
    assert model.temperatures == [0, None, None]


async def test_a_second_refusal_fails_the_fold(remediation_cache):
    model = ScriptedChatModel(script=[ValueError(OPENAI_TEMPERATURE_REFUSAL), ValueError(OPENAI_TEMPERATURE_REFUSAL)])
    with pytest.raises(ValueError, match="temperature"):
        await fold(model, "", BATCH, provider="OpenAI")
    assert len(model.calls) == 2


@pytest.mark.parametrize(
    ("model_name", "temperature"),
    [("gpt-5.4-mini", None), ("o3-mini", None), ("gpt-4o-mini", 0), ("gpt-5-chat-latest", 0)],
)
def test_temperature_zero_only_where_langchain_and_the_model_profile_allow_it(model_name, temperature):
    llm = ChatOpenAI(model=model_name, api_key="sk-local", temperature=0.5)
    assert fold_model(llm, "OpenAI").temperature == temperature


async def test_a_fold_without_reported_usage_counts_estimated_tokens():
    class NoUsageModel(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            result = super()._generate(messages, stop, run_manager, **kwargs)
            result.generations[0].message.usage_metadata = None
            return result

    model = NoUsageModel(script=[GOOD])
    result = await fold(model, "", BATCH)
    request_characters = [len(message.content) for message in model.calls[0]]
    assert result.input_tokens == sum(-(-n // 4) + 4 for n in request_characters)
    assert result.output_tokens == -(-len(GOOD) // 4) + 4
