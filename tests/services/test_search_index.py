"""The full-text index of older messages on SQLite (FTS5) and PostgreSQL (tsvector + GIN): filled after an answer in
bounded batches, found stemmed and ranked by the question's rarest words, quoted with neighbours (issue 52)."""

import pytest
from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import Column, MetaData, Table, Uuid, delete, func, select, text, update
from sqlalchemy.exc import OperationalError

from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.ranking import NOTES_SENDER
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.storage import cleanup, messages, search_index, store
from langflow_session_memory.services.session_memory.storage.cleanup import install_cleanup_listeners, sweep
from langflow_session_memory.services.session_memory.storage.model import SessionMemorySearchEntry
from langflow_session_memory.services.session_memory.summary.notes import Notes
from tests.chat import ScriptedChatModel, chat_rows, store_rows

WINDOW = 10
QUESTION = "Which marathon did I sign up for?"
ENTRY = SessionMemorySearchEntry.__table__
SAID = {
    3: "I bought new shoes yesterday, they look great.",
    4: "Nice! For walking or running?",
    5: "These are for running, I signed up for the Lisbon half marathon.",
    40: "I have been painting landscapes on weekends lately.",
}


@pytest.fixture(autouse=True)
def cleanup_listeners():
    install_cleanup_listeners()


async def long_chat(sessions, key, count: int = 120) -> list[MessageTable]:
    """``count`` messages of small talk with a few facts among them; the last one is the user's question."""
    rows = chat_rows(key, count + (count + 1) % 2)
    for index, row in enumerate(rows):
        row.text = SAID.get(index, f"Small talk number {index} about the weather and the week.")
    return await store_rows(sessions, rows)


def asking(key, rows, question: str) -> Turn:
    rows[-1].text = question
    return Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id, input_text=question)


async def entries(sessions, key=None) -> int:
    statement = select(func.count()).select_from(ENTRY)
    if key is not None:
        statement = statement.where(ENTRY.c.session_id == key.session_id)
    async with sessions() as session:
        return await session.scalar(statement)


async def test_after_an_answer_every_message_older_than_the_next_window_is_indexed(service, sessions, key):
    rows = await long_chat(sessions, key)

    indexed = await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))

    assert indexed == len(rows) - (WINDOW - 1)
    assert await entries(sessions, key) == indexed
    assert await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id)) == 0


async def test_a_session_switched_on_late_is_indexed_in_batches_of_its_size(service, sessions, key):
    rows = await long_chat(sessions, key, 2 * RETRIEVAL.index_batch + 30)

    first = await service.retrieval.index_older(
        Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id), batches=1
    )
    assert first == RETRIEVAL.index_batch
    rest = await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))
    assert first + rest == len(rows) - (WINDOW - 1)


async def test_a_question_is_answered_from_the_message_after_the_one_its_words_find(service, sessions, key):
    rows = await long_chat(sessions, key)
    await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))
    turn = asking(key, rows, "What were the new shoes for, walking?")
    async with sessions.begin() as session:
        await session.execute(update(MessageTable).where(MessageTable.id == rows[-1].id).values(text=turn.input_text))

    history = await service.build_history(turn, ScriptedChatModel())

    quoted = [excerpt.text for excerpt in history.excerpts]
    assert SAID[5] in quoted  # the answer, which holds none of the question's words but follows the hit
    assert quoted.index(SAID[3]) < quoted.index(SAID[4]) < quoted.index(SAID[5])  # as said, oldest first
    assert "These are for running" in history.messages[-2].text


async def test_a_word_is_found_stemmed(service, sessions, key):
    rows = await long_chat(sessions, key)
    await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))

    history = await service.build_history(asking(key, rows, "What did I paint?"), ScriptedChatModel())

    assert SAID[40] in [excerpt.text for excerpt in history.excerpts]


async def test_a_behind_index_searches_by_words_as_before(service, sessions, key, captured_logs):
    rows = await long_chat(sessions, key)

    history = await service.build_history(asking(key, rows, QUESTION), ScriptedChatModel())

    assert [excerpt.text for excerpt in history.excerpts] == [SAID[5]]
    assert any(line.startswith("session_memory_index_behind") for line in events(captured_logs))


async def test_a_dropped_index_falls_back_to_the_words_search_with_an_error_logged(
    service, sessions, key, captured_logs
):
    rows = await long_chat(sessions, key)
    await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))
    async with sessions.begin() as session:
        await session.execute(text("DROP TABLE session_memory_search_entry"))

    history = await service.build_history(asking(key, rows, QUESTION), ScriptedChatModel())

    assert [excerpt.text for excerpt in history.excerpts] == [SAID[5]]
    assert any("session_memory_index_failed where=search" in line for line in events(captured_logs))
    assert await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id)) == 0
    assert any("session_memory_index_failed where=indexing" in line for line in events(captured_logs))


