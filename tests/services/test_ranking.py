"""The pure part of the full-text search: the words searched, BM25 over the rarest, passages with neighbours."""

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.ranking import (
    Scored,
    passage_budget,
    passages,
    query_words,
    rank,
    rarest,
    room_for_passages,
)
from langflow_session_memory.services.session_memory.rules.state import Cursor
from langflow_session_memory.services.session_memory.rules.token_estimate import estimated_size

START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Row:
    message_id: object
    timestamp: datetime
    sender: str
    sender_name: str
    text: str
    words: int

    @property
    def cursor(self) -> Cursor:
        return Cursor(timestamp=self.timestamp, message_id=self.message_id)


def said(minute: int, text: str = "", words: int = 10) -> Row:
    return Row(uuid.UUID(int=minute + 1), START + timedelta(minutes=minute), "User", "Caroline", text, words)


END = Cursor(timestamp=START + timedelta(days=1), message_id=uuid.UUID(int=0))


def test_filler_and_stop_words_are_never_searched_however_rare():
    assert query_words("Answer in a few words from our conversation: what did Caroline paint last summer?") == (
        "caroline",
        "paint",
        "last",
        "summer",
    )


def test_ids_keep_their_punctuation_and_a_long_question_is_cut():
    assert query_words("Is PRJ-123 on v2.1?") == ("prj-123", "v2.1")
    assert len(query_words(" ".join(f"word{i}" for i in range(50)))) == RETRIEVAL.query_words


def test_the_rarest_words_are_searched_and_two_forms_of_one_stem_count_once():
    common = [said(i) for i in range(40)]
    rare = [said(100)]
    found = {"weather": common, "painting": rare, "paint": rare, "lisbon": [said(101), said(102)]}
    assert rarest(found, most=2) == ["painting", "lisbon"]


def test_a_message_holding_a_rare_word_outranks_newer_ones_holding_a_common_word():
    old = said(0, "I painted a lake")
    newer = [said(100 + i, "weather") for i in range(30)]
    ranked = rank({"weather": newer, "paint": [old]}, messages=500, average_words=10)
    assert ranked[0].found is old


def test_a_shorter_message_outranks_a_longer_one_with_the_same_words_and_equals_go_newest_first():
    short, long_ = said(0, words=8), said(1, words=16)
    assert [scored.found for scored in rank({"lake": [long_, short]}, messages=100, average_words=10)] == [
        short,
        long_,
    ]
    first, second = said(0), said(1)
    assert [scored.found for scored in rank({"lake": [first, second]}, messages=100, average_words=10)] == [
        second,
        first,
    ]


def test_a_hit_is_quoted_with_the_message_before_and_after_it_in_the_order_said():
    question, hit, reply = said(0, "For walking or running?"), said(1, "new shoes"), said(2, "These are for running.")
    quoted = passages([Scored(hit, 3.0)], {hit.cursor: (question, reply)}, before=END, words=("shoes",))
    assert [line.text for line in quoted] == [question.text, hit.text, reply.text]
    assert [line.score for line in quoted] == [0.0, 3.0, 0.0]


def test_a_neighbour_inside_the_window_is_left_out_it_is_sent_anyway():
    hit, reply = said(1, "new shoes"), said(2, "These are for running.")
    quoted = passages([Scored(hit, 3.0)], {hit.cursor: (None, reply)}, before=reply.cursor, words=("shoes",))
    assert [line.text for line in quoted] == [hit.text]


def test_adjacent_passages_merge_and_quote_each_message_once():
    rows = [said(i, f"line {i}") for i in range(4)]
    hits = [Scored(rows[1], 2.0), Scored(rows[2], 1.0)]
    around = {rows[1].cursor: (rows[0], rows[2]), rows[2].cursor: (rows[1], rows[3])}
    assert [line.text for line in passages(hits, around, before=END, words=())] == [f"line {i}" for i in range(4)]


def test_a_hit_whose_neighbours_do_not_fit_comes_alone():
    hit, long_before = said(1, "shoes"), said(0, "blah " * 400)
    quoted = passages([Scored(hit, 1.0)], {hit.cursor: (long_before, None)}, before=END, words=(), tokens=50)
    assert [line.text for line in quoted] == ["shoes"]


def test_the_budget_follows_a_small_window():
    assert passage_budget(None) == 600
    assert passage_budget(2048) == 170


texts = st.text(alphabet="abc xyz", max_size=600)


@given(st.lists(texts, min_size=1, max_size=12), st.integers(min_value=20, max_value=800))
def test_passages_stay_within_budget_in_order_without_repeats(texts_, tokens):
    rows = [said(i, text) for i, text in enumerate(texts_)]
    around = {
        row.cursor: (rows[i - 1] if i else None, rows[i + 1] if i + 1 < len(rows) else None)
        for i, row in enumerate(rows)
    }
    hits = [Scored(row, float(len(rows) - i)) for i, row in enumerate(reversed(rows))]
    quoted = passages(hits, around, before=END, words=("abc",), tokens=tokens)
    assert estimated_size(line.text for line in quoted) <= tokens
    assert [line.timestamp for line in quoted] == sorted(line.timestamp for line in quoted)
    assert len({line.message_id for line in quoted}) == len(quoted)


def test_a_hit_holding_only_the_common_words_is_left_out_beside_one_holding_the_rare_word():
    answer = said(0, "team 10 locker")
    others = [said(i, "team locker") for i in range(1, 20)]
    ranked = rank(
        {"10": [answer], "team": [answer, *others], "locker": [answer, *others]}, messages=20, average_words=3
    )
    assert [scored.found for scored in ranked] == [answer]


def test_a_question_keeps_room_for_its_passages_inside_the_requests_fit_a_statement_none():
    assert room_for_passages("Which shoes did I buy?", 2048) == passage_budget(2048) == 170
    assert room_for_passages("I bought shoes.", 2048) == 0


def test_words_that_filled_their_matches_are_left_out_beside_a_rarer_one():
    rare = said(0, "zebra")
    full = [said(100 + i, "deploy release") for i in range(20)]
    found = {"deploy": full, "release": full[::-1][:20], "zebra": [rare]}
    assert rarest(found, per_word=20) == ["zebra"]
    assert rarest({"deploy": full}, per_word=20) == ["deploy"]  # alone, a common word is still searched
