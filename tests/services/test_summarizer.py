"""Summary validation and the fold call: what is rejected, and what the model is asked."""

import asyncio
import re

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI
from lfx.base.models import model_remediation

from langflow_session_memory.services.session_memory.rules.context_size import estimate_tokens, estimated_size
from langflow_session_memory.services.session_memory.summary.summarizer import (
    FOLD_OUTPUT_TOKENS,
    FOLD_REASONING_OUTPUT_TOKENS,
    FOLD_RUN_TAG,
    SUMMARY_CHARACTER_LIMIT,
    SUMMARY_INSTRUCTIONS,
    ChatLine,
    RequestTooLongError,
    SummaryRejectedError,
    allowed_words,
    fold,
    fold_budget,
    fold_model,
    fold_request,
    transcript_chunks,
    validate_edited_summary,
    validate_summary,
    within_word_limit,
    word_count,
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
    assert "x" * 3000 + " [... 6000 more characters ...] " + "x" * 1000 in sent
    assert "x" * (SUMMARY_CHARACTER_LIMIT + 1) not in sent


def test_a_pasted_log_keeps_its_head_and_its_tail_in_the_fold_request():
    log = "start of the log\n" + "noise " * 5_000 + "\nexit status 2: disk full"
    sent = fold_request("", [ChatLine("User", log)])[-1].content
    assert "start of the log" in sent
    assert "exit status 2: disk full" in sent
    assert "more characters ...]" in sent


def test_summary_larger_than_what_it_replaces_and_the_floor_is_rejected():
    tiny_batch = [ChatLine("User", "hi"), ChatLine("Machine", "hello")]
    long_notes = "Key facts:\n" + "- the user greeted the assistant warmly\n" * 20 + "Conversation so far:\n- hi"
    with pytest.raises(SummaryRejectedError, match="more than the 2 it replaces"):
        validate_summary(long_notes, previous_summary="", batch=tiny_batch)


def test_notes_on_a_batch_of_short_messages_may_be_longer_than_the_batch():
    acknowledgements = [ChatLine("User" if i % 2 == 0 else "Machine", "ok") for i in range(20)]
    notes = (
        "Key facts:\n- no new facts; the user only acknowledged the answers one by one\n"
        "Conversation so far:\n- the user and the assistant exchanged twenty short acknowledgements\n"
        "- the user confirmed each step of the plan with a single word and asked nothing new"
    )
    assert validate_summary(notes, previous_summary="", batch=acknowledgements) == notes


@pytest.mark.parametrize(
    "written",
    [
        "## Key facts\n- project PRJ-123 runs on the EU cluster\n## Conversation so far\n- deployment steps",
        "**Key Facts:**\n- project PRJ-123 runs on the EU cluster\n**Conversation So Far:**\n- deployment steps",
        "### KEY FACTS\n- project PRJ-123 runs on the EU cluster\n### CONVERSATION SO FAR:\n- deployment steps",
    ],
)
def test_headings_as_models_write_them_are_normalised(written):
    assert validate_summary(written, previous_summary="", batch=BATCH) == (
        "Key facts:\n- project PRJ-123 runs on the EU cluster\nConversation so far:\n- deployment steps"
    )


def test_notes_that_parrot_the_instructions_are_rejected():
    # A model that copies the format description instead of writing notes, and one that copies the whole prompt.
    parroted = (
        'Key facts:\n- followed by one short line per fact, each starting with "- ".\n'
        'Conversation so far:\n- followed by a few short lines, oldest first, each starting with "- "'
    )
    for answer in (parroted, SUMMARY_INSTRUCTIONS):
        with pytest.raises(SummaryRejectedError, match="repeats the fold instructions"):
            validate_summary(answer, previous_summary="", batch=BATCH)


def test_the_format_is_described_without_sample_lines_a_small_model_would_copy():
    # Qwen2.5-Coder 0.5B returned these sample lines of the earlier prompt as its notes.
    assert "one short line per fact (who, what" not in SUMMARY_INSTRUCTIONS
    assert not [line for line in SUMMARY_INSTRUCTIONS.splitlines() if line.startswith("- ")]


def test_the_fold_instructions_carry_nothing_for_tests():
    assert "[" not in SUMMARY_INSTRUCTIONS
    assert "SESSION-MEMORY" not in SUMMARY_INSTRUCTIONS.upper()


async def test_fold_asks_for_updated_notes():
    model = ScriptedChatModel(script=[GOOD])
    result = await fold(model, "Key facts:\n- customer ACME", BATCH)

    system, human = model.calls[0]
    assert system.content == SUMMARY_INSTRUCTIONS
    assert "Key facts" in system.content
    assert "Conversation so far" in system.content
    assert "Current notes:\nKey facts:\n- customer ACME" in human.content
    assert "User: we deploy project PRJ-123 on the EU cluster, step 19" in human.content
    assert (result.summary, result.usage.input_tokens, result.usage.output_tokens) == (GOOD, 100, 10)


class RecordedRuns(AsyncCallbackHandler):
    """A tracer's view: every chat model run it is told about, with its name and tags."""

    def __init__(self):
        self.runs = []

    async def on_chat_model_start(self, serialized, messages, *, run_id, name=None, tags=None, **kwargs):
        self.runs.append({"run_id": run_id, "name": name or kwargs.get("metadata", {}).get("name"), "tags": tags})


async def test_a_fold_is_a_run_of_its_own_for_the_agent_s_tracers_and_for_no_other_callback():
    tracer, model_callback = RecordedRuns(), RecordedRuns()
    model = ScriptedChatModel(script=[GOOD], callbacks=[model_callback])  # e.g. the Agent's usage counter

    await fold(model, "", BATCH, tracing=(tracer,))

    assert len(tracer.runs) == 1
    assert tracer.runs[0]["tags"] == [FOLD_RUN_TAG]
    assert tracer.runs[0]["name"] == FOLD_RUN_TAG
    assert model_callback.runs == []  # the model's own callbacks (the Agent's) never see the fold


def cached_answer(cache_read: int = 1024) -> AIMessage:
    """Good notes, with usage as LangChain reports a provider's prompt-cache hit."""
    usage = {"input_tokens": 1500, "output_tokens": 40, "total_tokens": 1540}
    return AIMessage(content=GOOD, usage_metadata={**usage, "input_token_details": {"cache_read": cache_read}})


async def test_a_fold_reports_the_input_the_provider_served_from_its_cache():
    model = ScriptedChatModel(script=[cached_answer()])

    result = await fold(model, "", BATCH)

    assert (result.usage.input_tokens, result.usage.cached_input_tokens) == (1500, 1024)


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
    assert result.usage.input_tokens == estimated_size(message.content for message in model.calls[0])
    assert result.usage.output_tokens == estimate_tokens(GOOD)
    assert result.usage.estimated


@pytest.mark.parametrize(
    ("model_name", "agent_max_tokens", "fold_cap"),
    [
        ("gpt-4o-mini", 150, FOLD_OUTPUT_TOKENS),
        ("gpt-4o-mini", None, FOLD_OUTPUT_TOKENS),
        ("gpt-5.4-mini", 150, FOLD_REASONING_OUTPUT_TOKENS),
        ("a-local-model", 150, FOLD_OUTPUT_TOKENS),
    ],
)
def test_the_fold_has_its_own_output_cap_whatever_the_agent_s_max_tokens(model_name, agent_max_tokens, fold_cap):
    llm = ChatOpenAI(model=model_name, api_key="sk-local", max_tokens=agent_max_tokens)
    assert fold_model(llm, "OpenAI").max_tokens == fold_cap
    assert llm.max_tokens == agent_max_tokens


def test_the_fold_cap_never_exceeds_the_model_s_own_output_limit():
    llm = ChatOpenAI(model="gpt-4o-mini", api_key="sk-local")
    llm.profile = {**llm.profile, "reasoning_output": True, "max_output_tokens": 4096}
    assert fold_model(llm).max_tokens == 4096


@pytest.mark.parametrize(
    "metadata", [{"finish_reason": "length"}, {"stop_reason": "max_tokens"}, {"finish_reason": "MAX_TOKENS"}]
)
async def test_notes_cut_at_the_output_cap_are_never_stored(metadata):
    cut = AIMessage(content=GOOD, response_metadata=metadata)  # valid-looking, but the model had more to write
    with pytest.raises(SummaryRejectedError, match="cut at the"):
        await fold(ScriptedChatModel(script=[cut]), "", BATCH)


async def test_an_answer_that_stopped_by_itself_is_kept():
    done = AIMessage(content=GOOD, response_metadata={"finish_reason": "stop"})
    assert (await fold(ScriptedChatModel(script=[done]), "", BATCH)).summary == GOOD


def test_a_small_context_window_leaves_room_for_the_notes():
    llm = ChatOpenAI(model="a-local-model", api_key="sk-local")
    budget = fold_budget(llm, 2048)
    assert budget.output_tokens == 512
    assert budget.transcript_tokens + budget.output_tokens < 2048 * 0.75
    assert fold_budget(llm, None).transcript_tokens is None


def test_long_messages_on_a_small_window_fold_in_several_requests_in_order():
    llm = ChatOpenAI(model="a-local-model", api_key="sk-local")
    long_batch = [ChatLine("User", f"message {i} " + "word " * 150) for i in range(20)]
    chunks = transcript_chunks(long_batch, fold_budget(llm, 2048))
    assert len(chunks) > 1
    assert [line.text.split()[1] for chunk in chunks for line in chunk] == [str(i) for i in range(20)]
    huge = transcript_chunks([ChatLine("User", "x" * 50_000)], fold_budget(llm, 2048))
    assert len(huge) == 1
    assert len(huge[0][0].text) < 3000


async def test_each_request_of_a_batch_carries_the_notes_so_far():
    llm = ScriptedChatModel()
    long_batch = [ChatLine("User", f"message {i} " + "word " * 150) for i in range(20)]
    result = await fold(llm, "", long_batch, context_window=2048)
    assert len(llm.calls) > 1
    assert "Current notes:\n(none yet)" in llm.calls[0][-1].content
    assert "Current notes:\nKey facts:" in llm.calls[1][-1].content
    assert result.usage.input_tokens == 100 * len(llm.calls)


class EndlessModel(ScriptedChatModel):
    """A model on a server that ignores the output cap: it streams until someone stops reading."""

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls.append(messages)
        try:
            yield ChatGenerationChunk(message=AIMessageChunk(content="Key facts:\n"))
            while True:
                yield ChatGenerationChunk(message=AIMessageChunk(content="- the same line again\n"))
        finally:
            self.temperatures.append("closed")  # a list the fold's copy of the model shares with this one


async def test_reading_stops_at_the_fold_s_budget_on_a_server_that_ignores_it():
    model = EndlessModel()
    with pytest.raises(SummaryRejectedError, match="cut at the"):
        await fold(model, "", BATCH)
    for _ in range(3):  # the provider's generator is closed by the event loop's async-generator finalizer
        await asyncio.sleep(0)
    assert model.temperatures[-1] == "closed"  # the stream was closed, so the server stops writing


async def test_an_openai_compatible_stream_that_ended_without_a_finish_reason_is_not_kept():
    interrupted = AIMessage(content=GOOD, response_metadata={"model_provider": "openai"})
    with pytest.raises(SummaryRejectedError, match="without a finish reason"):
        await fold(ScriptedChatModel(script=[interrupted]), "", BATCH)


class SmallWindowModel(ScriptedChatModel):
    """A server with an undeclared small window: a request over ``limit`` characters is refused, in words or,
    as llama-cpp-python streams it, with a stream holding nothing."""

    limit: int = 3000
    empty_stream: bool = False

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        if sum(len(m.content) for m in messages) > self.limit:
            self.calls.append("refused")
            if not self.empty_stream:
                raise ValueError("This model's maximum context length is 2048 tokens. (context_length_exceeded)")
            return
        yield ChatGenerationChunk(message=AIMessageChunk(content=self._generate(messages).generations[0].text))


@pytest.mark.parametrize("empty_stream", [False, True])
async def test_a_fold_request_refused_as_too_long_is_split_until_it_fits(empty_stream):
    long_batch = [ChatLine("User", f"message {i} " + "word " * 100) for i in range(20)]
    model = SmallWindowModel(empty_stream=empty_stream)
    result = await fold(model, "", long_batch)
    answered = [call for call in model.calls if call != "refused"]
    assert "refused" in model.calls
    assert len(answered) > 1
    assert result.summary.endswith("up to 19")  # every message folded, in order


async def test_a_single_message_too_long_for_any_request_fails_the_fold():
    model = SmallWindowModel(limit=100)
    with pytest.raises(RequestTooLongError):
        await fold(model, "", [ChatLine("User", "x" * 5000)])


# What Qwen2.5-Coder 1.5B wrote for a batch of twenty one-line turns of the recall eval (docs/real-model.md), shortened:
# every fact in "Key facts", then the transcript copied under "Conversation so far", one line many times over.
FACT_LINES = [f"- The badge code of team {13 + 3 * i} is BADGE-{1000 + 7 * i}." for i in range(8)]
COPIED = [f"- Step {i}: let's look at the nightly export job next, keep it short." for i in range(12)]
OVER_THE_CAP = "\n".join(
    [
        "Key facts:",
        *FACT_LINES,
        "",
        "Conversation so far:",
        *[line for step in COPIED for line in (step, FACT_LINES[0])],
    ]
)


def test_notes_over_the_cap_keep_their_key_facts_and_lose_repeats_then_the_oldest_conversation_lines():
    assert word_count(OVER_THE_CAP) > 200

    notes, dropped = within_word_limit(OVER_THE_CAP, 200)

    assert word_count(notes) <= 200
    assert notes.startswith("Key facts:\n" + "\n".join(FACT_LINES))
    conversation = notes.split("Conversation so far:\n", 1)[1].splitlines()
    assert FACT_LINES[0] not in conversation  # a repeat of a key fact goes first
    assert conversation == COPIED[-len(conversation) :]  # then the oldest lines: the newest are kept
    assert dropped == len(COPIED) * 2 - len(conversation)


def test_notes_within_the_limit_are_left_as_written():
    assert within_word_limit(GOOD, 300) == (GOOD, 0)


def test_notes_whose_key_facts_alone_are_over_the_limit_are_left_for_the_checks_to_refuse():
    long_facts = "Key facts:\n" + "- word word word\n" * 120 + "Conversation so far:\n- the user listed words"
    assert within_word_limit(long_facts, 300) == (long_facts, 0)


def test_a_fold_whose_notes_run_over_is_stored_shortened_and_says_so(captured_logs):
    batch = [ChatLine("User" if i % 2 == 0 else "AI", COPIED[i % 12][2:]) for i in range(20)]
    model = ScriptedChatModel(script=[OVER_THE_CAP])

    result = asyncio.run(fold(model, "", batch))

    assert word_count(result.summary) <= allowed_words("", batch)
    assert all(line in result.summary for line in FACT_LINES)
    [shortened] = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_shortened")]
    assert f"words_written={word_count(OVER_THE_CAP)} " in shortened
