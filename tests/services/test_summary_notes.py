"""A fold's lines merged into the notes: every earlier fact kept (or handed back when the word limit takes it)."""

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.summary.notes import Notes, merged, newest_within, parsed

PREVIOUS = "Key facts:\n- Sister Priya lives in Lisbon\n- Bought a green Subaru\nConversation so far:\n- family, cars"


def test_a_fold_adds_its_facts_after_the_earlier_ones_and_keeps_every_earlier_fact():
    update = "Key facts:\n* Learning the cello on Thursdays\nConversation so far:\n1. hobbies"
    result = merged(PREVIOUS, update, 300)
    assert result.notes.text() == (
        "Key facts:\n- Sister Priya lives in Lisbon\n- Bought a green Subaru\n- Learning the cello on Thursdays\n"
        "Conversation so far:\n- family, cars\n- hobbies"
    )
    assert (result.dropped_conversation, result.dropped_facts) == (0, ())


def test_a_fact_the_model_writes_again_is_not_repeated():
    update = "Key facts:\n- sister priya lives in lisbon.\nConversation so far:\n- family"
    assert merged(PREVIOUS, update, 300).notes.facts == ("Sister Priya lives in Lisbon", "Bought a green Subaru")


def test_a_changed_fact_stands_after_the_one_it_replaces():
    update = "Key facts:\n- Now lives in Denver, not Portland\nConversation so far:\n- the move"
    facts = merged("Key facts:\n- Moved to Portland\nConversation so far:\n", update, 300).notes.facts
    assert facts == ("Moved to Portland", "Now lives in Denver, not Portland")


def test_over_the_limit_the_oldest_conversation_lines_go_first_then_the_oldest_facts():
    previous = Notes(facts=tuple(f"fact {i} holds" for i in range(5)), conversation=("old topic", "older topic"))
    update = "Key facts:\n- fact 5 holds\nConversation so far:\n- new topic"
    limit = Notes(facts=tuple(f"fact {i} holds" for i in range(2, 6)), conversation=()).words()
    result = merged(previous.text(), update, limit)
    assert result.notes.facts == ("fact 2 holds", "fact 3 holds", "fact 4 holds", "fact 5 holds")
    assert result.notes.conversation == ()
    assert (result.dropped_conversation, result.dropped_facts) == (3, ("fact 0 holds", "fact 1 holds"))


def test_a_heading_with_its_items_on_its_own_line_is_read_as_its_section():
    written = "Key facts: - Owns a guinea pig, Oscar\n- Conversation so far: - work - the band"
    assert parsed(written) == Notes(facts=("Owns a guinea pig, Oscar",), conversation=("work", "the band"))


def test_lines_before_any_heading_are_facts():
    assert parsed("ACME is the customer\nKey facts:\n- PRJ-123").facts == ("ACME is the customer", "PRJ-123")


LINES = st.lists(st.from_regex(r"[a-z]{1,8}( [a-z]{1,8}){0,6}", fullmatch=True), max_size=12)


@given(earlier=LINES, new=LINES, limit=st.integers(min_value=4, max_value=120))
def test_notes_fit_the_limit_and_lose_only_their_oldest_facts_counted(earlier, new, limit):
    previous = Notes(facts=tuple(earlier)).text()
    result = merged(previous, Notes(facts=tuple(new)).text(), limit)
    every = merged(previous, Notes(facts=tuple(new)).text(), 10_000).notes.facts
    assert result.notes.words() <= limit or not result.notes.facts
    assert result.dropped_facts + result.notes.facts == every  # nothing lost: the oldest dropped, the newest kept


def test_the_newest_notes_that_fit_are_kept_and_none_when_nothing_fits():
    summary = Notes(facts=tuple(f"fact {i} about the project" for i in range(40))).text()

    kept = newest_within(summary, lambda text: len(text.split()) <= 100, 300)

    assert len(kept.split()) <= 100
    assert parsed(kept).facts[-1] == "fact 39 about the project"  # the newest stay
    assert newest_within(summary, lambda text: text == "", 300) == ""  # no notes, the rest still sent
    assert newest_within(summary, lambda _text: False, 300) is None
