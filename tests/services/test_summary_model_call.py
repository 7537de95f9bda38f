"""The fold's model call: what the model is asked, its budget, refusals, cuts and what it cost."""

import asyncio

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI
from lfx.base.models import model_remediation

from langflow_session_memory.services.session_memory.rules.policy import SUMMARY
from langflow_session_memory.services.session_memory.rules.token_estimate import estimate_tokens, estimated_size
from langflow_session_memory.services.session_memory.summary.model_call import (
    FOLD_RUN_TAG,
    RequestTooLongError,
    fold,
    fold_model,
    spent_before,
)
from langflow_session_memory.services.session_memory.summary.notes import parsed
from langflow_session_memory.services.session_memory.summary.prompt import (
    SUMMARY_INSTRUCTIONS,
    ChatLine,
)
from langflow_session_memory.services.session_memory.summary.validation import (
    SummaryRejectedError,
    allowed_words,
    word_count,
)
from tests.chat import ScriptedChatModel
from tests.services.summaries import BATCH, COPIED, FACT_LINES, GOOD, OVER_THE_CAP, RecordedRuns, cached_answer


async def test_fold_asks_about_the_batch_and_adds_its_lines_after_the_current_notes():
    model = ScriptedChatModel(script=[GOOD])
    result = await fold(model, "Key facts:\n- customer ACME\nConversation so far:\n- the contract", BATCH)

    system, human = model.calls[0]
    assert system.content == SUMMARY_INSTRUCTIONS
    assert "Key facts" in system.content
    assert "Conversation so far" in system.content
    assert "customer ACME" not in human.content  # the model is asked about the batch alone
    assert "User: we deploy project PRJ-123 on the EU cluster, step 19" in human.content
    assert result.summary == (
        "Key facts:\n- customer ACME\n- project PRJ-123 runs on the EU cluster\n"
        "Conversation so far:\n- the contract\n- deployment steps 0 to 19"
    )
    assert (result.usage.input_tokens, result.usage.output_tokens) == (100, 10)


async def test_a_fold_is_a_run_of_its_own_for_the_agent_s_tracers_and_for_no_other_callback():
    tracer, model_callback = RecordedRuns(), RecordedRuns()
    model = ScriptedChatModel(script=[GOOD], callbacks=[model_callback])  # e.g. the Agent's usage counter

    await fold(model, "", BATCH, tracing=(tracer,))

    assert len(tracer.runs) == 1
    assert tracer.runs[0]["tags"] == [FOLD_RUN_TAG]
    assert tracer.runs[0]["name"] == FOLD_RUN_TAG
    assert model_callback.runs == []  # the model's own callbacks (the Agent's) never see the fold


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
        ("gpt-4o-mini", 150, SUMMARY.output_tokens),
        ("gpt-4o-mini", None, SUMMARY.output_tokens),
        ("gpt-5.4-mini", 150, SUMMARY.reasoning_output_tokens),
        ("a-local-model", 150, SUMMARY.output_tokens),
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


CUT_IN_THE_CONVERSATION = f"{GOOD}\n- and then the team talked about the mid"
CUT_IN_THE_KEY_FACTS = "Key facts:\n- project PRJ-123 runs on the EU cluster\n- the customer is AC"


@pytest.mark.parametrize(
    "metadata", [{"finish_reason": "length"}, {"stop_reason": "max_tokens"}, {"finish_reason": "MAX_TOKENS"}]
)
async def test_an_answer_cut_at_the_output_cap_keeps_its_complete_lines(metadata, captured_logs):
    cut = AIMessage(content=CUT_IN_THE_CONVERSATION, response_metadata=metadata)
    assert (await fold(ScriptedChatModel(script=[cut]), "", BATCH)).summary == GOOD  # the line being written goes
    assert any(log["event"].startswith("session_summary_salvaged why=cut_at_the_output_cap") for log in captured_logs)


@pytest.mark.parametrize("metadata", [{"finish_reason": "length"}, {"model_provider": "openai"}])
async def test_an_answer_cut_inside_its_key_facts_keeps_the_facts_written_before_the_cut(metadata, captured_logs):
    cut = AIMessage(content=CUT_IN_THE_KEY_FACTS, response_metadata=metadata)  # the line being written goes
    result = await fold(ScriptedChatModel(script=[cut]), "", BATCH)
    assert parsed(result.summary).facts == ("project PRJ-123 runs on the EU cluster",)
    assert any(log["event"].startswith("session_summary_salvaged why=") for log in captured_logs)


@pytest.mark.parametrize("metadata", [{"finish_reason": "length"}, {"model_provider": "openai"}])
async def test_an_answer_cut_before_any_complete_line_is_refused(metadata):
    cut = AIMessage(content="Key facts:\n- the customer is AC", response_metadata=metadata)
    with pytest.raises(SummaryRejectedError, match=r"cut at the|without a finish reason"):
        await fold(ScriptedChatModel(script=[cut]), "", BATCH)


async def test_an_answer_that_stopped_by_itself_is_kept():
    done = AIMessage(content=GOOD, response_metadata={"finish_reason": "stop"})
    assert (await fold(ScriptedChatModel(script=[done]), "", BATCH)).summary == GOOD


async def test_each_request_of_a_batch_is_merged_into_the_notes_in_order():
    llm = ScriptedChatModel()
    long_batch = [ChatLine("User", f"message {i} " + "word " * 150) for i in range(20)]
    result = await fold(llm, "", long_batch, context_window=2048)
    assert len(llm.calls) > 1
    facts = [line for line in result.summary.splitlines() if line.startswith("- first")]
    assert facts == [f"- first {llm.batch_texts(call)[0].split()[2]}" for call in range(len(llm.calls))]
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
    result = await fold(model, "", BATCH)
    assert parsed(result.summary).facts == ("the same line again",)  # its complete lines, each once
    for _ in range(3):  # the provider's generator is closed by the event loop's async-generator finalizer
        await asyncio.sleep(0)
    assert model.temperatures[-1] == "closed"  # the stream was closed, so the server stops writing


async def test_an_openai_compatible_stream_that_ended_without_a_finish_reason_keeps_its_complete_lines():
    interrupted = AIMessage(content=CUT_IN_THE_CONVERSATION, response_metadata={"model_provider": "openai"})
    assert (await fold(ScriptedChatModel(script=[interrupted]), "", BATCH)).summary == GOOD


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


def test_a_fold_whose_summary_runs_over_is_stored_shortened_and_says_so(captured_logs):
    batch = [ChatLine("User" if i % 2 == 0 else "AI", COPIED[i % 12][2:]) for i in range(20)]
    model = ScriptedChatModel(script=[OVER_THE_CAP])

    result = asyncio.run(fold(model, "", batch))

    assert word_count(result.summary) <= allowed_words(batch)
    assert all(line in result.summary for line in FACT_LINES)
    [shortened] = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_shortened")]
    assert f"words_written={word_count(OVER_THE_CAP)} " in shortened


async def test_a_fold_that_fails_after_answered_requests_keeps_what_they_spent():
    long_batch = [ChatLine("User", f"message {i} " + "word " * 150) for i in range(20)]
    model = ScriptedChatModel(script=[GOOD, "Error: the model is overloaded"])  # the second request is refused

    with pytest.raises(SummaryRejectedError) as refused:
        await fold(model, "", long_batch, context_window=2048)

    assert len(model.calls) == 2
    assert (spent_before(refused.value).input_tokens, spent_before(refused.value).output_tokens) == (200, 20)
