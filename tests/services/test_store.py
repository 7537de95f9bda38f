"""The state store on SQLite and PostgreSQL: keys, compare-and-swap, races, pauses, deletes, sweep."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import func, select

from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey, SessionState
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.storage import messages, store
from langflow_session_memory.services.session_memory.storage.model import SessionMemoryState
from tests.chat import START, chat_rows


def new_key(**overrides) -> SessionKey:
    values = {"flow_id": uuid.uuid4(), "owner_id": uuid.uuid4(), "session_id": "New Session 0", "context_id": ""}
    return SessionKey(**{**values, **overrides})


async def count_rows(sessions, key: SessionKey) -> int:
    table = SessionMemoryState.__table__
    async with sessions() as session:
        return await session.scalar(
            select(func.count())
            .select_from(table)
            .where(table.c.flow_id == key.flow_id, table.c.owner_id == key.owner_id)
        )


async def test_missing_row_loads_as_none(sessions):
    async with sessions() as session:
        assert await store.load(session, new_key()) is None


async def test_keys_with_long_unicode_and_empty_parts_round_trip(sessions):
    keys = [
        new_key(session_id="", context_id=""),
        new_key(session_id="сессия-会话-🙂" * 40, context_id="контекст-🙂"),
        new_key(session_id="a" * 1000, context_id="b" * 500),
    ]
    async with sessions.begin() as session:
        for key in keys:
            await store.create_if_absent(session, key)
    async with sessions() as session:
        for key in keys:
            state = await store.load(session, key)
            assert state.key == key
            assert (state.version, state.summary, state.cursor) == (0, "", None)


async def test_empty_context_and_named_context_are_different_rows(sessions):
    key = new_key()
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.create_if_absent(session, SessionKey(key.flow_id, key.owner_id, key.session_id, "ctx"))
        await store.create_if_absent(session, key)
    assert await count_rows(sessions, key) == 2


async def test_a_turn_s_one_statement_reads_the_row_as_load_does(sessions):
    key = new_key()
    [message] = chat_rows(key, 1, first=1)  # a second after the cursor
    async with sessions.begin() as session:
        session.add(message)
        seen = await store.create_if_absent(session, key)
        cursor = Cursor(timestamp=START, message_id=uuid.uuid4())
        await store.compare_and_swap(session, seen, SessionState(key=key, summary="summary", cursor=cursor))
        await store.pause(session, key, datetime(2026, 1, 3, tzinfo=UTC), "timeout")
        await store.record_call_size(session, key, 1234)
        await store.add_unreported_usage(
            session, key, TokenUsage(input_tokens=5, output_tokens=6, cached_input_tokens=7)
        )
        await store.claim_fold(
            session,
            await store.load(session, key),
            datetime(2026, 1, 2, tzinfo=UTC),
            datetime(2026, 1, 1, tzinfo=UTC),
            timedelta(days=1),
        )
    async with sessions() as session:
        [read], joined = await messages.newest_unfolded(session, key, 10)
        loaded = await store.load(session, key)

    assert read.id == message.id
    assert joined == loaded
    assert all(
        getattr(loaded, name) for name in ("summary", "cursor", "paused_until", "last_error", "last_call_tokens")
    )
    assert (loaded.fold_claimed_until, loaded.unreported_usage.cached_input_tokens) != (None, 0)


async def test_concurrent_creates_of_one_key_leave_one_row(sessions):
    key = new_key()

    async def create():
        async with sessions.begin() as session:
            return await store.create_if_absent(session, key)

    results = await asyncio.gather(*(create() for _ in range(4)))
    assert {state.version for state in results} == {0}
    assert await count_rows(sessions, key) == 1


async def test_compare_and_swap_between_two_connections_has_one_winner(sessions):
    key = new_key()
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
    cursor = Cursor(datetime(2026, 1, 1, tzinfo=UTC), uuid.uuid4())
    first = seen.__class__(key=key, summary="first", cursor=cursor, folded_count=20)
    second = seen.__class__(key=key, summary="second", cursor=cursor, folded_count=20)

    async with sessions() as one, sessions() as two:
        assert await store.compare_and_swap(one, seen, first)
        racing = asyncio.create_task(store.compare_and_swap(two, seen, second))
        await asyncio.sleep(0.2)  # the second UPDATE now waits on the first one's lock
        await one.commit()
        lost = not await racing
        await two.commit()

    assert lost
    async with sessions() as session:
        winner = await store.load(session, key)
    assert (winner.summary, winner.version, winner.folded_count, winner.cursor) == ("first", 1, 20, cursor)


async def test_a_worker_whose_claim_ran_out_leaves_the_next_workers_claim_alone(sessions):
    key, now, longest = new_key(), datetime.now(UTC), timedelta(minutes=15)
    first_until, second_until = now + timedelta(minutes=1), now + timedelta(minutes=3)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(session, seen, first_until, now, longest)
        later = now + timedelta(minutes=2)  # the first claim ran out: a second worker takes the fold
        assert await store.claim_fold(session, seen, second_until, later, longest)

        await store.release_fold(session, key, first_until)  # the first worker finishes late

    async with sessions() as session:
        assert (await store.load(session, key)).fold_claimed_until == second_until


async def test_pause_keeps_summary_and_cursor(sessions):
    key = new_key()
    until = datetime.now(UTC) + timedelta(minutes=10)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        await store.compare_and_swap(session, seen, seen.__class__(key=key, summary="notes", folded_count=20))
        await store.pause(session, key, until, "timeout")
    async with sessions() as session:
        state = await store.load(session, key)
    assert (state.summary, state.folded_count, state.last_error) == ("notes", 20, "timeout")
    assert state.is_paused(until - timedelta(seconds=1))
    assert not state.is_paused(until)


async def test_pause_never_brings_back_a_deleted_row(sessions):
    key = new_key()
    async with sessions.begin() as session:
        await store.pause(session, key, datetime.now(UTC) + timedelta(minutes=10), "model error")
    async with sessions() as session:
        assert await store.load(session, key) is None


async def test_unreported_fold_usage_is_taken_once(sessions):
    key = new_key()
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.add_unreported_usage(session, key, TokenUsage(300, 40))
        await store.add_unreported_usage(session, key, TokenUsage(200, 10))
    async with sessions() as session:
        seen = await store.load(session, key)
    assert (seen.unreported_usage.input_tokens, seen.unreported_usage.output_tokens) == (500, 50)
    async with sessions.begin() as session:
        assert await store.take_unreported_usage(session, seen)
        assert not await store.take_unreported_usage(session, seen)
    async with sessions() as session:
        after = await store.load(session, key)
    assert (after.unreported_usage.input_tokens, after.unreported_usage.output_tokens) == (0, 0)


async def test_usage_added_after_a_read_is_not_taken_with_it(sessions):
    key = new_key()
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.add_unreported_usage(session, key, TokenUsage(300, 40))
    async with sessions() as session:
        seen = await store.load(session, key)
    async with sessions.begin() as session:
        await store.add_unreported_usage(session, key, TokenUsage(100, 5))
        assert not await store.take_unreported_usage(session, seen)
    async with sessions() as session:
        assert (await store.load(session, key)).unreported_usage.input_tokens == 400


async def test_sweep_deletes_only_rows_whose_messages_are_gone(sessions):
    alive, orphan = new_key(), new_key()
    async with sessions.begin() as session:
        session.add(
            MessageTable(
                sender="User",
                sender_name="User",
                session_id=alive.session_id,
                text="hello",
                flow_id=alive.flow_id,
                user_id=alive.owner_id,
            )
        )
        await store.create_if_absent(session, alive)
        await store.create_if_absent(session, orphan)
    async with sessions.begin() as session:
        removed = await store.sweep_orphans(session)
    async with sessions() as session:
        assert removed >= 1
        assert await store.load(session, alive) is not None
        assert await store.load(session, orphan) is None
