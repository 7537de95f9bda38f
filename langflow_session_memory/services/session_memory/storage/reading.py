"""What a turn reads: the newest N messages, the state row and the unfolded messages before them.

One statement in the common case, so a turn without a fold costs one round trip like the
stock Agent's history query; bounded everywhere (keyset on ``(timestamp, id)``, LIMIT).
"""

from langflow_session_memory.services.session_memory.rules.state import Reading, SessionState
from langflow_session_memory.services.session_memory.rules.turn import SessionFactory, Turn
from langflow_session_memory.services.session_memory.storage import messages, store


async def read(sessions: SessionFactory, turn: Turn, gap_limit: int) -> Reading:
    """The window, the state row and up to ``gap_limit`` unfolded messages before the window.

    One statement reads the newest N + ``gap_limit`` unfolded messages with the row. A second
    query runs only for a backlog (the gap may be longer than its limit and must start at the
    cursor), when the cursor lies inside the window (the window is then read whatever the
    cursor: an Agent always sends its own N), or when no message follows the cursor (the row
    was not returned).
    """
    n = turn.n_messages
    async with sessions() as session:
        unfolded, state = await messages.newest_unfolded(session, turn.key, n + gap_limit)
        if state is None:
            state = await store.load(session, turn.key) or SessionState(key=turn.key)
        if len(unfolded) < n and state.cursor is not None:
            return Reading(window=await messages.newest(session, turn.key, n), state=state, gap=[])
        window, gap = unfolded[-n:], unfolded[:-n]
        if len(gap) == gap_limit:
            gap = await messages.gap(
                session, turn.key, after=state.cursor, before=messages.cursor_of(window[0]), limit=gap_limit
            )
        return Reading(window=window, state=state, gap=gap)
