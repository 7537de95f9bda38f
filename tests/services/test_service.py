"""The turn rules on SQLite and PostgreSQL, with real rows in Langflow's message table."""

import asyncio
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import delete, event

from langflow_session_memory.services.session_memory.folding.runner import FoldRunner
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_ACKNOWLEDGEMENT, SUMMARY_FRAME
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.state import SessionKey, SessionState
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import messages, store
from langflow_session_memory.services.session_memory.storage.model import SessionMemoryState
from langflow_session_memory.services.session_memory.summary.model_call import FOLD_RUN_TAG
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.summaries import RecordedRuns, cached_answer

BATCH = DEFAULT_POLICY.batch_size
WINDOW = 10
# Unfolded messages that make a turn fold one batch inside itself: the excess over the two batches it sends raw.
INLINE_BATCH = DEFAULT_POLICY.raw_gap_limit + BATCH


async def seed(sessions, key, count, **kwargs) -> tuple[list, Turn]:
    """``count`` stored messages, the last one being this turn's input (as ChatInput stores it)."""
    rows = await store_rows(sessions, chat_rows(key, count, **kwargs))
    return rows, Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id)


async def row(sessions, key) -> SessionState | None:
    async with sessions() as session:
        return await store.load(session, key)


async def delete_state_rows(sessions, key) -> None:
    """What the cleanup listener does when the session goes, done while a fold's model call runs."""
    async with sessions.begin() as session:
        await session.execute(delete(SessionMemoryState).where(SessionMemoryState.session_id == key.session_id))


def texts(history) -> list[str]:
    return [message.text for message in history.messages]


async def folded_turn(service, turn, model):
    """A turn whose answer makes a fold due, the fold after that answer, then the history the row now gives the
    turn's request (what one turn folding inside itself gave before routine folds moved after the answer)."""
    await service.build_history(turn, model)
    await service.fold_after_turn(turn, model)
    return await service.build_history(turn, model)


@pytest.mark.parametrize(
    ("unfolded", "inline_folds", "raw", "due", "after_answer_folds"),
    [
        pytest.param(0, 0, 0, False, 0, id="no-gap"),
        pytest.param(BATCH - 3, 0, BATCH - 3, False, 0, id="three-short-of-a-batch"),
        # With the answer: still one short, no batch yet.
        pytest.param(BATCH - 2, 0, BATCH - 2, False, 0, id="two-short-of-a-batch"),
        # With the answer: a batch once the answer is stored.
        pytest.param(BATCH - 1, 0, BATCH - 1, True, 1, id="one-short-of-a-batch"),
        pytest.param(BATCH, 0, BATCH, True, 1, id="a-batch"),
        pytest.param(2 * BATCH, 0, 2 * BATCH, True, 2, id="two-batches"),
        pytest.param(2 * BATCH + 1, 1, BATCH + 1, True, 1, id="two-batches-and-one"),
        pytest.param(3 * BATCH + 1, 2, BATCH + 1, True, 1, id="three-batches-and-one"),
        pytest.param(4 * BATCH - 1, 2, 2 * BATCH - 1, True, 2, id="one-short-of-four-batches"),
        pytest.param(10 * BATCH, 2, 0, True, 3, id="ten-batches"),
    ],
)
async def test_a_turn_sends_up_to_two_batches_raw_and_the_answer_s_fold_folds_every_full_batch(
    service, sessions, key, unfolded, inline_folds, raw, due, after_answer_folds
):
    rows, turn = await seed(sessions, key, unfolded + WINDOW)
    model = ScriptedChatModel()

    history = await service.build_history(turn, model)

    assert len(model.calls) == inline_folds
    assert history.folded == BATCH * inline_folds
    window = [r.text for r in rows[unfolded:-1]]
    sent = texts(history)[2:] if inline_folds else texts(history)  # after the summary and its acknowledgement
    assert sent == [r.text for r in rows[BATCH * inline_folds : BATCH * inline_folds + raw]] + window
    assert (history.fold_usage.input_tokens, history.fold_usage.output_tokens) == (
        100 * inline_folds,
        10 * inline_folds,
    )
    assert history.fold_due is due

    await store_rows(sessions, chat_rows(key, 1, first=unfolded + WINDOW))  # the answer is stored
    await service.fold_after_turn(turn, model)

    folded = BATCH * (inline_folds + after_answer_folds)
    state = await row(sessions, key)
    assert len(model.calls) == inline_folds + after_answer_folds
    if folded:
        assert (state.folded_count, state.version, state.cursor.message_id) == (
            folded,
            inline_folds + after_answer_folds,
            rows[folded - 1].id,
        )
    else:
        assert state is None


