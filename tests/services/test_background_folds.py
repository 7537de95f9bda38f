"""Folds after the answer, on SQLite and PostgreSQL: what a turn sends meanwhile, the fold, its usage, its end."""

import asyncio
from dataclasses import replace
from datetime import timedelta

from langflow_session_memory.services.session_memory.folding.background import (
    BackgroundFolds,
    running_folds,
    settle_folds,
)
from langflow_session_memory.services.session_memory.rules.assembly import HISTORY_START_NOTE
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import store
from tests.chat import ScriptedChatModel
from tests.services.test_service import BATCH, WINDOW, delete_state_rows, row, seed, texts


class StuckModel(ScriptedChatModel):
    """Never answers a fold; says when one reached it, so the test can act while the fold is in flight."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.reached.set()
        await asyncio.Event().wait()

    @property
    def reached(self) -> asyncio.Event:
        return self.__dict__.setdefault("_reached", asyncio.Event())


async def test_the_fold_after_the_answer_folds_the_gap_and_the_next_turn_reports_its_tokens(
    service, sessions, key, captured_logs
):
    rows, turn = await seed(sessions, key, BATCH + BATCH // 2 + WINDOW)  # a batch and a half older than the window
    model = ScriptedChatModel()
    assert (await service.build_history(turn, model)).fold_due

    await service.fold_after_turn(turn, model)

    state = await row(sessions, key)
    assert (len(model.calls), state.folded_count, state.cursor.message_id) == (1, BATCH, rows[BATCH - 1].id)
    assert (state.unreported_usage.input_tokens, state.unreported_usage.output_tokens) == (100, 10)
    folds = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_fold ")]
    assert len(folds) == 1
    assert " mode=background " in folds[0]

    next_turn = await service.build_history(Turn(key, WINDOW, input_message_id=None), model)
    assert (next_turn.folded, next_turn.fold_usage.input_tokens, next_turn.fold_usage.output_tokens) == (0, 100, 10)
    assert texts(next_turn)[2:] == [r.text for r in rows[BATCH:]]  # no stored input: the last row is history too
    once_more = await service.build_history(Turn(key, WINDOW, input_message_id=None), model)
    assert (once_more.fold_usage.input_tokens, once_more.fold_usage.output_tokens) == (0, 0)


async def test_a_turn_that_finds_a_fold_running_does_not_wait_for_it(service, sessions, key, clock, captured_logs):
    rows, turn = await seed(sessions, key, 3 * BATCH + 1 + WINDOW)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(
            session, seen, clock.now + timedelta(seconds=30), clock.now, service.policy.longest_claim
        )
    model = ScriptedChatModel()

    history = await service.build_history(turn, model)

    assert (len(model.calls), history.folded, history.summary) == (0, 0, "")
    assert not any(log["event"].startswith("session_summary_fold_elsewhere") for log in captured_logs)
    # A backlog over two batches is left out, never sent whole; the window starts with an answer, so a note opens it.
    assert texts(history) == [HISTORY_START_NOTE, *(r.text for r in rows[-WINDOW:-1])]


async def test_only_a_compaction_waits_for_the_fold_elsewhere(sessions, key, clock, captured_logs):
    service = SessionMemoryService(
        sessions=sessions, clock=clock, policy=replace(DEFAULT_POLICY, fold_timeout_seconds=0.3)
    )
    _rows, turn = await seed(sessions, key, 3 * BATCH + 1 + WINDOW)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.claim_fold(
            session, seen, clock.now + timedelta(seconds=2), clock.now, service.policy.longest_claim
        )

    await service.build_history(turn, ScriptedChatModel())  # a backlog's inline fold goes on without it
    assert not any(log["event"].startswith("session_summary_fold_elsewhere") for log in captured_logs)

    await service.compact(turn, ScriptedChatModel())  # the retry of a refused prompt needs that row
    assert any(log["event"].startswith("session_summary_fold_elsewhere") for log in captured_logs)


async def test_a_paused_session_sends_its_gap_raw_and_is_not_due(service, sessions, key, clock):
    rows, turn = await seed(sessions, key, BATCH + 5 + WINDOW)  # over a batch, within the two sent raw
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.pause(session, key, clock.now + timedelta(minutes=10), "timeout")

    history = await service.build_history(turn, ScriptedChatModel())

    assert texts(history) == [r.text for r in rows[:-1]]
    assert not history.fold_due


async def test_a_session_deleted_during_a_failing_background_fold_leaves_no_row(service, sessions, key):
    _rows, turn = await seed(sessions, key, BATCH + WINDOW)

    class DeletingThenFailingModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await delete_state_rows(sessions, key)
            raise TimeoutError

    await service.fold_after_turn(turn, DeletingThenFailingModel())

    assert await row(sessions, key) is None


async def test_shutdown_cancels_a_fold_in_flight_and_releases_its_claim(service, sessions, key, captured_logs):
    _rows, turn = await seed(sessions, key, BATCH + WINDOW)
    model = StuckModel()
    folds = BackgroundFolds()
    folds.open()
    assert folds.start(key, lambda: service.fold_after_turn(turn, model))
    assert not folds.start(key, lambda: service.fold_after_turn(turn, model))  # one per session
    await asyncio.wait_for(model.reached.wait(), timeout=10)
    assert (await row(sessions, key)).fold_claimed_until is not None

    await folds.close(grace_seconds=5)

    state = await row(sessions, key)
    assert (len(running_folds()), state.fold_claimed_until, state.summary, state.version) == (0, None, "", 0)
    assert not folds.available()
    assert any(
        log["event"].startswith("session_summary_background_stopped cancelled=1 stuck=0") for log in captured_logs
    )


class GatedModel(ScriptedChatModel):
    """Folds once the test opens the gate: still folding when the next turn comes."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        await self.gate.wait()
        return self._generate(messages)

    @property
    def gate(self) -> asyncio.Event:
        return self.__dict__.setdefault("_gate", asyncio.Event())


