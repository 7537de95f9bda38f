"""Recognising "prompt too long" from real provider errors, and fitting the raw window to a budget."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.context_size import is_context_length_error
from langflow_session_memory.services.session_memory.planner import plan_fold, raw_window_start

PROVIDER_OVERFLOWS = {
    "openai": "Error code: 400 - {'error': {'message': \"This model's maximum context length is 128000 tokens. "
    'However, your messages resulted in 130521 tokens. Please reduce the length of the messages.", '
    "'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}",
    "anthropic": "Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', "
    "'message': 'prompt is too long: 208310 tokens > 200000 maximum'}}",
    "google": "400 The input token count (1198452) exceeds the maximum number of tokens allowed (1048575).",
    "ollama": "registry.ollama.ai/library/llama3: the input length exceeds the context length",
    "mistral": "Prompt contains 40123 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    "bedrock": "ValidationException: Input is too long for requested model.",
}
UNRELATED = [
    "context deadline exceeded",
    "Invalid context_id: 'abc'",
    "Could not load the context for this flow",
    "<ContextVar name='current_graph' at 0x7f>",
    "Error code: 429 - Rate limit reached for requests; the context of this request was saved",
    "Connection error.",
]


@pytest.mark.parametrize("provider", PROVIDER_OVERFLOWS)
def test_provider_context_overflows_match(provider):
    assert is_context_length_error(RuntimeError(PROVIDER_OVERFLOWS[provider]))


@pytest.mark.parametrize("text", UNRELATED)
def test_unrelated_errors_mentioning_context_do_not_match(text):
    assert not is_context_length_error(RuntimeError(text))


def test_a_wrapped_overflow_matches_through_its_cause():
    wrapped = RuntimeError("Agent run failed after a partial message was emitted")
    wrapped.__cause__ = ValueError(PROVIDER_OVERFLOWS["anthropic"])
    assert is_context_length_error(wrapped)


def test_raw_part_starts_at_a_user_message_and_fits():
    sizes = [10, 10, 1300, 10, 10, 10]
    opens_turn = [True, False, True, False, True, False]
    assert raw_window_start(sizes, opens_turn, budget=100) == 3 + 1  # index 3 is an answer: start at the next question


def test_nothing_fits_gives_an_empty_raw_part():
    assert raw_window_start([500, 500], [True, False], budget=100) == 2


@given(
    sizes=st.lists(st.integers(1, 2000), max_size=40),
    budget=st.integers(0, 5000),
    data=st.data(),
)
def test_raw_window_start_always_fits_and_opens_a_turn(sizes, budget, data):
    opens_turn = data.draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
    start = raw_window_start(sizes, opens_turn, budget)
    assert sum(sizes[start:]) <= budget or start == len(sizes)
    assert start == len(sizes) or opens_turn[start]


def test_fold_all_folds_a_partial_last_batch_and_sends_nothing_raw():
    plan = plan_fold(list(range(45)), paused=False, fold_all=True)
    assert [len(batch) for batch in plan.batches] == [20, 20, 5]
    assert plan.raw_gap == ()
