"""The REST API under /api/v1/session_memory through the real app: see, correct and reset a summary."""

import json
import uuid

from langflow_session_memory.services.session_memory.service import SUMMARY_FRAME
from tests.app.langflow_client import FOLDED_MESSAGES, SEEDED_SUMMARY, STARTER_FLOW
from tests.app.langflow_subjects import Builder, multi_user_mode

SUMMARY_PREFIX = SUMMARY_FRAME.split("{summary}")[0].strip()
API = "/api/v1/session_memory"


def new_session() -> str:
    return f"api-{uuid.uuid4()}"


def test_list_and_get_show_the_users_sessions(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)

    listed = langflow.http.get(f"{API}/{flow_id}/sessions")
    assert listed.status_code == 200, listed.text
    [item] = listed.json()
    assert (item["session_id"], item["context_id"], item["folded_count"]) == (session_id, "", FOLDED_MESSAGES)
    assert item["words"] == len(SEEDED_SUMMARY.split())

    one = langflow.http.get(f"{API}/{flow_id}/sessions/{session_id}")
    assert one.status_code == 200, one.text
    assert one.json()["summary"] == SEEDED_SUMMARY
    assert (one.json()["version"], one.json()["paused_until"]) == (1, None)


def test_an_unknown_session_or_context_is_404(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    assert langflow.http.get(f"{API}/{flow_id}/sessions/nobody").status_code == 404
    other_context = langflow.http.get(f"{API}/{flow_id}/sessions/{session_id}", params={"context_id": "ctx"})
    assert other_context.status_code == 404
    assert langflow.http.get(f"{API}/{uuid.uuid4()}/sessions").status_code == 404


def test_the_api_needs_langflows_authentication(langflow):
    flow_id, _ = langflow.seeded_folded_session(new_session())
    anonymous = {"Authorization": ""}
    with multi_user_mode():  # with auto-login on, Langflow itself logs an anonymous caller in
        cookies = type(langflow.http.cookies)(langflow.http.cookies)
        langflow.http.cookies.clear()
        try:
            refused = langflow.http.get(f"{API}/{flow_id}/sessions", headers=anonymous)
            with_key = langflow.http.get(
                f"{API}/{flow_id}/sessions", headers={**anonymous, "x-api-key": langflow.api_key}
            )
        finally:
            langflow.http.cookies = cookies
    assert refused.status_code in (401, 403)
    assert with_key.status_code == 200


def test_another_user_gets_404_for_every_route(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    stranger = Builder(langflow, f"stranger-{uuid.uuid4().hex[:8]}")
    path = f"{API}/{flow_id}/sessions/{session_id}"
    requests = [
        ("GET", f"{API}/{flow_id}/sessions", None),
        ("GET", path, None),
        ("PUT", path, {"summary": "Key facts:\n- mine now\nConversation so far:\n- nothing"}),
        ("DELETE", path, None),
    ]
    for method, url, body in requests:
        response = langflow.http.request(method, url, json=body, headers=stranger.headers)
        assert response.status_code == 404, (method, url, response.text)
    assert langflow.state_rows(flow_id) == [(session_id, FOLDED_MESSAGES)]
    [(summary,)] = langflow.sql("SELECT summary FROM session_memory_state WHERE session_id = :s", s=session_id)
    assert summary == SEEDED_SUMMARY


def test_an_empty_or_over_long_summary_is_refused_with_a_clear_422(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    path = f"{API}/{flow_id}/sessions/{session_id}"
    empty = langflow.http.put(path, json={"summary": "   "})
    long = langflow.http.put(path, json={"summary": "word " * 301})
    assert (empty.status_code, long.status_code) == (422, 422)
    assert "empty summary" in empty.text
    assert "301 words, over the 300-word cap" in long.text
    assert langflow.http.get(path).json()["summary"] == SEEDED_SUMMARY


def test_an_edited_summary_is_what_the_next_turn_sends(langflow, fake_model):
    session_id = new_session()
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    path = f"{API}/{flow_id}/sessions/{session_id}"
    corrected = "Key facts:\n- The customer is GLOBEX-7, not ACME.\nConversation so far:\n- codes were noted"

    edited = langflow.http.put(path, json={"summary": corrected})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["summary"], edited.json()["version"]) == (corrected, 2)

    before = len(fake_model.requests())
    langflow.run(flow_id, "Next one.", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}})
    chat = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"][-1]
    notes = chat["body"]["messages"][1]["content"]
    assert notes.startswith(SUMMARY_PREFIX)
    assert "GLOBEX-7" in notes
    assert "CODE-3" not in notes


