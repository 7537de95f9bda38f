"""A fold never keeps text deleted or edited while it runs, never stalls on a bad claim, never leaks text to logs.

SQLite and PostgreSQL, real rows in Langflow's message table, Langflow's own ORM
statements with our cleanup listeners installed.
"""

import asyncio
import uuid
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import delete
from sqlalchemy.exc import OperationalError

from langflow_session_memory.services.session_memory.folding.runner import FoldRunner
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS, DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import store
from langflow_session_memory.services.session_memory.storage.cleanup import install_cleanup_listeners
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.test_service import INLINE_BATCH, folded_turn

BATCH = DEFAULT_POLICY.batch_size
WINDOW = 10
MARKER = "SECRET-MARKER-7731"


@pytest.fixture(autouse=True)
def listeners():
    install_cleanup_listeners()


async def seed(sessions, key, count) -> list[MessageTable]:
    rows = chat_rows(key, count)
    rows[5].text = f"message 5 holds {MARKER} which the user deletes later"
    return await store_rows(sessions, rows)


async def state(sessions, key):
    async with sessions() as session:
        return await store.load(session, key)


class ModelThatChangesTheBatch(ScriptedChatModel):
    """While the fold's model call runs, the user deletes or edits a message of the batch."""

    change: object = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        await self.change()
        return self._generate(messages)


async def test_a_message_deleted_while_its_batch_folds_never_reaches_the_summary(service, sessions, key):
    rows = await seed(sessions, key, BATCH + WINDOW)

    async def delete_it():  # Langflow's bulk delete by ids (DELETE /api/v1/monitor/messages)
        async with sessions.begin() as session:
            await session.execute(delete(MessageTable).where(MessageTable.id.in_([rows[5].id])))

    history = await folded_turn(service, Turn(key, WINDOW, rows[-1].id), ModelThatChangesTheBatch(change=delete_it))

    current = await state(sessions, key)
    assert current is None or (MARKER not in current.summary and current.folded_count == 0)
    assert MARKER not in " ".join(m.text for m in history.messages)

    refold = ScriptedChatModel()
    await store_rows(sessions, chat_rows(key, 1, first=BATCH + WINDOW))
    await folded_turn(service, Turn(key, WINDOW, uuid.uuid4()), refold)
    assert len(refold.calls) == 1
    assert MARKER not in str(refold.calls[0])


async def test_a_message_edited_while_its_batch_folds_never_reaches_the_summary(service, sessions, key):
    rows = await seed(sessions, key, BATCH + WINDOW)

    async def edit_it():  # PUT /api/v1/monitor/messages/{id}: a unit-of-work update that sets edit=True
        async with sessions.begin() as session:
            message = await session.get(MessageTable, rows[5].id)
            message.text, message.edit = "message 5 was withdrawn", True

    await folded_turn(service, Turn(key, WINDOW, rows[-1].id), ModelThatChangesTheBatch(change=edit_it))

    current = await state(sessions, key)
    assert current is None or MARKER not in current.summary
    refold = ScriptedChatModel()
    await folded_turn(service, Turn(key, WINDOW, uuid.uuid4()), refold)
    assert MARKER not in str(refold.calls)
    assert "withdrawn" in str(refold.calls[0])
    assert MARKER not in (await state(sessions, key)).summary


async def test_a_batch_changed_between_the_read_and_the_claim_is_not_folded(sessions, key, monkeypatch):
    rows = await seed(sessions, key, BATCH + WINDOW)
    claim = FoldRunner._claim

    async def deleting_before_the_claim(runner, state, mode):
        async with sessions.begin() as session:
            await session.execute(delete(MessageTable).where(MessageTable.id == rows[5].id))
        return await claim(runner, state, mode)

    monkeypatch.setattr(FoldRunner, "_claim", deleting_before_the_claim)
    model = ScriptedChatModel()
    await SessionMemoryService(sessions=sessions).fold_after_turn(Turn(key, WINDOW, rows[-1].id), model)

    assert model.calls == []
    assert (await state(sessions, key)).summary == ""


