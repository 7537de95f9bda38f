"""Cleanup listeners on SQLite and PostgreSQL: Langflow's own ORM statements, our rows in step."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import delete, select, text
from sqlalchemy.exc import OperationalError

from langflow_session_memory.services.session_memory.rules.state import SessionKey, SessionState
from langflow_session_memory.services.session_memory.storage import cleanup, store
from langflow_session_memory.services.session_memory.storage.cleanup import install_cleanup_listeners, sweep
from langflow_session_memory.services.session_memory.storage.messages import cursor_of
from tests.chat import chat_rows, store_rows


@pytest.fixture(autouse=True)
def listeners():
    install_cleanup_listeners()


def new_key(session_id: str = "New Session 0", **parts) -> SessionKey:
    return SessionKey(**{"flow_id": uuid.uuid4(), "owner_id": uuid.uuid4(), "session_id": session_id, **parts})


async def folded_chat(sessions, key: SessionKey, total: int = 30, folded: int = 20) -> list[MessageTable]:
    """``total`` stored messages, the first ``folded`` of them covered by a summary row."""
    rows = await store_rows(sessions, chat_rows(key, total))
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        summary = SessionState(key, summary="notes", cursor=cursor_of(rows[folded - 1]), folded_count=folded)
        assert await store.compare_and_swap(session, seen, summary)
    return rows


async def state_of(sessions, key: SessionKey) -> SessionState | None:
    async with sessions() as session:
        return await store.load(session, key)


async def delete_messages(sessions, rows) -> None:
    """Langflow's bulk delete by ids (``delete_messages_for_user``)."""
    async with sessions.begin() as session:
        ids = [row.id for row in rows]
        await session.execute(
            delete(MessageTable).where(MessageTable.id.in_(ids)).execution_options(synchronize_session="fetch")
        )


async def test_deleting_a_folded_message_drops_the_summary(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    await delete_messages(sessions, [rows[3]])
    assert await state_of(sessions, key) is None


async def test_deleting_a_range_that_straddles_the_cursor_drops_the_summary(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)  # the summary covers messages 0-19
    await delete_messages(sessions, rows[15:26])
    assert await state_of(sessions, key) is None


async def test_deleting_unfolded_messages_keeps_the_summary(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    await delete_messages(sessions, rows[25:])
    assert (await state_of(sessions, key)).summary == "notes"


async def test_a_failed_turn_deleting_its_partial_answer_leaves_the_version_alone(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    before = await state_of(sessions, key)
    await delete_messages(sessions, [rows[-1]])  # lfx's run_agent deletes the half-stored answer of a failed run
    assert (await state_of(sessions, key)).version == before.version


async def test_a_change_during_a_fold_moves_the_version_so_the_fold_cannot_commit(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    async with sessions.begin() as session:
        seen = await store.load(session, key)
        now = datetime.now(UTC)
        assert await store.claim_fold(session, seen, now + timedelta(seconds=30), now, timedelta(minutes=5))
    await delete_messages(sessions, [rows[25]])
    assert (await state_of(sessions, key)).version == seen.version + 1


async def test_deleting_the_whole_session_removes_a_row_without_summary(sessions):
    key = new_key()
    rows = await store_rows(sessions, chat_rows(key, 5))
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.pause(session, key, rows[0].timestamp, "model error: could quote the user")
    await delete_messages(sessions, rows)
    assert await state_of(sessions, key) is None


async def test_deleting_one_flows_session_leaves_other_flows_and_owners_alone(sessions):
    mine, other_flow, other_owner = new_key(), new_key(), new_key()
    other_owner = SessionKey(mine.flow_id, other_owner.owner_id, mine.session_id)
    rows = await folded_chat(sessions, mine)
    for key in (other_flow, other_owner):
        await folded_chat(sessions, key)
    await delete_messages(sessions, rows)
    assert await state_of(sessions, mine) is None
    assert await state_of(sessions, other_flow) is not None
    assert await state_of(sessions, other_owner) is not None


async def test_renamed_session_carries_its_summary(sessions):
    key = new_key()
    await folded_chat(sessions, key)
    async with sessions.begin() as session:
        messages = (await session.execute(select(MessageTable).where(MessageTable.flow_id == key.flow_id))).scalars()
        for message in messages:
            message.session_id = "renamed"
    assert await state_of(sessions, key) is None
    moved = await state_of(sessions, SessionKey(key.flow_id, key.owner_id, "renamed"))
    assert (moved.summary, moved.folded_count) == ("notes", 20)


async def test_renaming_onto_a_session_with_its_own_summary_keeps_that_one(sessions):
    key = new_key()
    target = SessionKey(key.flow_id, key.owner_id, "existing")
    await folded_chat(sessions, key)
    await folded_chat(sessions, target)
    async with sessions.begin() as session:
        messages = (
            await session.execute(select(MessageTable).where(MessageTable.session_id == key.session_id))
        ).scalars()
        for message in messages:
            if message.flow_id == key.flow_id:
                message.session_id = "existing"
    assert await state_of(sessions, key) is None
    assert (await state_of(sessions, target)).folded_count == 20


async def test_editing_a_folded_message_drops_the_summary(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    async with sessions.begin() as session:
        message = await session.get(MessageTable, rows[5].id)
        message.text = "I take that back"
    assert await state_of(sessions, key) is None


async def test_editing_an_unfolded_message_keeps_the_summary(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    async with sessions.begin() as session:
        message = await session.get(MessageTable, rows[25].id)
        message.text = "a later correction"
    assert await state_of(sessions, key) is not None


async def test_single_object_delete_of_a_folded_message_drops_the_summary(sessions):
    key = new_key()
    rows = await folded_chat(sessions, key)
    async with sessions.begin() as session:
        await session.delete(await session.get(MessageTable, rows[0].id))
    assert await state_of(sessions, key) is None


async def test_raw_sql_delete_leaves_an_orphan_that_the_sweep_removes(sessions):
    key, alive = new_key(), new_key("Another session")
    await folded_chat(sessions, key)
    await folded_chat(sessions, alive)
    async with sessions.begin() as session:
        await session.execute(text("DELETE FROM message WHERE session_id = :s"), {"s": key.session_id})
    assert await state_of(sessions, key) is not None  # nothing saw that delete

    assert await sweep(sessions) >= 1
    assert await state_of(sessions, key) is None
    assert await state_of(sessions, alive) is not None


async def test_a_failure_of_ours_never_fails_langflows_delete_and_is_logged_without_text(
    sessions, monkeypatch, captured_logs
):
    key = new_key()
    rows = await folded_chat(sessions, key)

    def broken(*_args):  # a failed statement of ours: its error quotes the parameters, what a user wrote
        raise OperationalError(
            "DELETE FROM session_memory_state WHERE summary = :s", {"s": "USER-TEXT-77"}, Exception("disk full")
        )

    monkeypatch.setattr(cleanup, "_follow_changes", broken)
    await delete_messages(sessions, rows[:3])

    async with sessions() as session:
        left = (await session.execute(select(MessageTable.id).where(MessageTable.flow_id == key.flow_id))).all()
    assert len(left) == len(rows) - 3  # Langflow's delete committed
    [failure] = [log for log in captured_logs if log["event"].startswith("session_memory_cleanup_failed")]
    assert (failure["event"], failure["log_level"]) == (
        "session_memory_cleanup_failed action=delete_messages reason=OperationalError driver=Exception",
        "error",
    )
    assert not [log for log in captured_logs if "USER-TEXT-77" in str(log)]