LOCAL_SERVER = "http://127.0.0.1:8080/v1"  # llama.cpp on this machine


async def test_on_a_self_hosted_server_a_new_turn_waits_for_the_fold_there_and_sends_its_summary(
    service, sessions, key, captured_logs
):
    rows, turn = await seed(sessions, key, BATCH + WINDOW)
    folding = GatedModel()
    service.background.open()
    assert service.background.start(key, lambda: service.fold_after_turn(turn, folding), server=LOCAL_SERVER)
    elsewhere = type(key)(key.flow_id, key.owner_id, "another session")
    other_server = asyncio.Event()
    assert service.background.start(elsewhere, other_server.wait, server="http://10.0.0.5:8000/v1")
    asyncio.get_running_loop().call_later(0.3, folding.gate.set)

    new_turn = Turn(key, WINDOW, rows[-1].id, model_server=LOCAL_SERVER, waits_for_folds=True)
    history = await service.build_history(new_turn, ScriptedChatModel())

    assert (await row(sessions, key)).folded_count == BATCH  # the fold landed, none lost
    assert history.summary  # and the turn sends the summary it wrote
    assert not history.fold_due
    assert len(running_folds()) == 1  # another server's fold was not waited for
    [waited] = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_fold_waited")]
    assert " folds=1 still_running=0" in waited
    other_server.set()
    await service.background.close()


def idle_while_no_turn_waits(service, server):
    return lambda: not service.background.turn_waits(server)


async def test_on_a_self_hosted_server_a_backlog_folds_after_an_answer_while_no_turn_comes(service, sessions, key):
    _rows, turn = await seed(sessions, key, 5 * BATCH + WINDOW)
    local = replace(turn, model_server=LOCAL_SERVER, waits_for_folds=True)
    model = ScriptedChatModel()
    service.background.open()

    idle = idle_while_no_turn_waits(service, LOCAL_SERVER)
    assert service.background.start(key, lambda: service.fold_after_turn(local, model, idle), server=LOCAL_SERVER)
    await settle_folds()

    assert (await row(sessions, key)).folded_count == 5 * BATCH  # the whole backlog, one batch a request
    assert len(model.calls) == 5
    await service.background.close()


async def test_a_turn_that_comes_while_a_backlog_folds_waits_for_the_batch_under_way_only(
    service, sessions, key, captured_logs
):
    rows, turn = await seed(sessions, key, 5 * BATCH + WINDOW)
    local = replace(turn, model_server=LOCAL_SERVER, waits_for_folds=True)
    folding = GatedModel()
    service.background.open()
    idle = idle_while_no_turn_waits(service, LOCAL_SERVER)
    assert service.background.start(key, lambda: service.fold_after_turn(local, folding, idle), server=LOCAL_SERVER)
    asyncio.get_running_loop().call_later(0.3, folding.gate.set)

    new_turn = Turn(key, WINDOW, rows[-1].id, model_server=LOCAL_SERVER, waits_for_folds=True)
    history = await service.build_history(new_turn, ScriptedChatModel())

    assert (await row(sessions, key)).folded_count == BATCH  # one batch landed, the fold then stopped for the turn
    assert len(folding.calls) == 1
    assert history.summary  # the turn sends it
    assert history.fold_due  # and the rest folds after its answer
    assert not running_folds()
    await service.background.close()


