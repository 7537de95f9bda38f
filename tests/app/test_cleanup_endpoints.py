"""Summaries follow Langflow's own deletions, renames and edits, through its real endpoints."""

import uuid

from langflow.memory import delete_message


def new_session() -> str:
    return f"cleanup-{uuid.uuid4()}"


def test_session_delete_endpoint_removes_the_rows(langflow):
    session_id = new_session()
    flow_id, _ = langflow.folded_session(session_id)
    response = langflow.http.delete(f"/api/v1/monitor/messages/session/{session_id}")
    assert response.status_code == 204
    assert langflow.message_ids(flow_id) == []
    assert langflow.state_rows(flow_id) == []


def test_sessions_bulk_delete_endpoint_removes_the_rows(langflow):
    session_id = new_session()
    flow_id, _ = langflow.folded_session(session_id)
    response = langflow.http.request("DELETE", "/api/v1/monitor/messages/sessions", json=[session_id])
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == []


def test_deleting_folded_messages_by_id_drops_the_summary(langflow):
    session_id = new_session()
    flow_id, _ = langflow.folded_session(session_id)
    ids = langflow.message_ids(flow_id)
    response = langflow.http.request("DELETE", "/api/v1/monitor/messages", json=ids[2:4])
    assert response.status_code == 204
    assert len(langflow.message_ids(flow_id)) == len(ids) - 2
    assert langflow.state_rows(flow_id) == []


def test_deleting_a_message_the_summary_does_not_cover_keeps_it(langflow):
    session_id = new_session()
    flow_id, _ = langflow.folded_session(session_id)
    newest = langflow.message_ids(flow_id)[-1]
    assert langflow.http.request("DELETE", "/api/v1/monitor/messages", json=[newest]).status_code == 204
    assert langflow.state_rows(flow_id) == [(session_id, 20)]


def test_single_message_delete_drops_the_summary(langflow):
    session_id = new_session()
    flow_id, _ = langflow.folded_session(session_id)
    first = langflow.message_ids(flow_id)[0]
    langflow.http.portal.call(delete_message, uuid.UUID(first))  # per-object delete, used on failed replies
    assert first not in langflow.message_ids(flow_id)
    assert langflow.state_rows(flow_id) == []


def test_flow_delete_removes_its_rows_and_no_other_flows(langflow):
    flow_id, _ = langflow.folded_session("New Session 0")
    other_flow, _ = langflow.folded_session("New Session 0")
    assert langflow.http.delete(f"/api/v1/flows/{flow_id}").status_code == 200
    assert langflow.state_rows(flow_id) == []
    assert langflow.state_rows(other_flow) == [("New Session 0", 20)]


def test_bulk_flow_delete_removes_their_rows(langflow):
    flow_id, _ = langflow.folded_session(new_session())
    response = langflow.http.request("DELETE", "/api/v1/flows/", json=[flow_id])
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == []


def test_project_delete_removes_its_flows_rows(langflow):
    project = langflow.http.post("/api/v1/projects/", json={"name": f"project {uuid.uuid4().hex[:8]}"})
    project_id = project.raise_for_status().json()["id"]
    flow_id, _ = langflow.folded_session(new_session(), project_id=project_id)
    assert langflow.http.delete(f"/api/v1/projects/{project_id}").status_code == 204
    assert langflow.state_rows(flow_id) == []


def test_renamed_session_keeps_its_summary(langflow):
    old, new = new_session(), new_session()
    flow_id, _ = langflow.folded_session(old)
    [(summary_before,)] = langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=old)
    response = langflow.http.patch(f"/api/v1/monitor/messages/session/{old}", params={"new_session_id": new})
    assert response.status_code == 200
    assert langflow.state_rows(flow_id) == [(new, 20)]
    assert langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=new) == [(summary_before,)]


def test_editing_a_folded_message_drops_the_summary_and_the_next_fold_lacks_the_old_text(langflow, fake_model):
    session_id = new_session()
    flow_id, agent_id = langflow.folded_session(session_id)
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