async def test_backlog_is_folded_over_later_turns_in_order(service, sessions, key):
    _rows, turn = await seed(sessions, key, 10 * BATCH + WINDOW)
    model = ScriptedChatModel()
    await folded_turn(service, turn, model)  # two batches inside the turn, three after its answer
    await folded_turn(service, Turn(key, WINDOW, input_message_id=None), model)

    firsts = [model.batch_texts(call)[0].split()[2] for call in range(len(model.calls))]
    assert firsts == [str(BATCH * batch) for batch in range(10)]
    assert (await row(sessions, key)).folded_count == 10 * BATCH


async def test_summary_is_followed_by_an_acknowledgement_only_before_a_user_message(service, sessions, key):
    _rows, turn = await seed(sessions, key, BATCH + 1 + WINDOW)  # raw gap starts with message BATCH, a User message
    history = await folded_turn(service, turn, ScriptedChatModel())
    assert [m.sender for m in history.messages[:3]] == ["User", "Machine", "User"]
    assert history.messages[1].text == SUMMARY_ACKNOWLEDGEMENT

    other = SessionKey(key.flow_id, key.owner_id, "odd")
    _, turn = await seed(sessions, other, BATCH + WINDOW, first=1)  # the window starts with a Machine message
    history = await folded_turn(service, Turn(other, WINDOW, turn.input_message_id), ScriptedChatModel())
    assert [m.sender for m in history.messages[:2]] == ["User", "Machine"]
    assert history.messages[1].text != SUMMARY_ACKNOWLEDGEMENT


async def test_fold_logs_latency_and_count(service, sessions, key, captured_logs):
    _, turn = await seed(sessions, key, BATCH + WINDOW)
    await folded_turn(service, turn, ScriptedChatModel())
    logs = captured_logs
    folds = [log for log in logs if log["event"].startswith("session_summary_fold ")]
    assert len(folds) == 1
    assert folds[0]["log_level"] == "info"
    assert f" folded={BATCH} " in folds[0]["event"]
    assert "latency_ms=" in folds[0]["event"]


