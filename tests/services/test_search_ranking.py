"""The pure part of the search: keywords from a question, ranking, excerpts and the tool's answer."""

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.agent.search import answer
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.recall import excerpt, keywords, rank
from langflow_session_memory.services.session_memory.storage.messages import Candidate

START = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = st.text(alphabet="abcdefghij", min_size=2, max_size=6)


def candidate(text: str, seconds: int = 0) -> Candidate:
    return Candidate(uuid.uuid4(), START + timedelta(seconds=seconds), "User", "User", text)


def test_keywords_drop_question_words_and_keep_ids_whole():
    assert keywords("Which cluster and project were we on? PRJ-123, v2.1") == ("cluster", "project", "prj-123", "v2.1")


def test_a_question_of_stop_words_only_gives_no_search():
    assert keywords("What was it that we said?") == ()
    assert answer([], ()).startswith("No search was run")


@given(st.text(max_size=200))
def test_keywords_are_few_distinct_and_lower_case(query):
    found = keywords(query)
    assert len(found) == len(set(found)) <= 8
    assert all(word == word.lower() and word in query.lower() for word in found)


def test_a_huge_word_is_cut_to_its_start_and_the_words_before_it_are_kept():
    assert keywords("ZEBRA-42 " + "q" * 100_000) == ("zebra-42", "q" * RETRIEVAL.max_keyword_characters)


@given(st.lists(st.text(alphabet="abcdefghij-", min_size=2, max_size=500), max_size=20))
def test_the_words_sent_to_the_database_stay_within_the_pattern_budget(words):
    found = keywords(" ".join(words))
    assert all(len(word) <= RETRIEVAL.max_keyword_characters for word in found)
    assert sum(len(word) for word in found) <= RETRIEVAL.max_pattern_characters


@given(st.lists(st.lists(WORDS, min_size=1, max_size=4), max_size=12), st.lists(WORDS, min_size=1, max_size=3))
def test_ranking_returns_at_most_five_most_keywords_first_then_newest(texts, words):
    candidates = [candidate(" ".join(text), seconds=-i) for i, text in enumerate(texts)]  # newest first

    matches = rank(candidates, words)

    assert len(matches) == min(RETRIEVAL.tool_results, len(candidates))
    order = [(-match.keywords_found, -match.timestamp.timestamp()) for match in matches]
    assert order == sorted(order)


def test_a_candidate_matched_past_the_part_read_still_counts_once():
    [match] = rank([candidate("nothing of it in the first part")], ["kiwi"])
    assert match.keywords_found == 1


@given(st.text(max_size=2000), st.lists(WORDS, max_size=3))
def test_an_excerpt_never_exceeds_the_limit(text, words):
    assert len(excerpt(text, words)) <= RETRIEVAL.excerpt_characters


@given(st.integers(min_value=0, max_value=3000), st.integers(min_value=0, max_value=3000))
def test_an_excerpt_shows_the_first_keyword_wherever_it_is(before, after):
    text = "x " * before + "ZEBRA-42" + " y" * after
    clipped = excerpt(text, ["zebra-42"])
    assert "ZEBRA-42" in clipped
    assert len(clipped) <= RETRIEVAL.excerpt_characters


def test_the_answer_names_sender_and_utc_time_of_each_match():
    naive_utc = candidate("the vault code is ZEBRA-42")
    naive_utc = Candidate(naive_utc.message_id, START.replace(tzinfo=None), "Machine", "AI", naive_utc.text)

    text = answer(rank([naive_utc], ["zebra-42"]), ["zebra-42"])

    assert text.splitlines()[1] == "- [2026-01-01T00:00:00+00:00] AI (Machine): the vault code is ZEBRA-42"
