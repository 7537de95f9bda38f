"""The pure part of the excerpts a turn carries: unheld words, their weights, the best excerpts past the score."""

import uuid
from datetime import UTC, datetime, timedelta

from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.recall import (
    asks,
    best_excerpts,
    excerpt_budget,
    keywords,
    unheld,
    word_weights,
)
from langflow_session_memory.services.session_memory.rules.token_estimate import estimate_tokens
from langflow_session_memory.services.session_memory.storage.messages import Candidate

START = datetime(2026, 1, 1, tzinfo=UTC)


def found(text: str, minute: int) -> Candidate:
    return Candidate(uuid.uuid4(), START + timedelta(minutes=minute), "User", "User", text)


def test_only_words_neither_the_summary_nor_the_messages_sent_hold_are_searched():
    words = keywords("Which city does my sister live in?")
    assert words == ("city", "sister", "live")
    assert unheld(words, ["Key facts:\n- City trips: Rome", "We live near the park"]) == ("sister",)


def test_a_word_found_in_few_messages_weighs_more_than_one_found_in_hundreds():
    weights = word_weights({"sister": [found("my sister", 0)], "work": [found("work", i) for i in range(50)]})
    assert weights["sister"] > RETRIEVAL.min_excerpt_score > weights["work"]


def test_an_old_message_a_rare_word_names_is_quoted_however_many_newer_ones_hold_a_common_word():
    old = found("My sister Priya called last night from Lisbon.", 0)
    newer = [found(f"Long day at work again, number {i}.", 100 + i) for i in range(RETRIEVAL.unindexed_per_word)]
    excerpts = best_excerpts({"sister": [old], "work": newer})
    assert [excerpt.text for excerpt in excerpts] == [old.text]


def test_common_words_alone_quote_nothing():
    common = [found(f"work and the weekend, day {i}", i) for i in range(RETRIEVAL.unindexed_per_word)]
    assert best_excerpts({"work": common, "weekend": common}) == []


def test_excerpts_are_few_bounded_and_in_the_order_they_were_said():
    rare = [found(f"Velvet Static played gig {i} " + "loud " * 100, i) for i in range(5)]
    excerpts = best_excerpts({"velvet": rare}, tokens=200)
    assert 1 <= len(excerpts) <= 3
    assert sum(estimate_tokens(excerpt.text) for excerpt in excerpts) <= 200
    assert [excerpt.timestamp for excerpt in excerpts] == sorted(excerpt.timestamp for excerpt in excerpts)


def test_a_word_matches_where_a_word_starts_only():
    assert best_excerpts({"car": [found("I wore my scarf", 0)]}) == []
    assert best_excerpts({"car": [found("I bought a car!", 0)]}) != []


def test_a_small_window_gets_a_sixteenth_of_it_for_excerpts():
    assert (excerpt_budget(2048), excerpt_budget(128_000), excerpt_budget(None)) == (128, 300, 300)


def test_only_a_message_that_asks_something_looks_for_older_messages():
    asking = ["Which city does my sister live in?", "remind me of the vault code", "What was it again"]
    stating = ["I tried a new recipe for dinner.", "The weather was nice, what a day."]
    assert [asks(message) for message in asking] == [True, True, True]
    assert [asks(message) for message in stating] == [False, False]
