"""Summaries follow Langflow's own deletions, renames and edits, through its real endpoints.

Most tests start from :meth:`LangflowClient.seeded_folded_session` (the messages and the
summary row written with SQL) rather than real turns (12 at the default); the first test proves that a seeded
session is stored exactly like one folded through the app.
"""

import json
import re
import uuid

from langflow.memory import delete_message

from langflow_session_memory.services.session_memory.agent.playground import STEP_NAME
from tests.app.langflow_client import FOLDED_MESSAGES, FOLDED_SESSION_TURNS


def new_session() -> str:
    return f"cleanup-{uuid.uuid4()}"


def shape(value) -> str:
    """A raw stored value with its type and its hex digits blanked, e.g. ``str:xxxx-xx-xx xx:xx:xx.xxxxxx``."""
    return f"{type(value).__name__}:{re.sub(r'[0-9a-f]', 'x', str(value))}"


def parsed(value):
    """A JSON column as the driver returns it: text on SQLite, already parsed on PostgreSQL."""
    return json.loads(value) if isinstance(value, str) else value


def without_memory_step(blocks: list) -> list:
    """Content blocks as the stock Agent stores them: the "Session memory" step (tested on its own) taken out.

    With the step gone, an "Agent Steps" group left holding only the answer's text is what
    Langflow stores as no blocks at all for an answer without tool steps.
    """
    kept = []
    for block in blocks or []:
        if block.get("type") == "tool_use" and block.get("name") == STEP_NAME:
            continue
        if block.get("type") == "group":
            contents = without_memory_step(block.get("contents"))
            if all(leaf.get("type") == "text" for leaf in contents):
                continue
            block = {**block, "contents": contents}
        kept.append(block)
    return kept


def message_as_stored(m) -> tuple:
    """One ``message`` row, raw, minus what differs from run to run (ids, times, token counts)."""
    properties = parsed(m.properties)
    return (
        *(shape(value) for value in (m.id, m.flow_id, m.user_id, m.run_id, m.timestamp)),
        *(m.user_id, m.session_id, m.context_id, m.sender, m.sender_name, m.text),
        *(m.error, m.edit, m.is_output, m.category, parsed(m.files), without_memory_step(parsed(m.content_blocks))),
        sorted(parsed(m.session_metadata)),
        *(properties["state"], properties["source"], properties["icon"], sorted(properties.get("usage") or {})),
    )


def stored(langflow, flow_id: str) -> dict:
    """A folded session as the database holds it, read with plain SQL."""
    flow = uuid.UUID(flow_id).hex if langflow.backend == "sqlite" else flow_id
    messages = langflow.sql("SELECT * FROM message WHERE flow_id = :f ORDER BY timestamp, id", f=flow)
    [state] = langflow.sql(
        "SELECT s.*, m.text AS cursor_text FROM session_memory_state s LEFT JOIN message m"
        " ON m.id = s.cursor_message_id AND m.timestamp = s.cursor_timestamp WHERE s.flow_id = :f",
        f=flow,
    )
    return {
        "messages": [message_as_stored(m) for m in messages],
        "state": (state.owner_id, state.session_id, state.context_id, state.folded_count, state.version),
        "state shapes": [shape(state.flow_id), shape(state.cursor_timestamp), shape(state.cursor_message_id)],
        "state pause": state.paused_until,
        "codes in the summary": [f"CODE-{i}" for i in range(FOLDED_SESSION_TURNS) if f"CODE-{i}" in state.summary],
        # Found only if the cursor is stored in the very form of the message's own id and timestamp.
        "cursor message": state.cursor_text,
    }


def test_a_seeded_session_is_stored_like_one_folded_through_the_app(langflow):
    real_flow, _ = langflow.folded_session("the same session")
    seeded_flow, _ = langflow.seeded_folded_session("the same session")
    assert stored(langflow, seeded_flow) == stored(langflow, real_flow)


