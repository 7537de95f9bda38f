"""The one retry rule (``rules/retry``): what follows each refusal, and docs/design.md's table of it."""

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.rules import retry
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY, RETRIEVAL
from langflow_session_memory.services.session_memory.rules.retry import Next, Refused, Send, after, limit_after_fold
from tests.generated_docs import generated_table

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
BATCH = DEFAULT_POLICY.batch_size
LIMITS = st.none() | st.integers(min_value=1, max_value=BATCH)


def test_the_design_s_retry_table_is_the_rule_s():
    assert generated_table(DESIGN, "retry.markdown_table") == retry.markdown_table(), (
        "docs/design.md's retry table is not the rule's: replace it with the output of "
        "`python -m langflow_session_memory.services.session_memory.rules.retry`"
    )


def test_every_refusal_has_a_rule_in_words():
    assert set(retry.RULES) == set(Refused)
    assert all(rule.sent_next and rule.stops for rule in retry.RULES.values())


def test_an_agent_call_is_made_smaller_once_then_given_up():
    assert after(Refused.AGENT_CALL, tries=1) == Next(Send.SMALLER)
    assert after(Refused.AGENT_CALL, tries=2) == Next(Send.GIVE_UP)


@given(messages=st.integers(min_value=2, max_value=BATCH), clippable=st.booleans())
def test_a_fold_request_too_long_is_sent_in_halves_while_it_can_be_cut(messages, clippable):
    assert after(Refused.FOLD_REQUEST, messages=messages, clippable=clippable).send is Send.HALVES
    assert after(Refused.FOLD_REQUEST, messages=1, clippable=True).send is Send.HALVES
    assert after(Refused.FOLD_REQUEST, messages=1, clippable=False).send is Send.GIVE_UP


@given(messages=st.integers(min_value=2, max_value=BATCH), limit=LIMITS)
def test_a_refused_summary_is_never_asked_again_as_it_was(messages, limit):
    then = after(Refused.FOLD_SUMMARY, messages=messages, limit=limit)
    assert then.send is Send.AFTER_PAUSE
    assert 1 <= then.limit < messages


@given(limit=LIMITS)
def test_a_lone_message_refused_again_is_passed_over_and_any_other_failure_asks_the_same(limit):
    assert after(Refused.FOLD_SUMMARY, messages=1, limit=limit) == Next(Send.SKIP, limit=limit)
    assert after(Refused.FOLD, messages=BATCH, limit=limit) == Next(Send.AFTER_PAUSE, limit=limit)


@given(limit=LIMITS)
def test_each_fold_that_lands_doubles_the_limit_back_to_whole_batches(limit):
    grown = limit_after_fold(limit, BATCH)
    assert grown is None or (limit is not None and grown == 2 * limit < BATCH)


def test_an_index_batch_is_tried_again_until_its_tries_run_out():
    tries = RETRIEVAL.index_attempts
    sends = [after(Refused.INDEX_BATCH, tries=n, most_tries=tries).send for n in range(1, tries + 1)]
    assert sends == [Send.AGAIN] * (tries - 1) + [Send.GIVE_UP]
