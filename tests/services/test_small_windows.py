"""Small context windows (a local model's 2,048 to 4,096 tokens), on SQLite and PostgreSQL.

The request a turn sends is estimated whole (instructions, tools, summary, gap, window, input), folded early before
it overflows, and never larger than the stock Agent's own when folding cannot help; a history cut short says so in
the log and still opens with a user message.
"""

import itertools
from datetime import timedelta

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.assembly import HISTORY_START_NOTE
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.storage import store
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.test_service import WINDOW, row

BATCH = DEFAULT_POLICY.batch_size
CONTEXT_WINDOW = 3000
# Long messages older than the window: about a batch and a half, even so that the window opens with a user message
# (30 at the default), each of them long enough that together they hold about 3,300 tokens whatever the batch size
# (~110 tokens each at the default).
LONG_GAP = BATCH + 2 * (BATCH // 4)
LONG = "a long message about the rollout plan, the customer's questions and the open tickets " * (100 // BATCH)
# A backlog over two batches, within what a turn reads (61 at the default); odd, so the window opens with an answer.
BACKLOG = 3 * BATCH + 1


def long_gap_session(key, gap: int):
    """``gap`` long messages older than the window, then a window of short ones; the last row is the input."""
    rows = chat_rows(key, gap + WINDOW)
    for message in rows[:gap]:
        message.text = f"{message.text}: {LONG}"
    return rows


def request_tokens(history, fixed: int = 0) -> int:
    return fixed + token_estimate.estimated_size(message.text for message in history.messages)


async def pause(sessions, key, clock) -> None:
    async with sessions.begin() as session:
        await store.create_if_absent(session, key)
        await store.pause(session, key, clock.now + timedelta(minutes=10), "TimeoutError")


async def test_the_raw_gap_counts_toward_the_early_fold(service, sessions, key):
    rows = await store_rows(sessions, long_gap_session(key, LONG_GAP))
    turn = Turn(key, WINDOW, rows[-1].id, context_window=CONTEXT_WINDOW)
    stock_window = [r.text for r in rows[-WINDOW:-1]]
    assert token_estimate.estimated_size(r.text for r in rows[:-1]) > CONTEXT_WINDOW  # gap and window overflow

    model = ScriptedChatModel()
    history = await service.build_history(turn, model)

    assert len(model.calls) == 2  # the gap folded early, its last batch partial
    assert (await row(sessions, key)).folded_count == LONG_GAP
    assert [m.text for m in history.messages][2:] == stock_window
    assert request_tokens(history) <= DEFAULT_POLICY.early_fold_share * CONTEXT_WINDOW


async def test_a_paused_session_near_the_window_sends_no_more_than_the_stock_agent(
    service, sessions, key, clock, captured_logs
):
    rows = await store_rows(sessions, long_gap_session(key, LONG_GAP))
    await pause(sessions, key, clock)
    turn = Turn(key, WINDOW, rows[-1].id, context_window=CONTEXT_WINDOW)

    history = await service.build_history(turn, ScriptedChatModel())

    stock = rows[-WINDOW:-1]  # what the stock Agent sends at the same N
    assert [m.text for m in history.messages if m.text != HISTORY_START_NOTE] == [r.text for r in stock]
    assert request_tokens(history) <= token_estimate.estimated_size(r.text for r in stock) + 30
    trimmed = [log["event"] for log in captured_logs if log["event"].startswith("session_memory_history_trimmed")]
    assert trimmed == [
        f"session_memory_history_trimmed left_out={LONG_GAP} reason=context_window summary_sent=False "
        f"session_id={key.session_id!r}"
    ]


async def test_a_paused_backlog_is_left_out_with_a_log_line_and_the_history_opens_with_the_user(
    service, sessions, key, clock, captured_logs
):
    rows = await store_rows(sessions, chat_rows(key, BACKLOG + WINDOW))  # the window starts with an answer
    await pause(sessions, key, clock)

    history = await service.build_history(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())

    assert history.messages[0].sender == "User"
    assert history.messages[0].text == HISTORY_START_NOTE
    assert [m.text for m in history.messages[1:]] == [r.text for r in rows[-WINDOW:-1]]
    assert history.messages[1].sender == "Machine"
    assert any(
        log["event"].startswith(f"session_memory_history_trimmed left_out={BACKLOG} reason=paused")
        for log in captured_logs
    )


async def test_roles_alternate_from_a_user_message_whatever_is_left_out(service, sessions, key, clock):
    rows = await store_rows(sessions, chat_rows(key, BACKLOG + WINDOW))
    await pause(sessions, key, clock)
    history = await service.build_history(Turn(key, WINDOW, rows[-1].id), ScriptedChatModel())
    roles = [message.sender for message in history.messages] + ["User"]  # the input follows
    assert roles[0] == "User"
    assert all(a != b for a, b in itertools.pairwise(roles))
