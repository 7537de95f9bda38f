"""Raw messages waiting to be folded are bounded in tokens, not only in count (issue 31), on SQLite and PostgreSQL.

A few huge pasted messages between the cursor and the window must not make every request larger than the stock
Agent's at the same N until a batch (20 at the default) is due: past their budget they are folded at once, even with
no window known, and while folding cannot run they are left out.
"""

from dataclasses import replace

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.storage import messages, store
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.test_service import WINDOW, row
from tests.services.test_small_windows import pause, request_tokens

SUMMARY = "Key facts:\n- a log was pasted\nConversation so far:\n- the user pasted a log"
PASTE = "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 400  # about 12,000 tokens


def pasted_session(key, pastes: int):
    """A short session whose ``pastes`` oldest user messages are huge logs, then a window of short ones."""
    rows = chat_rows(key, 2 * pastes + WINDOW)
    for message in rows[: 2 * pastes : 2]:
        message.text = f"{message.text}\n{PASTE}"
    return rows


def stock_size(rows) -> int:
    return token_estimate.estimated_size(r.text for r in rows[-WINDOW:-1])


async def test_pastes_waiting_over_the_budget_are_folded_at_once_with_no_window_known(service, sessions, key):
    rows = await store_rows(sessions, pasted_session(key, 3))
    turn = Turn(key, WINDOW, rows[-1].id)  # no context window: the fixed 16,000-token budget
    assert token_estimate.estimated_size(r.text for r in rows[:6]) > DEFAULT_POLICY.unknown_window_waiting_tokens

    model = ScriptedChatModel()
    history = await service.build_history(turn, model)

    assert len(model.calls) == 1  # one fold of the 6 waiting messages, a partial batch
    assert (await row(sessions, key)).folded_count == 6
    assert [m.text for m in history.messages][2:] == [r.text for r in rows[-WINDOW:-1]]
    summary = token_estimate.estimated_size(message.text for message in history.messages[:2])
    assert summary < 150
    assert request_tokens(history) <= stock_size(rows) + summary  # the stock Agent's window and the summary
    assert (history.waiting.messages, history.waiting.over) == (6, True)


async def test_waiting_messages_under_the_budget_are_sent_raw_as_before(service, sessions, key):
    rows = await store_rows(sessions, chat_rows(key, 6 + WINDOW))
    model = ScriptedChatModel()
    history = await service.build_history(Turn(key, WINDOW, rows[-1].id), model)
    assert model.calls == []
    assert [m.text for m in history.messages] == [r.text for r in rows[:-1]]
    assert (history.waiting.messages, history.waiting.over) == (6, False)


async def test_a_paused_session_leaves_pastes_over_the_budget_out(service, sessions, key, clock, captured_logs):
    rows = await store_rows(sessions, pasted_session(key, 3))
    await pause(sessions, key, clock)

    history = await service.build_history(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())

    assert [m.text for m in history.messages] == [r.text for r in rows[-WINDOW:-1]]
    trimmed = [log["event"] for log in captured_logs if log["event"].startswith("session_memory_history_trimmed")]
    assert trimmed == [
        f"session_memory_history_trimmed left_out=6 reason=waiting_tokens summary_sent=False "
        f"session_id={key.session_id!r}"
    ]


async def test_a_paste_about_to_leave_the_window_makes_a_fold_due_and_the_fold_after_the_answer_takes_it(
    service, sessions, key
):
    rows = chat_rows(key, 2 + WINDOW)
    rows[2].text = f"{rows[2].text}\n{PASTE * 2}"  # the window's oldest message: the gap's once the answer is stored
    await store_rows(sessions, rows)
    turn = Turn(key, WINDOW, rows[-1].id)

    history = await service.build_history(turn, ScriptedChatModel())
    assert history.fold_due  # 2 short messages wait: far from a batch, but the paste comes next
    await store_rows(sessions, chat_rows(key, 1, first=2 + WINDOW))  # the answer
    model = ScriptedChatModel()
    await service.fold_after_turn(turn, model)

    assert len(model.calls) == 1
    assert (await row(sessions, key)).folded_count == 3


async def test_a_paste_already_folded_early_from_the_window_makes_no_fold_due(service, sessions, key):
    rows = chat_rows(key, 2 + WINDOW)
    rows[2].text = f"{rows[2].text}\n{PASTE * 2}"
    await store_rows(sessions, rows)
    async with sessions.begin() as session:  # an early fold took the window's oldest message, the paste
        seen = await store.create_if_absent(session, key)
        folded = replace(seen, summary=SUMMARY, cursor=messages.cursor_of(rows[2]), folded_count=3)
        assert await store.compare_and_swap(session, seen, folded)

    history = await service.build_history(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())

    assert not history.fold_due