def test_a_reset_session_is_folded_again_from_its_start(langflow, fake_model):
    session_id = new_session()
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    response = langflow.http.delete(f"{API}/{flow_id}/sessions/{session_id}")
    assert response.status_code == 204
    assert langflow.state_rows(flow_id) == []
    assert langflow.http.get(f"{API}/{flow_id}/sessions/{session_id}").status_code == 404

    before = len(fake_model.requests())
    langflow.run(flow_id, "Next one.", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}})
    folds = [r for r in fake_model.requests()[before:] if r["kind"] == "summary"]
    assert len(folds) >= 1
    assert "(none yet)" in str(folds[0]["body"])
    assert "CODE-0" in str(folds[0]["body"])


def test_the_routes_are_in_langflows_openapi(langflow):
    paths = langflow.http.get("/openapi.json").json()["paths"]
    assert f"{API}/{{flow_id}}/sessions" in paths
    assert {"get", "put", "delete"} <= set(paths[f"{API}/{{flow_id}}/sessions/{{session_id}}"])


def connect_summary_model(langflow, flow_id: str, agent_id: str, model_name: str) -> None:
    """Add a Language Model component (Langflow's own) and wire its model output to the Agent's Summary Model."""
    flow = langflow.http.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
    node_id = f"LanguageModelComponent-{uuid.uuid4().hex[:5]}"
    starter = json.loads((STARTER_FLOW.parent / "Basic Prompting.json").read_text())
    node = next(n for n in starter["data"]["nodes"] if n["data"].get("type") == "LanguageModelComponent")["data"][
        "node"
    ]
    node["template"]["model"]["value"] = [{"name": model_name, "provider": "OpenAI", "metadata": {}}]
    flow["data"]["nodes"].append(
        {
            "id": node_id,
            "type": "genericNode",
            "position": {"x": 0, "y": 0},
            "data": {"id": node_id, "type": "LanguageModelComponent", "node": node},
        }
    )
    flow["data"]["edges"].append(
        {
            "id": f"edge-{node_id}-{agent_id}",
            "source": node_id,
            "target": agent_id,
            "data": {
                "sourceHandle": {
                    "dataType": "LanguageModelComponent",
                    "id": node_id,
                    "name": "model_output",
                    "output_types": ["LanguageModel"],
                },
                "targetHandle": {
                    "fieldName": "summary_model",
                    "id": agent_id,
                    "inputTypes": ["LanguageModel"],
                    "type": "other",
                },
            },
        }
    )
    langflow.http.patch(f"/api/v1/flows/{flow_id}", json={"data": flow["data"]}).raise_for_status()


def test_a_connected_summary_model_writes_the_summaries(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    connect_summary_model(langflow, flow_id, agent_id, "gpt-4.1-mini")
    on = {agent_id: {"summarize_older_messages": True}}
    session_id = new_session()
    before = len(fake_model.requests())
    for turn in range(12):
        langflow.run(flow_id, f"Turn {turn}: note code CODE-{turn}.", session_id=session_id, tweaks=on)

    requests = fake_model.requests()[before:]
    assert {r["body"]["model"] for r in requests if r["kind"] == "summary"} == {"gpt-4.1-mini"}
    assert {r["body"]["model"] for r in requests if r["kind"] == "chat"} == {"gpt-4o-mini"}
    assert langflow.state_rows(flow_id) == [(session_id, 20)]