async def test_failure_keeps_summary_and_pauses_ten_minutes(service, sessions, key, clock, captured_logs):
    _rows, turn = await seed(sessions, key, BATCH + WINDOW)
    await folded_turn(service, turn, ScriptedChatModel())
    before = await row(sessions, key)
    await store_rows(sessions, chat_rows(key, BATCH, first=BATCH + WINDOW))
    failing = ScriptedChatModel(script=[TimeoutError("model timed out")])

    history = await folded_turn(service, Turn(key, WINDOW, None), failing)
    logs = captured_logs

    after = await row(sessions, key)
    assert (after.summary, after.folded_count, after.version) == (before.summary, BATCH, before.version)
    assert after.paused_until == clock.now + timedelta(minutes=10)
    assert "TimeoutError" in after.last_error
    assert history.summary == before.summary
    events = [log["event"].split()[0] for log in logs]
    assert "session_summary_fold_failed" in events
    assert "session_summary_paused" in events

    clock.now += timedelta(minutes=9)
    paused_model = ScriptedChatModel()
    await folded_turn(service, Turn(key, WINDOW, uuid.uuid4()), paused_model)
    assert paused_model.calls == []

    clock.now += timedelta(minutes=1)
    await folded_turn(service, Turn(key, WINDOW, uuid.uuid4()), paused_model)
    assert [len(paused_model.batch_texts(call)) for call in (0, 1)] == [BATCH // 2, BATCH // 2]  # not as refused
    resumed = await row(sessions, key)
    assert (resumed.folded_count, resumed.paused_until, resumed.last_error) == (2 * BATCH, None, None)


async def test_rejected_summary_counts_as_failure(service, sessions, key, clock):
    _, turn = await seed(sessions, key, BATCH + WINDOW)
    history = await folded_turn(service, turn, ScriptedChatModel(script=[""]))
    state = await row(sessions, key)
    assert (history.summary, state.summary, state.folded_count) == ("", "", 0)
    assert state.paused_until == clock.now + timedelta(minutes=10)
    assert "empty summary" in state.last_error


async def test_lost_race_uses_the_winners_summary(service, sessions, key, clock, captured_logs):
    _, turn = await seed(sessions, key, BATCH + WINDOW)
    winner = "Key facts:\n- written by another worker\nConversation so far:\n- the same batch of messages"

    class RacingModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            clock.now += timedelta(hours=1)  # this worker's claim runs out while its model call hangs
            other_worker = SessionMemoryService(sessions=sessions, clock=clock)
            await other_worker.fold_after_turn(Turn(key, WINDOW, uuid.uuid4()), ScriptedChatModel(script=[winner]))
            return self._generate(messages)

    history = await folded_turn(service, turn, RacingModel())
    logs = captured_logs

    state = await row(sessions, key)
    assert (state.summary, state.version, state.folded_count) == (winner, 1, BATCH)
    assert state.fold_claimed_until is None
    assert history.summary == winner
    assert texts(history)[0].endswith(winner)
    assert any(log["event"].startswith("session_summary_lost_race") for log in logs)


async def test_overlapping_turns_on_two_workers_make_one_fold_call(sessions, key, clock, captured_logs):
    rows, _ = await seed(sessions, key, BATCH + WINDOW)

    class SlowModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await asyncio.sleep(0.5)
            return self._generate(messages)

    model = SlowModel()
    workers = [SessionMemoryService(sessions=sessions, clock=clock) for _ in range(2)]
    turn = Turn(key, WINDOW, rows[-1].id)  # e.g. a client that retried its request on another worker

    await asyncio.gather(*(worker.fold_after_turn(turn, model) for worker in workers))
    first, second = [await worker.build_history(turn, model) for worker in workers]

    assert len(model.calls) == 1
    assert first.summary == second.summary != ""
    assert texts(first) == texts(second)
    state = await row(sessions, key)
    assert (state.version, state.folded_count, state.fold_claimed_until) == (1, BATCH, None)


async def test_a_session_deleted_while_the_model_folds_stays_deleted(service, sessions, key):
    _, turn = await seed(sessions, key, BATCH + WINDOW)

    class DeletingModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await delete_state_rows(sessions, key)
            return self._generate(messages)

    history = await service.build_history(turn, DeletingModel())

    assert await row(sessions, key) is None
    assert history.summary == ""


async def test_a_claim_left_by_a_dead_worker_runs_out(service, sessions, key, clock):
    _, turn = await seed(sessions, key, BATCH + WINDOW)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(
            session, seen, clock.now + timedelta(minutes=1), clock.now, service.policy.longest_claim
        )

    clock.now += timedelta(minutes=2)
    model = ScriptedChatModel()
    history = await folded_turn(service, turn, model)

    assert len(model.calls) == 1
    assert (await row(sessions, key)).folded_count == BATCH
    assert history.fold_usage.input_tokens == 100  # the fold's, reported with the turn
    assert (await row(sessions, key)).fold_claimed_until is None


async def test_a_worker_whose_read_went_stale_before_its_claim_calls_no_model(sessions, key, clock, monkeypatch):
    rows, turn = await seed(sessions, key, BATCH + WINDOW)
    other_worker = SessionMemoryService(sessions=sessions, clock=clock)
    claim, overtaken = FoldRunner._claim, []

    async def read_then_overtaken(runner, state, mode):  # another worker folds and releases between read and claim
        if not overtaken:
            overtaken.append(state.version)
            await other_worker.fold_after_turn(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
        return await claim(runner, state, mode)

    monkeypatch.setattr(FoldRunner, "_claim", read_then_overtaken)
    model = ScriptedChatModel()
    worker = SessionMemoryService(sessions=sessions, clock=clock)
    await worker.fold_after_turn(turn, model)

    assert model.calls == []
    assert (await worker.build_history(turn, model)).summary != ""  # the other worker's
    assert (await row(sessions, key)).version == 1


async def test_retry_within_a_turn_does_not_fold_again(service, sessions, key):
    _, turn = await seed(sessions, key, INLINE_BATCH + WINDOW)
    model = ScriptedChatModel()
    first = await service.build_history(turn, model)
    again = await service.build_history(turn, model)
    assert len(model.calls) == 1
    assert texts(again) == texts(first)
    assert (again.folded, again.fold_usage.input_tokens, again.fold_usage.output_tokens) == (
        BATCH,
        100,
        10,
    )  # the retry reports the fold


async def test_a_retry_after_waiting_for_another_workers_fold_does_not_fold(sessions, key, clock):
    service = SessionMemoryService(
        sessions=sessions, clock=clock, policy=replace(DEFAULT_POLICY, fold_timeout_seconds=0.2)
    )
    _, turn = await seed(sessions, key, INLINE_BATCH + WINDOW)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(
            session, seen, clock.now + timedelta(seconds=1), clock.now, service.policy.longest_claim
        )
    model = ScriptedChatModel()
    await service.build_history(turn, model)  # the other worker's claim holds: no fold

    clock.now += timedelta(seconds=2)  # that claim has run out when the Agent retries the same turn
    await service.build_history(turn, model)

    assert model.calls == []


async def test_a_stored_summary_over_the_cap_is_never_sent_and_the_session_is_folded_again(
    service, sessions, key, captured_logs
):
    """A row written by an older version or by hand: every turn would have failed with it ("no longer fits")."""
    rows, turn = await seed(sessions, key, BATCH + WINDOW)
    huge = "Key facts:\n- " + "x" * 100_000 + "\nConversation so far:\n- y"
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        folded = replace(seen, summary=huge, cursor=messages.cursor_of(rows[BATCH - 1]), folded_count=BATCH)
        assert await store.compare_and_swap(session, seen, folded)
    model = ScriptedChatModel()

    history = await folded_turn(service, turn, model)

    assert not any("x" * 100 in text for text in texts(history))
    assert model.batch_texts(0)[0].startswith("User: message 0 ")  # folded again from the session's start
    state = await row(sessions, key)
    assert (state.folded_count, "x" * 100 in state.summary) == (BATCH, False)
    [reset] = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_reset")]
    assert f"reason=summary_invalid detail='summary has {len(huge)} characters, over the 4000-character cap'" in reset


async def test_zero_messages_touches_no_table(clock, key):
    def no_database():
        raise AssertionError("N=0 must not open a database session")

    service = SessionMemoryService(sessions=no_database, clock=clock)
    history = await service.build_history(Turn(key, 0, uuid.uuid4()), ScriptedChatModel())
    assert history.messages == []


async def test_tied_timestamps_lose_and_duplicate_nothing(service, sessions, key):
    rows, turn = await seed(sessions, key, 2 * BATCH + 7 + WINDOW, tie_every=4)
    model = ScriptedChatModel()
    history = await service.build_history(turn, model)

    folded = [line.split()[2] for call in range(len(model.calls)) for line in model.batch_texts(call)]
    sent = [m.text.split()[1] for m in history.messages[1:] if m.text != SUMMARY_ACKNOWLEDGEMENT]
    everything = folded + sent + [rows[-1].text.split()[1]]
    assert sorted(everything, key=int) == [str(i) for i in range(2 * BATCH + 7 + WINDOW)]
    assert len(everything) == len(set(everything))


async def test_message_arriving_behind_the_cursor_is_refolded_not_lost(service, sessions, key, captured_logs):
    _, turn = await seed(sessions, key, BATCH + WINDOW)
    await folded_turn(service, turn, ScriptedChatModel())
    late = chat_rows(key, 1, first=5)[0]
    late.id, late.text = uuid.uuid4(), "message late says fact-late arrived behind the cursor"
    await store_rows(sessions, [late, *chat_rows(key, BATCH, first=BATCH + WINDOW)])  # and a batch more: a fold is due

    model = ScriptedChatModel()
    await folded_turn(service, Turn(key, WINDOW, uuid.uuid4()), model)

    assert any(log["event"].startswith("session_summary_reset") for log in captured_logs)
    assert any("fact-late" in line for line in model.batch_texts(0))
    assert model.batch_texts(0)[0].startswith("User: message 0 ")  # folded again from the session's start
    assert (await row(sessions, key)).folded_count == 2 * BATCH  # two batches and one older: two full batches


@pytest.mark.parametrize("stored", [100, 10_000])
async def test_a_turn_without_a_fold_issues_a_constant_number_of_statements(sessions, clock, key, stored):
    rows = chat_rows(key, stored)
    async with sessions.begin() as session:
        await session.run_sync(lambda sync: sync.bulk_save_objects(rows))
        seen = await store.create_if_absent(session, key)
        folded = rows[stored - WINDOW - 6]  # 5 messages between the cursor and the window
        await store.compare_and_swap(
            session,
            seen,
            SessionState(key, summary="notes", cursor=_cursor(folded), folded_count=stored - WINDOW - 5),
        )

    statements = []
    engine = sessions.kw["bind"].sync_engine
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        history = await SessionMemoryService(sessions=sessions, clock=clock).build_history(
            Turn(key, WINDOW, rows[-1].id), ScriptedChatModel()
        )
    finally:
        event.remove(engine, "before_cursor_execute", listener)

    assert len(history.messages) == 1 + 5 + WINDOW - 1  # the summary (the raw gap opens with a Machine message)
    assert len(statements) == 1  # window, gap and state row in one SELECT, like the stock window query
    assert statements[0].lstrip().upper().startswith("SELECT")


async def test_with_every_message_folded_the_turn_sends_the_summary_and_its_own_window(service, sessions, key):
    rows, _ = await seed(sessions, key, 30)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        everything = SessionState(key, summary="notes", cursor=_cursor(rows[-1]), folded_count=30)
        await store.compare_and_swap(session, seen, everything)

    history = await service.build_history(Turn(key, WINDOW, uuid.uuid4()), ScriptedChatModel())

    assert texts(history) == [SUMMARY_FRAME.format(summary="notes"), SUMMARY_ACKNOWLEDGEMENT] + [
        r.text for r in rows[-WINDOW:]
    ]


async def test_a_context_folds_and_sends_only_its_own_messages(service, sessions, key):
    contexts = {name: replace(key, context_id=name) for name in ("ctx-a", "ctx-b")}
    stored = {
        name: await store_rows(sessions, chat_rows(k, BATCH + WINDOW, first=i * 100))
        for i, (name, k) in enumerate(contexts.items())
    }
    model = ScriptedChatModel()

    history = await folded_turn(service, Turn(contexts["ctx-a"], WINDOW, stored["ctx-a"][-1].id), model)

    assert [line.split()[2] for line in model.batch_texts(0)] == [str(i) for i in range(BATCH)]
    assert texts(history)[2:] == [r.text for r in stored["ctx-a"][BATCH:-1]]
    assert (await row(sessions, contexts["ctx-a"])).folded_count == BATCH
    assert await row(sessions, contexts["ctx-b"]) is None


def _cursor(message):
    from langflow_session_memory.services.session_memory.storage.messages import cursor_of

    return cursor_of(message)


async def test_turns_without_a_stored_input_are_not_taken_for_retries(service, sessions, key):
    await seed(sessions, key, INLINE_BATCH + WINDOW)
    model = ScriptedChatModel()
    await service.build_history(Turn(key, WINDOW, input_message_id=None), model)
    await store_rows(sessions, chat_rows(key, BATCH, first=INLINE_BATCH + WINDOW))
    second = await service.build_history(Turn(key, WINDOW, input_message_id=None), model)
    assert (len(model.calls), second.folded) == (2, BATCH)


def with_pasted_log(key, *, usage: dict | None = None):
    """Ten messages, the third a ~6,000-character pasted log; the newest answer optionally carries usage."""
    rows = chat_rows(key, WINDOW)
    rows[2].text = "Here is the log:\n" + "2026-01-01 12:00:00 ERROR worker-7 connection reset by peer\n" * 100
    if usage:
        rows[-2].properties = {**rows[-2].properties, "usage": usage}
    return rows


async def record_last_call(sessions, key, tokens: int) -> None:
    """What the Agent keeps after a turn whose last model call was large (see hooks)."""
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.record_call_size(session, key, tokens)


async def test_last_call_size_over_80_percent_folds_the_window_early(service, sessions, key):
    rows = await store_rows(sessions, with_pasted_log(key))
    await record_last_call(sessions, key, 3000)
    model = ScriptedChatModel()
    history = await service.build_history(Turn(key, WINDOW, rows[-1].id, context_window=3600), model)

    assert len(model.calls) == 1
    assert [line.split()[2] for line in model.batch_texts(0)[:1]] == ["0"]
    assert len(model.batch_texts(0)) >= 4  # the log line and the messages before it, as one partial batch
    raw = [m.text for m in history.messages if m.text.startswith("message ")]
    assert raw == [r.text for r in rows[4:-1]]
    assert (await row(sessions, key)).cursor.message_id == rows[3].id


async def test_a_tool_heavy_turn_whose_last_call_stayed_at_60_percent_does_not_fold_early(service, sessions, key):
    rows = chat_rows(key, WINDOW)  # the stored usage sums a tool loop of five calls: 5 x 2,000 tokens
    rows[-2].properties = {**rows[-2].properties, "usage": {"input_tokens": 9500, "output_tokens": 500}}
    await store_rows(sessions, rows)
    await record_last_call(sessions, key, 2160)
    model = ScriptedChatModel()
    history = await service.build_history(Turn(key, WINDOW, rows[-1].id, context_window=3600), model)
    assert model.calls == []
    assert len(history.messages) == WINDOW - 1


async def test_without_reported_usage_the_estimate_triggers_the_early_fold(service, sessions, key):
    rows = await store_rows(sessions, with_pasted_log(key))
    model = ScriptedChatModel()
    history = await service.build_history(Turn(key, WINDOW, rows[-1].id, context_window=1800), model)
    assert len(model.calls) == 1
    assert not any("connection reset" in m.text for m in history.messages[2:])
    assert history.folded == 4


async def test_within_the_window_budget_nothing_folds_early(service, sessions, key):
    rows = await store_rows(sessions, with_pasted_log(key, usage={"input_tokens": 1000, "output_tokens": 10}))
    model = ScriptedChatModel()
    history = await service.build_history(Turn(key, WINDOW, rows[-1].id, context_window=128_000), model)
    assert model.calls == []
    assert len(history.messages) == WINDOW - 1


async def test_messages_folded_early_are_not_sent_raw_again(service, sessions, key):
    rows = await store_rows(sessions, with_pasted_log(key))
    await service.build_history(Turn(key, WINDOW, rows[-1].id, context_window=1800), ScriptedChatModel())
    later = ScriptedChatModel()
    history = await service.build_history(Turn(key, WINDOW, uuid.uuid4(), context_window=1800), later)
    assert later.calls == []
    assert [m.text for m in history.messages if m.text.startswith("message ")] == [r.text for r in rows[4:]]


async def test_compaction_folds_everything_before_the_input_and_sends_the_summary_alone(service, sessions, key):
    rows = await store_rows(sessions, with_pasted_log(key))
    model = ScriptedChatModel()
    history = await service.compact(Turn(key, WINDOW, rows[-1].id), model)
    assert len(model.batch_texts(0)) == WINDOW - 1
    assert [m.text for m in history.messages][1:] == [SUMMARY_ACKNOWLEDGEMENT]
    assert (await row(sessions, key)).folded_count == WINDOW - 1


async def test_the_fold_after_the_answer_is_a_run_for_the_turn_s_tracers_with_its_cached_input(service, sessions, key):
    _rows, turn = await seed(sessions, key, BATCH + WINDOW)
    tracer = RecordedRuns()
    model = ScriptedChatModel(script=[cached_answer(1024)])

    await service.fold_after_turn(Turn(key, WINDOW, turn.input_message_id, tracing=(tracer,)), model)

    assert [run["tags"] for run in tracer.runs] == [[FOLD_RUN_TAG]]
    next_turn = await service.build_history(Turn(key, WINDOW, None), ScriptedChatModel())
    assert (next_turn.fold_usage.input_tokens, next_turn.fold_usage.cached_input_tokens) == (
        1500,
        1024,
    )  # reported once, with the next turn


async def test_a_fold_request_names_the_speakers_the_flow_gave_so_a_fact_is_theirs(service, sessions, key):
    rows = chat_rows(key, BATCH + WINDOW)
    for index, message in enumerate(rows):
        message.sender_name = "Caroline" if index % 2 == 0 else "Melanie"
    await store_rows(sessions, rows)
    model = ScriptedChatModel(script=["Key facts:\n- Caroline paints\nConversation so far:\n- art"])

    await folded_turn(service, Turn(key, WINDOW, rows[-1].id), model)

    transcript = model.calls[0][-1].content
    assert "Caroline: message 0 says" in transcript
    assert "Melanie: message 1 says" in transcript


async def test_a_refused_fold_inside_a_turn_reports_the_tokens_the_provider_billed(service, sessions, key):
    _, turn = await seed(sessions, key, INLINE_BATCH + WINDOW)  # the turn folds one batch before its model call
    refusing = ScriptedChatModel(script=["Error: the model is overloaded"])  # answered (and billed), then refused

    history = await service.build_history(turn, refusing)

    assert (history.folded, (await row(sessions, key)).paused_until is not None) == (0, True)
    assert (history.fold_usage.input_tokens, history.fold_usage.output_tokens) == (100, 10)