async def test_the_index_holds_one_chat_only_per_search(service, sessions, key):
    rows = await long_chat(sessions, key)
    other = type(key)(flow_id=key.flow_id, owner_id=key.owner_id, session_id="another session")
    other_rows = chat_rows(other, 30)
    other_rows[0].text = "My running shoes are red."
    await store_rows(sessions, other_rows)
    for chat, chat_rows_ in ((key, rows), (other, other_rows)):
        await service.retrieval.index_older(Turn(key=chat, n_messages=WINDOW, input_message_id=chat_rows_[-1].id))

    history = await service.build_history(asking(key, rows, "Which shoes were red?"), ScriptedChatModel())

    assert all("red" not in excerpt.text for excerpt in history.excerpts)


async def test_deleted_messages_leave_the_index_with_them(service, sessions, key):
    rows = await long_chat(sessions, key)
    await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))
    async with sessions.begin() as session:
        await session.execute(delete(MessageTable).where(MessageTable.id.in_([row.id for row in rows[:50]])))

    assert await entries(sessions, key) == len(rows) - (WINDOW - 1) - 50


def events(captured_logs) -> list[str]:
    return [entry["event"] for entry in captured_logs]


async def indexed_chat(service, sessions, key) -> list[MessageTable]:
    rows = await long_chat(sessions, key)
    await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))
    return rows


async def quoted(service, key, rows, question: str = QUESTION) -> list[str]:
    history = await service.build_history(asking(key, rows, question), ScriptedChatModel())
    return [excerpt.text for excerpt in history.excerpts]


async def test_an_edited_message_is_found_by_its_new_words_only(service, sessions, key):
    rows = await indexed_chat(service, sessions, key)
    async with sessions.begin() as session:
        message = await session.get(MessageTable, rows[5].id)
        message.text = "These are for running, I signed up for the Porto marathon."

    assert "These are for running, I signed up for the Porto marathon." in await quoted(
        service, key, rows, "Which city was the marathon in, Porto?"
    )
    assert not [text for text in await quoted(service, key, rows, "Was it Lisbon?") if "Lisbon" in text]


async def test_a_single_deleted_message_leaves_the_index(service, sessions, key):
    rows = await indexed_chat(service, sessions, key)
    async with sessions.begin() as session:
        await session.delete(await session.get(MessageTable, rows[5].id))

    assert SAID[5] not in await quoted(service, key, rows)


async def test_a_renamed_session_is_searched_under_its_new_id(service, sessions, key):
    rows = await indexed_chat(service, sessions, key)
    async with sessions.begin() as session:
        for message in (await session.execute(select(MessageTable))).scalars():
            message.session_id = "renamed"
    renamed = type(key)(flow_id=key.flow_id, owner_id=key.owner_id, session_id="renamed")
    for row_ in rows:
        row_.session_id = "renamed"

    assert SAID[5] in await quoted(service, renamed, rows)
    assert await entries(sessions, key) == 0


async def test_a_deleted_flow_takes_its_entries(service, sessions, key):
    await indexed_chat(service, sessions, key)
    flow = Table("flow", MetaData(), Column("id", Uuid, primary_key=True))  # the columns Langflow's delete reads
    async with sessions() as session:
        await session.run_sync(lambda sync: flow.create(sync.connection()))
        await session.execute(flow.insert().values(id=key.flow_id))
        await session.execute(delete(flow).where(flow.c.id == key.flow_id))  # cascade_delete_flow's statement
        await session.commit()

    assert await entries(sessions) == 0


async def test_the_sweep_removes_entries_whose_message_went_behind_langflows_back(service, sessions, key):
    rows = await indexed_chat(service, sessions, key)
    async with sessions.begin() as session:
        await session.execute(text("DELETE FROM message"))  # raw SQL: no listener sees it
    assert await entries(sessions) == len(rows) - (WINDOW - 1)

    await sweep(sessions)

    assert await entries(sessions) == 0


async def test_a_batch_refused_by_a_writer_that_committed_meanwhile_is_tried_again(
    service, sessions, key, captured_logs, monkeypatch
):
    rows = await long_chat(sessions, key)
    index_batch = search_index.index_batch
    refusals = []

    async def refused_once(session, chat, **kwargs):
        if not refusals:
            refusals.append(chat)
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        return await index_batch(session, chat, **kwargs)

    monkeypatch.setattr(search_index, "index_batch", refused_once)

    indexed = await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))

    assert refusals
    assert indexed == len(rows) - (WINDOW - 1)
    assert not [event for event in events(captured_logs) if "index_failed" in event]


async def test_with_the_state_table_dropped_a_rename_and_an_edit_still_reach_the_index(service, sessions, key):
    rows = await indexed_chat(service, sessions, key)
    async with sessions.begin() as session:
        await session.execute(text("DROP TABLE session_memory_state"))
    async with sessions.begin() as session:
        for message in (await session.execute(select(MessageTable))).scalars():
            message.session_id = "renamed"
            if message.id == rows[5].id:
                message.text = "These are for running, I signed up for the Porto marathon."

    async with sessions() as session:
        moved = (
            await session.execute(select(ENTRY.c.session_id, ENTRY.c.body).where(ENTRY.c.message_id == rows[5].id))
        ).one()
    assert tuple(moved) == ("renamed", "These are for running, I signed up for the Porto marathon.")