def test_session_delete_endpoint_removes_the_rows(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    response = langflow.http.delete(f"/api/v1/monitor/messages/session/{session_id}")
    assert response.status_code == 204
    assert langflow.message_ids(flow_id) == []
    assert langflow.state_rows(flow_id) == []


def test_sessions_bulk_delete_endpoint_removes_the_rows(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    response = langflow.http.request("DELETE", "/api/v1/monitor/messages/sessions", json=[session_id])
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == []


def test_deleting_folded_messages_by_id_drops_the_summary(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    ids = langflow.message_ids(flow_id)
    response = langflow.http.request("DELETE", "/api/v1/monitor/messages", json=ids[2:4])
    assert response.status_code == 204
    assert len(langflow.message_ids(flow_id)) == len(ids) - 2
    assert langflow.state_rows(flow_id) == []


def test_deleting_a_range_that_straddles_the_cursor_drops_the_summary(langflow):
    session_id = new_session()
    # Two turns more than the seeded session: messages 0-27, the summary covering 0-19, at the default.
    flow_id, _ = langflow.seeded_folded_session(session_id, turns=FOLDED_SESSION_TURNS + 2)
    ids = langflow.message_ids(flow_id)
    first, last = FOLDED_MESSAGES - 5, FOLDED_MESSAGES + 6  # 15 and 26 at the default: around the cursor
    response = langflow.http.request("DELETE", "/api/v1/monitor/messages", json=ids[first:last])
    assert response.status_code == 204
    assert langflow.message_ids(flow_id) == ids[:first] + ids[last:]
    assert langflow.state_rows(flow_id) == []


def test_deleting_a_message_the_summary_does_not_cover_keeps_it(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    newest = langflow.message_ids(flow_id)[-1]
    assert langflow.http.request("DELETE", "/api/v1/monitor/messages", json=[newest]).status_code == 204
    assert langflow.state_rows(flow_id) == [(session_id, FOLDED_MESSAGES)]


def test_single_message_delete_drops_the_summary(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    first = langflow.message_ids(flow_id)[0]
    langflow.http.portal.call(delete_message, uuid.UUID(first))  # per-object delete, used on failed replies
    assert first not in langflow.message_ids(flow_id)
    assert langflow.state_rows(flow_id) == []


def test_flow_delete_removes_its_rows_and_no_other_flows(langflow):
    flow_id, _ = langflow.seeded_folded_session("New Session 0")
    other_flow, _ = langflow.seeded_folded_session("New Session 0")
    assert langflow.http.delete(f"/api/v1/flows/{flow_id}").status_code == 200
    assert langflow.state_rows(flow_id) == []
    assert langflow.state_rows(other_flow) == [("New Session 0", FOLDED_MESSAGES)]


def test_bulk_flow_delete_removes_their_rows(langflow):
    flow_id, _ = langflow.seeded_folded_session(new_session())
    response = langflow.http.request("DELETE", "/api/v1/flows/", json=[flow_id])
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == []


def test_project_delete_removes_its_flows_rows(langflow):
    project = langflow.http.post("/api/v1/projects/", json={"name": f"project {uuid.uuid4().hex[:8]}"})
    project_id = project.raise_for_status().json()["id"]
    flow_id, _ = langflow.seeded_folded_session(new_session(), project_id=project_id)
    assert langflow.http.delete(f"/api/v1/projects/{project_id}").status_code == 204
    assert langflow.state_rows(flow_id) == []


def test_renamed_session_keeps_its_summary(langflow):
    old, new = new_session(), new_session()
    flow_id, _ = langflow.seeded_folded_session(old)
    [(summary_before,)] = langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=old)
    response = langflow.http.patch(f"/api/v1/monitor/messages/session/{old}", params={"new_session_id": new})
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == [(new, FOLDED_MESSAGES)]
    assert langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=new) == [(summary_before,)]


def test_editing_a_folded_message_drops_the_summary_and_the_next_fold_lacks_the_old_text(langflow, fake_model):
    session_id = new_session()
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    question, answer = langflow.message_ids(flow_id)[:2]  # the user's message and the reply that echoes it
    response = langflow.http.put(f"/api/v1/monitor/messages/{question}", json={"text": "Turn 0: forget it."})
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == []
    assert langflow.http.put(f"/api/v1/monitor/messages/{answer}", json={"text": "OK."}).status_code == 200

    before = len(fake_model.requests())
    langflow.run(flow_id, "Next.", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}})
    folds = [r for r in fake_model.requests()[before:] if r["kind"] == "summary"]
    assert len(folds) == 1
    assert "CODE-0" not in str(folds[0]["body"])
    [(summary,)] = langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=session_id)
    assert "CODE-0" not in summary
    assert "CODE-1" in summary
