"""Older messages quoted in a turn's request without any tool call, on SQLite and PostgreSQL (issue 38, item 3)."""

from itertools import pairwise

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import func, select

from langflow_session_memory.services.session_memory.rules.assembly import EXCERPTS_ACKNOWLEDGEMENT
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.storage import messages
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.test_service import WINDOW, row

FACT = "Ugh, my sister Priya called from Lisbon again, the trams there are packed."
QUESTION = "Long week at work. Which city does my sister live in?"


async def chatty_session(sessions, key, count: int) -> list[MessageTable]:
    """An old fact, then ``count`` messages of small talk that all say "work" (the last an answer), then the
    question (the input)."""
    rows = chat_rows(key, count + 2 + (count + 1) % 2)  # an odd number of rows: the last one is the user's
    rows[0].text = FACT
    for filler in rows[1:-1]:
        filler.text = f"Another day at work, meeting number {filler.text.split()[1]}."
    rows[-1].text = QUESTION
    return await store_rows(sessions, rows)


def turn_for(key, rows) -> Turn:
    return Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id, input_text=rows[-1].text)


async def stored_count(sessions) -> int:
    async with sessions() as session:
        return await session.scalar(select(func.count()).select_from(MessageTable))


async def test_an_old_message_the_question_names_is_quoted_after_the_window_and_never_stored(service, sessions, key):
    rows = await chatty_session(sessions, key, 6 * RETRIEVAL.unindexed_per_word)
    stored = await stored_count(sessions)

    history = await service.build_history(turn_for(key, rows), ScriptedChatModel())

    assert [excerpt.text for excerpt in history.excerpts] == [FACT]
    quoted, acknowledgement = history.messages[-2:]
    assert FACT in quoted.text
    assert (quoted.sender, acknowledgement.sender, acknowledgement.text) == (
        "User",
        "Machine",
        EXCERPTS_ACKNOWLEDGEMENT,
    )
    assert history.messages[-3].text == rows[-2].text  # after the window: the request before it is unchanged
    senders = [message.sender for message in history.messages]
    assert all(first != second for first, second in pairwise(senders))  # roles alternate
    assert await stored_count(sessions) == stored  # nothing stored: not the excerpts, not their frame
    assert FACT not in (await row(sessions, key)).summary


async def test_a_question_whose_words_the_window_holds_quotes_nothing(service, sessions, key):
    rows = await chatty_session(sessions, key, 30)
    turn = turn_for(key, rows)
    history = await service.build_history(
        Turn(key=key, n_messages=WINDOW, input_message_id=turn.input_message_id, input_text="How was work today?"),
        ScriptedChatModel(),
    )
    assert history.excerpts == ()
    assert history.messages[-1].text == rows[-2].text


async def test_each_word_finds_its_own_newest_messages_however_many_hold_another(sessions, key):
    rows = await chatty_session(sessions, key, 4 * RETRIEVAL.unindexed_per_word)
    async with sessions() as session:
        found = await messages.older_matching_each(
            session,
            key,
            before=messages.cursor_of(rows[-1]),
            words=("sister", "work", "car"),
            limit=RETRIEVAL.unindexed_per_word,
            read_characters=100,
        )
    assert [candidate.text for candidate in found["sister"]] == [FACT]
    assert len(found["work"]) == RETRIEVAL.unindexed_per_word
    assert found["car"] == []  # "scarf" or "Oscar" are not "car"; none here either


async def test_a_statement_quotes_nothing_however_rare_its_words(service, sessions, key):
    rows = await chatty_session(sessions, key, 30)
    statement = "My sister is visiting next week."
    turn = Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id, input_text=statement)
    assert (await service.build_history(turn, ScriptedChatModel())).excerpts == ()
