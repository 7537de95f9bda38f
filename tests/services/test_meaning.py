"""The pure part of finding older messages by meaning: standing out of the pool, and fusing two rankings."""

import math
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.rules.meaning import fused, similarities, standouts
from langflow_session_memory.services.session_memory.rules.policy import EMBEDDING
from langflow_session_memory.services.session_memory.rules.recall import best_excerpts
from langflow_session_memory.services.session_memory.storage.messages import Candidate

START = datetime(2026, 1, 1, tzinfo=UTC)
vectors = st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3)


def candidate(text: str, minute: int) -> Candidate:
    return Candidate(uuid.uuid4(), START + timedelta(minutes=minute), "User", "User", text)


def unit(index: int, dimensions: int = 8, *, lean: float = 0.0) -> list[float]:
    """A vector along axis ``index``, leaning ``lean`` towards axis 0."""
    vector = [0.0] * dimensions
    vector[index] = 1.0
    vector[0] += lean
    return vector


def test_cosine_of_a_vector_with_itself_is_one_and_with_a_zero_vector_is_zero():
    same, zero, other_model = similarities([3, 4], [[3, 4], [0, 0], [1, 0, 0]])
    assert math.isclose(same, 1.0)
    assert zero == 0.0
    assert other_model == 0.0  # two models' vectors never compare


def test_the_one_message_near_the_question_stands_out_of_a_pool_of_unrelated_ones():
    pool = {f"small talk {i}": unit(1 + i % 7, lean=0.1 * (i % 3)) for i in range(40)}
    pool["cello lessons"] = unit(0)
    [(key, standing)] = standouts(unit(0), pool)
    assert key == "cello lessons"
    assert standing >= EMBEDDING.min_standout


def test_a_pool_without_a_standout_quotes_nothing():
    pool = {f"small talk {i}": unit(1 + i % 7, lean=0.1 * (i % 3)) for i in range(40)}
    assert standouts(unit(0), pool) == []


def test_a_pool_too_small_to_have_a_spread_quotes_nothing():
    pool = {f"message {i}": unit(1 + i % 7) for i in range(EMBEDDING.min_pool - 2)}
    pool["cello lessons"] = unit(0)
    assert standouts(unit(0), pool) == []


@given(query=vectors, pool=st.dictionaries(st.integers(0, 500), vectors, max_size=60), most=st.integers(1, 5))
def test_standouts_are_few_best_first_and_past_the_standing(query, pool, most):
    found = standouts(query, pool, most=most)
    assert len(found) <= most
    assert all(standing >= EMBEDDING.min_standout and key in pool for key, standing in found)
    assert [standing for _, standing in found] == sorted((standing for _, standing in found), reverse=True)


@given(st.lists(st.integers(0, 50), unique=True))
def test_one_ranking_fused_is_itself(ranking):
    assert fused(ranking) == ranking


def test_a_message_both_rankings_hold_goes_before_one_only_either_holds():
    assert fused(["a", "both"], ["both", "b"])[0] == "both"
    assert set(fused(["a", "both"], ["both", "b"])) == {"a", "b", "both"}


def test_a_message_found_by_meaning_alone_is_quoted_with_its_standing_and_shares_the_budget():
    said = candidate("I signed up for cello lessons on Thursdays.", 0)
    by_word = candidate("My sister Priya lives in Lisbon.", 5)
    excerpts = best_excerpts({"sister": [by_word]}, meant=[(said, 4.2)])
    assert [(excerpt.text, excerpt.standout) for excerpt in excerpts] == [(said.text, 4.2), (by_word.text, None)]
    assert excerpts[0].score == 0.0
    assert best_excerpts({"sister": [by_word]}, meant=[(said, 4.2)], most=1)[0].text in {said.text, by_word.text}
