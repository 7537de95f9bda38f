"""A refused fold is never asked again as it was: a model at temperature 0 answers the same request the same way.

On SQLite and PostgreSQL, through the service and the fold runner, with a model whose refusals are
deterministic (issue 38: Qwen2.5-Coder 1.5B ran past the output cap on the same batch after every pause).
"""

import time
import uuid
from dataclasses import replace
from datetime import timedelta

from langchain_core.messages import AIMessage
from pydantic import Field

from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import store
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.test_service import BATCH, WINDOW, folded_turn, row, seed


class RefusingModel(ScriptedChatModel):
    """Writes an empty answer (a refused summary) for every request that holds ``poison``; records them."""

    poison: str = ""
    refused: list = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.poison in messages[-1].content:
            self.refused.append(messages[-1].content)
            self.script = [""]
        return super()._generate(messages, stop, run_manager, **kwargs)


async def test_after_a_refused_batch_the_next_attempt_asks_for_half_its_messages(service, sessions, key, clock):
    _, turn = await seed(sessions, key, BATCH + WINDOW)
    await folded_turn(service, turn, ScriptedChatModel(script=[""]))  # refused: the session pauses
    paused = await row(sessions, key)
    assert (paused.folded_count, paused.fold_batch_limit) == (0, BATCH // 2)

    clock.now += timedelta(minutes=10)
    model = ScriptedChatModel()
    await folded_turn(service, Turn(key, WINDOW, None), model)

    assert [len(model.batch_texts(call)) for call in range(len(model.calls))] == [BATCH // 2, BATCH // 2]
    resumed = await row(sessions, key)
    assert (resumed.folded_count, resumed.fold_batch_limit, resumed.paused_until) == (BATCH, None, None)


async def test_a_message_whose_summary_is_always_refused_never_stalls_the_session(
    service, sessions, key, clock, captured_logs
):
    rows, _ = await seed(sessions, key, BATCH + WINDOW)
    model = RefusingModel(poison=rows[3].text)

    turns = 0
    while (state := await row(sessions, key)) is None or state.folded_count < BATCH:
        turns += 1
        assert turns <= 10, "the session stopped folding"
        await folded_turn(service, Turn(key, WINDOW, None), model)
        await store_rows(sessions, chat_rows(key, 2, first=BATCH + WINDOW + 2 * turns))  # the turn's two messages
        clock.now += timedelta(minutes=10)

    assert len(model.refused) == len(set(model.refused))  # no refused request was ever sent again
    assert "Key facts" in state.summary  # what the other messages said is kept
    skipped = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_fold_skipped")]
    assert len(skipped) == 1
    assert rows[3].text not in skipped[0]  # counts and reasons, never text


async def test_a_400_message_backlog_on_a_one_slot_server_folds_after_answers_one_fold_at_a_time(
    service, sessions, key
):
    await seed(sessions, key, 400 + WINDOW)
    model = ScriptedChatModel()
    turns = 0
    while (state := await row(sessions, key)) is None or state.folded_count < 400:
        turns += 1
        assert turns <= 400 // BATCH, "the backlog stopped folding"  # one batch after each answer
        turn = Turn(key, WINDOW, uuid.uuid4(), waits_for_folds=True)  # a local server: the next turn waits for folds
        calls = len(model.calls)
        history = await service.build_history(turn, model)
        assert len(model.calls) == calls  # the turn folds nothing before its answer
        assert history.fold_due  # the backlog folds after the answer
        calls = len(model.calls)
        await service.fold_after_turn(turn, model)
        assert len(model.calls) - calls == 1  # and the next turn, waiting for the fold after this answer, for one


async def test_a_backlog_on_a_hosted_server_folds_its_excess_inside_the_turn(service, sessions, key):
    await seed(sessions, key, 400 + WINDOW)
    model = ScriptedChatModel()

    await service.build_history(Turn(key, WINDOW, uuid.uuid4(), waits_for_folds=False), model)

    assert model.calls  # nobody waits for the server: it serves the fold and the answer


async def test_a_lone_message_whose_answer_the_server_cut_is_asked_again_not_passed_over(
    service, sessions, key, captured_logs
):
    await seed(sessions, key, BATCH + WINDOW)
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        assert await store.compare_and_swap(session, seen, replace(seen, fold_batch_limit=1))
    interrupted = AIMessage(content="Key facts:\n- the customer is AC", response_metadata={"model_provider": "openai"})

    await folded_turn(service, Turn(key, WINDOW, None), ScriptedChatModel(script=[interrupted]))

    state = await row(sessions, key)
    assert (state.folded_count, state.paused_until is not None) == (0, True)  # paused, the message still to fold
    assert not [log for log in captured_logs if log["event"].startswith("session_summary_fold_skipped")]


class SlowOnPoisonModel(ScriptedChatModel):
    """Takes ``seconds`` over every request that holds ``poison`` (a message a model chews on past the fold's time);
    records them."""

    poison: str = ""
    seconds: float = 0.0
    slow: list = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.poison in messages[-1].content:
            self.slow.append(messages[-1].content)
            time.sleep(self.seconds)
        return super()._generate(messages, stop, run_manager, **kwargs)


async def test_a_lone_message_whose_fold_times_out_is_passed_over_not_asked_again(sessions, key, clock, captured_logs):
    service = SessionMemoryService(
        sessions=sessions, clock=clock, policy=replace(DEFAULT_POLICY, fold_timeout_seconds=0.2)
    )
    rows, _ = await seed(sessions, key, BATCH + WINDOW)
    model = SlowOnPoisonModel(poison=rows[3].text, seconds=0.4)

    turns = 0
    while (state := await row(sessions, key)) is None or state.folded_count < BATCH:
        turns += 1
        assert turns <= 10, "the session stopped folding"
        await folded_turn(service, Turn(key, WINDOW, None), model)
        await store_rows(sessions, chat_rows(key, 2, first=BATCH + WINDOW + 2 * turns))
        clock.now += timedelta(minutes=10)

    assert len(model.slow) == len(set(model.slow))  # no request that ran out of time was ever sent again
    skipped = [log["event"] for log in captured_logs if log["event"].startswith("session_summary_fold_skipped")]
    assert len(skipped) == 1
    assert "TimeoutError" in skipped[0]