async def test_a_pasted_log_is_indexed_by_its_start_only(service, sessions, key):
    rows = chat_rows(key, 30)
    rows[0].text = "invoice " + "x" * 50_000
    await store_rows(sessions, rows)
    await service.retrieval.index_older(Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id))

    async with sessions() as session:
        body = await session.scalar(select(ENTRY.c.body).where(ENTRY.c.message_id == rows[0].id))
    assert len(body) == RETRIEVAL.indexed_characters
    assert body.startswith("invoice ")


MARATHON_FACT = "User signed up for the Lisbon half marathon"


async def fold_dropping_the_marathon_fact(service, sessions, key) -> list[MessageTable]:
    """An indexed chat folded past its facts; then notes at the word limit whose oldest fact is the marathon, and a
    fold whose new facts push it out."""
    rows = await indexed_chat(service, sessions, key)
    turn = Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id)
    await service.fold_after_turn(turn, ScriptedChatModel())
    crowded = Notes(facts=(MARATHON_FACT, *(f"Garden fact {index} about roses and tulips" for index in range(35))))
    async with sessions.begin() as session:
        folded = await store.load(session, key)
        assert await store.replace_summary(session, key, crowded.text(), version=folded.version)
    update = "Key facts:\n- User's sister Ana moved to Porto in March\nConversation so far:\n- family news"
    await service.fold_after_turn(turn, ScriptedChatModel(script=[update]))
    return rows


async def kept_facts(sessions, key) -> list:
    statement = select(ENTRY.c.body, ENTRY.c.source_message_id).where(
        ENTRY.c.session_id == key.session_id, ENTRY.c.sender == NOTES_SENDER
    )
    async with sessions() as session:
        return list(await session.execute(statement))


async def test_a_fact_the_notes_drop_is_kept_beside_the_message_it_came_from_and_found_again(
    service, sessions, key, captured_logs
):
    rows = await fold_dropping_the_marathon_fact(service, sessions, key)

    kept = {body: source for body, source in await kept_facts(sessions, key)}
    assert kept[MARATHON_FACT] == rows[5].id
    assert any(event.startswith("session_memory_facts_kept facts=1 sourced=1") for event in events(captured_logs))
    history = await service.build_history(asking(key, rows, "Which race in Lisbon was it?"), ScriptedChatModel())
    speakers = {excerpt.text: excerpt.sender for excerpt in history.excerpts}
    assert speakers[MARATHON_FACT] == NOTES_SENDER
    assert SAID[5] in speakers


async def test_a_kept_fact_goes_with_the_message_it_came_from_and_with_a_reset(service, sessions, key):
    rows = await fold_dropping_the_marathon_fact(service, sessions, key)
    facts = len(await kept_facts(sessions, key))
    async with sessions.begin() as session:
        await session.delete(await session.get(MessageTable, rows[5].id))
    assert MARATHON_FACT not in {body for body, _ in await kept_facts(sessions, key)}
    assert len(await kept_facts(sessions, key)) == facts - 1

    async with sessions.begin() as session:
        await cleanup.reset(session, key.flow_id, owner_id=key.owner_id, session_id=key.session_id, context_id="")
    assert await kept_facts(sessions, key) == []


async def test_the_sweep_keeps_a_fact_whose_source_is_unknown_and_the_newest_entry_is_a_message(service, sessions, key):
    rows = await indexed_chat(service, sessions, key)
    async with sessions.begin() as session:
        sourced = await search_index.keep_dropped_facts(
            session, key, ["Owns a bicycle called Zephyr"], before=messages.cursor_of(rows[-1])
        )
        newest = await search_index.newest_indexed(session, key)
    assert sourced == 0
    assert newest.message_id == rows[-WINDOW].id

    await sweep(sessions)

    assert [body for body, _ in await kept_facts(sessions, key)] == ["Owns a bicycle called Zephyr"]


async def test_with_the_index_dropped_a_fold_that_drops_facts_still_commits(service, sessions, key, captured_logs):
    original = store.replace_summary

    async def replaced_then_dropped(session, key_, summary, *, version):  # the index goes between two folds
        await session.execute(text("DROP TABLE session_memory_search_entry"))
        return await original(session, key_, summary, version=version)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "replace_summary", replaced_then_dropped)
        await fold_dropping_the_marathon_fact(service, sessions, key)

    async with sessions() as session:
        state = await store.load(session, key)
    assert MARATHON_FACT not in state.summary  # the fold that dropped it committed
    assert "User's sister Ana moved to Porto in March" in state.summary
    assert any("session_memory_index_failed where=notes" in line for line in events(captured_logs))
