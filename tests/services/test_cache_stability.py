"""The prompt-cache contract: between two folds, each turn's request starts with the previous turn's, unchanged.

Providers serve an exact prompt prefix from their cache at a discount (OpenAI from 1,024
tokens, Anthropic at its breakpoints). The history a turn sends is the summary, then every
unfolded message in order: it only grows until a fold (or a reset after an edit of a folded
message) rewrites it from the summary on. Checked here over random sessions on the real
databases, through the service as the Agent drives it: the input stored first, the history
built, the answer stored, sometimes the fold after the answer.
"""

import uuid
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langflow.services.database.models.message.model import MessageTable

from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import store
from langflow_session_memory.services.session_memory.storage.cleanup import install_cleanup_listeners
from tests.chat import START, ScriptedChatModel, store_rows

# A turn whose answer is read before the next message (its fold lands), one that comes while
# the fold would still run (none lands), and an edit of a message the summary already covers.
STEPS = st.lists(st.sampled_from(["turn_then_fold", "turn", "edit_folded"]), min_size=8, max_size=30)


def message(key: SessionKey, index: int, sender: str, text: str) -> MessageTable:
    return MessageTable(
        id=uuid.uuid4(),
        sender=sender,
        sender_name="User" if sender == "User" else "AI",
        session_id=key.session_id,
        text=text,
        flow_id=key.flow_id,
        user_id=key.owner_id,
        timestamp=START + timedelta(seconds=index),
    )


async def edit_a_folded_message(sessions, key: SessionKey) -> bool:
    """A user corrects the last message the summary covers: it is dropped (cleanup listener) and refolded."""
    async with sessions.begin() as session:
        state = await store.load(session, key)
        if state is None or state.cursor is None:
            return False
        folded = await session.get(MessageTable, state.cursor.message_id)
        folded.text = f"{folded.text} (corrected)"
    return True


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS, n_messages=st.sampled_from([2, 4, 10]))
async def test_between_folds_each_request_starts_with_the_previous_one(sessions, clock, steps, n_messages):
    install_cleanup_listeners()
    key = SessionKey(flow_id=uuid.uuid4(), owner_id=uuid.uuid4(), session_id="New Session 0")
    service = SessionMemoryService(sessions=sessions, clock=clock)
    model = ScriptedChatModel()
    stored, edits, previous = 0, 0, None  # messages stored; folded messages edited; the previous turn's request
    for index, step in enumerate(steps):
        if step == "edit_folded":
            edits += await edit_a_folded_message(sessions, key)
            continue
        [question] = await store_rows(sessions, [message(key, stored, "User", f"question {index} about PRJ-{index}")])
        turn = Turn(key, n_messages, question.id)
        history = await service.build_history(turn, model)
        request = [(m.sender, m.text) for m in history.messages] + [("User", question.text)]
        rewrites = len(model.calls) + edits  # every fold asks the model; an edit of a folded message drops the summary
        if previous is not None and previous[2] == rewrites:  # nothing rewrote the summary since: the prefix holds
            earlier, earlier_answer, _rewrites = previous
            assert request[: len(earlier)] == earlier
            assert request[len(earlier)] == ("Machine", earlier_answer)
        answer = f"answer {index}: PRJ-{index} noted"
        await store_rows(sessions, [message(key, stored + 1, "Machine", answer)])
        stored += 2
        if step == "turn_then_fold" and history.fold_due:
            await service.fold_after_turn(turn, model)
        previous = (request, answer, rewrites)
