"""Fitting the raw window to a budget (what servers say on overflow: test_overflow_signals.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.rules.planner import plan_fold, raw_window_start
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.token_estimate import estimate_tokens

BATCH = DEFAULT_POLICY.batch_size


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
    plan = plan_fold(list(range(2 * BATCH + 5)), paused=False, fold_all=True)
    assert [len(batch) for batch in plan.batches] == [BATCH, BATCH, 5]
    assert plan.raw_gap == ()


@pytest.mark.parametrize(
    ("text", "gemma_tokens"),
    [
        # Gemma 3's own count (llama-cpp-python /extras/tokenize, docs/real-model.md) without the message framing.
        ("Our project is PRJ-123 on the EU cluster. The customer is ACME Corp and the deadline is March 3rd.", 30),
        ("2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 5, 161),
        ("Invoice 884213, amount 12,345.67 EUR, order 2026-0042-7781, phone +49 30 1234567", 55),
    ],
)
def test_the_estimate_stays_within_a_fifth_of_a_real_tokenizer_on_numbers(text, gemma_tokens):
    assert 0.8 * gemma_tokens <= estimate_tokens(text) - 4 <= 1.25 * gemma_tokens