async def test_completing_an_answer_in_place_is_not_an_edit(service, sessions, key):
    rows = chat_rows(key, BATCH + WINDOW)
    rows[5].text, rows[5].properties = "", {**rows[5].properties, "state": "partial"}  # an answer still streaming
    await store_rows(sessions, rows)
    await folded_turn(service, Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
    folded = await state(sessions, key)

    async with sessions.begin() as session:  # Langflow's aupdate_messages when the answer is complete
        message = await session.get(MessageTable, rows[5].id)
        message.text, message.properties = "the full answer", {**message.properties, "state": "complete"}

    after = await state(sessions, key)
    assert (after.summary, after.version, after.folded_count) == (folded.summary, folded.version, BATCH)


def waits_for_a_fold_elsewhere(captured_logs) -> list[str]:
    return [log["event"] for log in captured_logs if log["event"].startswith("session_summary_fold_elsewhere")]


def waited_ms(event: str) -> int:
    return int(event.split("waited_ms=")[1].split()[0])


async def test_a_claim_far_in_the_future_neither_stalls_nor_blocks_folding(
    service, sessions, key, clock, captured_logs
):
    rows = await store_rows(sessions, chat_rows(key, BATCH + WINDOW))
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        await store.claim_fold(session, seen, datetime(2099, 1, 1, tzinfo=clock.now.tzinfo), clock.now, timedelta(0))

    model = ScriptedChatModel()
    await folded_turn(service, Turn(key, WINDOW, rows[-1].id), model)

    assert waits_for_a_fold_elsewhere(captured_logs) == []  # it took the claim at once
    assert (len(model.calls), (await state(sessions, key)).folded_count) == (1, BATCH)
    assert (await state(sessions, key)).fold_claimed_until is None


async def test_a_compaction_never_waits_longer_than_one_fold_timeout(sessions, key, clock, captured_logs):
    rows = await store_rows(sessions, chat_rows(key, BATCH + WINDOW))
    service = SessionMemoryService(
        sessions=sessions, clock=clock, policy=replace(DEFAULT_POLICY, fold_timeout_seconds=0.5)
    )
    async with sessions.begin() as session:  # the test's clock stands still: this claim holds for as long as it waits
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(session, seen, clock.now + timedelta(seconds=5), clock.now, timedelta(minutes=1))

    await asyncio.wait_for(service.compact(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel()), timeout=60)

    [waited] = waits_for_a_fold_elsewhere(captured_logs)
    assert "still_claimed=true" in waited
    assert waited_ms(waited) >= 500


async def test_a_compaction_waits_seconds_not_a_fold_timeout_for_a_dead_workers_claim(
    service, sessions, key, clock, captured_logs
):
    """A worker died mid-fold: its claim holds three fold timeouts; the refused turn used to wait a whole one (60 s)."""
    rows = await store_rows(sessions, chat_rows(key, BATCH + WINDOW))
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(
            session, seen, clock.now + timedelta(minutes=3), clock.now, service.policy.longest_claim
        )

    compact = service.compact(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
    history = await asyncio.wait_for(compact, timeout=service.policy.fold_timeout_seconds / 2)

    [waited] = waits_for_a_fold_elsewhere(captured_logs)
    assert "still_claimed=true" in waited
    assert waited_ms(waited) >= BOUNDS.compaction_wait_seconds * 1000
    assert history.messages == []  # compacted with the summary as it is (none yet): the retry sends the input alone


async def test_compaction_with_zero_messages_touches_no_table(clock, key):
    def no_database():
        raise AssertionError("N=0 must not open a database session")

    service = SessionMemoryService(sessions=no_database, clock=clock)
    history = await service.compact(Turn(key, 0, uuid.uuid4()), ScriptedChatModel())
    assert history.messages == []


async def test_an_agent_never_sends_fewer_raw_messages_than_its_own_n(service, sessions, key):
    # Two batches and a half older than the small Agent's window (50 at the default): it folds two batches.
    rows = await store_rows(sessions, chat_rows(key, 2 * BATCH + BATCH // 2 + WINDOW))
    await folded_turn(service, Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
    assert (await state(sessions, key)).folded_count == 2 * BATCH  # the small Agent folded into the big one's window

    wide = await service.build_history(Turn(key, 50, rows[-1].id), ScriptedChatModel())

    raw = [m.text for m in wide.messages if m.text.startswith("message ")]
    assert raw == [r.text for r in rows[-50:-1]]


async def test_a_failed_summary_write_pauses_and_logs_no_text(
    service, sessions, key, clock, captured_logs, monkeypatch
):
    rows = await store_rows(sessions, chat_rows(key, BATCH + WINDOW))

    async def failing_write(session, seen, new):
        raise OperationalError("UPDATE session_memory_state SET summary=?", {"summary": new.summary}, Exception("full"))

    monkeypatch.setattr(store, "compare_and_swap", failing_write)
    model = ScriptedChatModel(script=[f"Key facts:\n- {MARKER}\nConversation so far:\n- x"])
    history = await folded_turn(service, Turn(key, WINDOW, rows[-1].id), model)

    paused = await state(sessions, key)
    assert paused.paused_until == clock.now + timedelta(minutes=10)
    assert history.summary == ""
    assert MARKER not in (paused.last_error or "")
    assert not [log for log in captured_logs if MARKER in str(log)]
    assert any(log["event"].startswith("session_summary_fold_failed") for log in captured_logs)


async def test_a_provider_error_quoting_the_prompt_is_logged_and_stored_without_it(
    service, sessions, key, captured_logs
):
    rows = await store_rows(sessions, chat_rows(key, BATCH + WINDOW))
    model = ScriptedChatModel(script=[ValueError(f"Bad request: your messages say {MARKER}")])
    await folded_turn(service, Turn(key, WINDOW, rows[-1].id), model)

    assert (await state(sessions, key)).last_error == "ValueError"
    assert not [log for log in captured_logs if MARKER in str(log)]


async def test_two_workers_on_one_session_make_one_fold_call_per_batch_and_versions_only_grow(sessions, key, clock):
    await store_rows(sessions, chat_rows(key, 5 * BATCH + WINDOW))

    class SlowModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await asyncio.sleep(0.05)
            return self._generate(messages)

    model = SlowModel()
    workers = [SessionMemoryService(sessions=sessions, clock=clock) for _ in range(8)]
    versions = []
    for _ in range(3):
        turns = [Turn(key, WINDOW, uuid.uuid4()) for _ in workers]
        await asyncio.gather(*(w.build_history(turn, model) for w, turn in zip(workers, turns, strict=True)))
        await asyncio.gather(*(w.fold_after_turn(turn, model) for w, turn in zip(workers, turns, strict=True)))
        versions.append((await state(sessions, key)).version)

    final = await state(sessions, key)
    assert final.folded_count == 5 * BATCH
    assert len(model.calls) == final.folded_count // BATCH == final.version
    assert versions == sorted(versions)


@pytest.mark.parametrize("first", ["blank", "no sender"])
async def test_roles_alternate_when_the_first_row_sent_is_blank_or_has_no_sender(service, sessions, key, first):
    rows = chat_rows(key, BATCH + WINDOW, first=1)  # the window opens with a Machine row: no acknowledgement needed
    if first == "blank":
        rows[BATCH].text = "   "  # lfx leaves blank rows out, so the next sent row is the user's
    else:
        rows[BATCH].sender = ""  # lfx sends a row without a sender as a user message
    await store_rows(sessions, rows)
    history = await folded_turn(service, Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
    sent = [m for m in history.messages if (m.text or "").strip()]
    roles = ["user" if m.sender in ("User", "", None) else "assistant" for m in sent]
    assert roles[:3] == ["user", "assistant", "user"]  # summary, acknowledgement, the first row lfx sends


async def test_after_another_workers_fold_the_early_fold_size_rule_still_applies(sessions, key, clock):
    rows = chat_rows(key, BATCH + WINDOW)
    rows[BATCH + 2].text = "Here is the log:\n" + "2026-01-01 12:00:00 ERROR worker-7 connection reset by peer\n" * 100
    await store_rows(sessions, rows)
    async with sessions.begin() as session:  # another worker is folding this session's first batch
        seen = await store.create_if_absent(session, key)
        await store.claim_fold(session, seen, clock.now + timedelta(seconds=1), clock.now, timedelta(minutes=1))
    service = SessionMemoryService(
        sessions=sessions, clock=clock, policy=replace(DEFAULT_POLICY, fold_timeout_seconds=0.3)
    )

    history = await service.build_history(Turn(key, WINDOW, rows[-1].id, context_window=1800), ScriptedChatModel())

    assert not any("connection reset" in m.text for m in history.messages)


async def test_retries_are_remembered_by_ids_and_counts_not_by_text(service, sessions, key):
    rows = await seed(sessions, key, INLINE_BATCH + WINDOW)
    await service.build_history(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
    assert MARKER not in repr(service._folded_turns)
    assert "message" not in repr(service._folded_turns)
