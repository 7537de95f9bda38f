"""The full-text index of older messages through the real Langflow app (issue 52): filled after answers, a question
answered from the message after the one its words find, and the index gone with the session and the flow."""

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from langflow_session_memory.services.session_memory.rules.assembly import EXCERPTS_FRAME
from tests.app.langflow_client import MESSAGE, insert_state_row, message_row
from tests.app.test_search_earlier_messages import answer_text, switched_on
from tests.app.test_session_memory_agent import chat_requests

N_MESSAGES = 4
# The question's words find the first; the answer is the reply after it, which holds none of them.
ASKED = "Did you pick a supplier for the gearbox parts yet?"
REPLIED = "Yes, SUP-7731, the small workshop in Porto."
QUESTION = "Which supplier makes our gearbox parts?"
FOLDED = 20
NOTES = "Key facts:\n- The user likes to talk about the weather.\nConversation so far:\n- Small talk about the weather."
STORED = 24


def seeded_chat(langflow, flow_id: str, session_id: str) -> None:
    """An exchange about a supplier and small talk, the first 20 messages folded into notes that do not hold it, then
    4 newer messages of small talk: stored as Langflow and a fold store them, so only an excerpt can bring it back."""
    start = datetime.now(UTC) - timedelta(hours=1)
    texts = [("User", ASKED), ("Machine", REPLIED)]
    texts += [("User" if i % 2 == 0 else "Machine", f"Small talk {i} about the weather.") for i in range(22)]
    rows = [
        message_row(
            flow_id=flow_id,
            owner_id=langflow.user_id,
            session_id=session_id,
            timestamp=start + timedelta(seconds=i),
            sender=sender,
            text_=text_,
        )
        for i, (sender, text_) in enumerate(texts)
    ]
    with langflow.engine.begin() as connection:
        connection.execute(insert(MESSAGE), rows)
        insert_state_row(
            connection,
            flow_id=flow_id,
            owner_id=langflow.user_id,
            session_id=session_id,
            summary=NOTES,
            cursor=(rows[FOLDED - 1]["timestamp"], rows[FOLDED - 1]["id"]),
            folded_count=FOLDED,
        )


def quoted(request: dict) -> str:
    """The older messages a chat request quotes (the user-role message the excerpts come in), or ""."""
    return next(
        (m["content"] for m in request["body"]["messages"] if str(m["content"]).startswith(EXCERPTS_FRAME[:40])), ""
    )


def indexed(langflow, session_id: str) -> int:
    [(count,)] = langflow.sql("SELECT count(*) FROM session_memory_search_entry WHERE session_id = :s", s=session_id)
    return count


def test_an_answer_indexes_the_older_messages_and_a_question_is_answered_from_the_hits_next_message(
    langflow, fake_model
):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    session_id = f"index-{uuid.uuid4()}"
    on = switched_on(agent_id, search_older_messages=False)  # the model answers from what the turn sends
    seeded_chat(langflow, flow_id, session_id)
    assert indexed(langflow, session_id) == 0

    before = len(fake_model.requests())
    response = langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=on)  # the index is behind: words only
    [asked] = chat_requests(fake_model, before)
    assert ASKED in quoted(asked)
    assert REPLIED not in quoted(asked)
    assert "SUP-7731" not in answer_text(response)
    langflow.settle_folds()
    assert indexed(langflow, session_id) == STORED + 2 - (N_MESSAGES - 1)  # all that the next window leaves out

    before = len(fake_model.requests())
    response = langflow.run(flow_id, QUESTION, session_id=session_id, tweaks=on)

    [asked] = chat_requests(fake_model, before)
    assert REPLIED in quoted(asked)
    assert "SUP-7731" in answer_text(response)
    assert any("session_memory_passages " in line for line in langflow.log_lines())


def test_deleting_the_session_and_the_flow_deletes_their_index(langflow):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    kept, deleted = f"index-{uuid.uuid4()}", f"index-{uuid.uuid4()}"
    for session_id in (kept, deleted):
        seeded_chat(langflow, flow_id, session_id)
        langflow.run(flow_id, "Hello again.", session_id=session_id, tweaks=switched_on(agent_id))
    langflow.settle_folds()
    assert indexed(langflow, kept) > 0
    assert indexed(langflow, deleted) > 0

    langflow.http.delete(f"/api/v1/monitor/messages/session/{deleted}").raise_for_status()
    assert indexed(langflow, deleted) == 0
    assert indexed(langflow, kept) > 0

    langflow.http.delete(f"/api/v1/flows/{flow_id}").raise_for_status()
    assert indexed(langflow, kept) == 0