async def test_a_turn_waits_no_longer_than_the_fold_timeout(sessions, clock, key, captured_logs):
    service = SessionMemoryService(
        sessions=sessions, clock=clock, policy=replace(DEFAULT_POLICY, fold_timeout_seconds=0.3)
    )
    rows, _turn = await seed(sessions, key, BATCH + WINDOW)
    service.background.open()
    in_flight = asyncio.Event()  # a fold of several batches may run several fold timeouts
    assert service.background.start(key, in_flight.wait, server=LOCAL_SERVER)

    new_turn = Turn(key, WINDOW, rows[-1].id, model_server=LOCAL_SERVER, waits_for_folds=True)
    history = await asyncio.wait_for(service.build_history(new_turn, ScriptedChatModel()), timeout=5)

    assert history.summary == ""  # the fold has not landed: the gap is sent raw
    assert texts(history)[-1] == rows[-2].text
    assert any(" folds=1 still_running=1" in log["event"] for log in captured_logs)
    await service.background.close()


async def test_a_turn_says_it_waits_before_it_waits_for_a_fold_and_only_then(service, sessions, key):
    rows, turn = await seed(sessions, key, BATCH + WINDOW)
    folding = GatedModel()
    service.background.open()
    assert service.background.start(key, lambda: service.fold_after_turn(turn, folding), server=LOCAL_SERVER)
    asyncio.get_running_loop().call_later(0.3, folding.gate.set)
    said = []

    async def waiting():
        said.append(len(running_folds()))  # the fold still runs when the turn says so

    new_turn = Turn(key, WINDOW, rows[-1].id, model_server=LOCAL_SERVER, waits_for_folds=True)
    await service.build_history(new_turn, ScriptedChatModel(), on_wait=waiting)
    await service.build_history(new_turn, ScriptedChatModel(), on_wait=waiting)  # no fold runs: no wait

    assert said == [1]
    await service.background.close()


async def test_on_a_hosted_provider_a_new_turn_leaves_its_session_s_fold_running(service, sessions, key, captured_logs):
    rows, turn = await seed(sessions, key, BATCH + WINDOW)
    gate = asyncio.Event()

    class SlowModel(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await gate.wait()  # still folding when the next turn comes
            return self._generate(messages)

    service.background.open()
    assert service.background.start(key, lambda: service.fold_after_turn(turn, SlowModel()))
    await asyncio.sleep(0.2)

    hosted = Turn(key, WINDOW, rows[-1].id, model_server="https://api.openai.com/v1", waits_for_folds=False)
    await service.build_history(hosted, ScriptedChatModel())  # served at once

    assert len(running_folds()) == 1
    gate.set()
    await settle_folds()
    assert (await row(sessions, key)).folded_count == BATCH  # the fold went on and landed
    assert not any(log["event"].startswith("session_summary_fold_waited") for log in captured_logs)
    await service.background.close()


async def test_folds_are_bounded_per_process_and_deferred_beyond(key, captured_logs):
    folds = BackgroundFolds(limit=1)
    folds.open()
    gate = asyncio.Event()
    other = type(key)(key.flow_id, key.owner_id, "another session")
    assert folds.start(key, gate.wait)
    assert not folds.start(other, gate.wait)
    assert any(log["event"].startswith("session_summary_fold_deferred reason=busy") for log in captured_logs)
    gate.set()
    await settle_folds()
    assert folds.start(other, gate.wait)
    await folds.close()


async def test_without_an_open_server_loop_nothing_runs_in_the_background(key):
    folds = BackgroundFolds()
    assert not folds.available()
    assert not folds.start(key, asyncio.sleep)


async def test_a_failing_background_fold_is_logged_without_text(service, sessions, key, captured_logs):
    _rows, turn = await seed(sessions, key, BATCH + WINDOW)
    service.background.open()
    secret = ScriptedChatModel(script=[RuntimeError("the secret customer name")])

    assert service.background.start(key, lambda: service.fold_after_turn(turn, secret))
    await settle_folds()

    failures = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_fold_failed")]
    assert len(failures) == 1
    assert failures[0].startswith("session_summary_fold_failed mode=background latency_ms=")
    assert failures[0].endswith(f"session_id={key.session_id!r} reason='RuntimeError'")
    assert not any("secret" in str(log) for log in captured_logs)
    await service.background.close()
