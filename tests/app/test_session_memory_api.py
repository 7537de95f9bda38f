"""The REST API under /api/v1/session_memory through the real app: see, correct and reset a summary."""

import asyncio
import json
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime
from html import escape

import pytest
from sqlalchemy import text

from langflow_session_memory.api import TABLE_MISSING
from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.agent.playground import summary_paths
from langflow_session_memory.services.session_memory.rules.assembly import SUMMARY_FRAME
from tests.app.langflow_client import (
    FOLDED_MESSAGES,
    FOLDED_SESSION_TURNS,
    SEEDED_SUMMARY,
    STARTER_FLOW,
    insert_state_row,
)
from tests.app.langflow_subjects import Builder, multi_user_mode
from tests.app.test_tool_results import answer_step_facts

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


def as_the_browser(
    langflow, path: str, token: str | None = None, *, method: str = "GET", data: dict | None = None, site: str = ""
):
    """``path`` as a browser requests it: its login cookie only (the superuser's, or ``token``; "" none); ``site`` the
    ``Sec-Fetch-Site`` the browser sends with it (none for a browser that sends none)."""
    saved = langflow.http.cookies
    if token is not None:
        langflow.http.cookies = type(saved)()
        if token:
            langflow.http.cookies.set("access_token_lf", token)
    headers = {"Authorization": ""} | ({"Sec-Fetch-Site": site} if site else {})
    try:
        with multi_user_mode():  # with auto-login on, Langflow logs any caller in: the cookie must be what decides
            return langflow.http.request(method, path, headers=headers, data=data, follow_redirects=method == "GET")
    finally:
        langflow.http.cookies = saved


def test_the_summary_page_opens_with_the_browsers_login_and_shows_the_session_and_its_summary(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)

    page = as_the_browser(langflow, f"{API}/{flow_id}/sessions/{session_id}/summary")

    assert page.status_code == 200, page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert (page.headers["x-frame-options"], page.headers["cache-control"]) == ("DENY", "no-store")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert f"<dd>{session_id}</dd>" in page.text
    assert f"<dt>Earlier messages summarized</dt><dd>{FOLDED_MESSAGES}</dd>" in page.text
    assert f'<textarea id="summary" name="summary" rows="18">{SEEDED_SUMMARY}</textarea>' in page.text
    assert "<script" not in page.text


def test_a_summary_holding_markup_is_shown_as_text(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    row = f"{API}/{flow_id}/sessions/{session_id}"
    marked = "Key facts:\n- <script>alert(1)</script></textarea><b>x</b>\nConversation so far:\n- x"
    langflow.http.put(row, json={"summary": marked, "version": 1}).raise_for_status()

    page = as_the_browser(langflow, f"{row}/summary")

    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;/textarea&gt;&lt;b&gt;x&lt;/b&gt;" in page.text


def seeded_row(langflow) -> str:
    """The API path of a new session's row, seeded as after its first folds (version 1)."""
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    return f"{API}/{flow_id}/sessions/{session_id}"


def saved_from_the_page(langflow, row: str, summary: str, *, version: int):
    """The page's Save, as the browser posts it: the text box and the version the page was opened at."""
    data = {"summary": summary, "version": str(version), "action": "save"}
    return as_the_browser(langflow, f"{row}/summary", method="POST", data=data, site="same-origin")


def test_its_owner_saves_a_corrected_summary_from_the_page(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    row = f"{API}/{flow_id}/sessions/{session_id}"
    corrected = "Key facts:\n- The customer is GLOBEX.\nConversation so far:\n- Corrected by hand."

    typed = corrected.replace("\n", "\r\n")  # as a browser sends a text box's lines
    saved = saved_from_the_page(langflow, row, typed, version=1)

    assert (saved.status_code, saved.headers["location"]) == (303, "summary?done=saved")
    assert langflow.http.get(row).json()["summary"] == corrected
    page = as_the_browser(langflow, f"{row}/summary?done=saved")
    assert "Saved. The Agent&#x27;s next turn in this session sends this summary." in page.text
    assert "The customer is GLOBEX." in page.text


def test_a_summary_the_page_refuses_keeps_what_was_typed_and_changes_nothing(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    row = f"{API}/{flow_id}/sessions/{session_id}"
    too_long = "Key facts:\n- " + "word " * 400

    refused = saved_from_the_page(langflow, row, too_long, version=1)

    assert refused.status_code == 422
    assert 'role="alert">Not saved:' in refused.text
    assert "word " * 400 in refused.text
    assert langflow.http.get(row).json()["summary"] == SEEDED_SUMMARY


def test_a_save_from_a_page_opened_before_a_fold_committed_is_refused_and_shows_both(langflow):
    row = seeded_row(langflow)
    opened = as_the_browser(langflow, f"{row}/summary")
    assert '<input type="hidden" name="version" value="1">' in opened.text
    folded = "Key facts:\n- The fold found the deadline: June 3.\nConversation so far:\n- the deadline"
    langflow.http.put(row, json={"summary": folded, "version": 1}).raise_for_status()  # as a fold's commit moves it
    typed = "Key facts:\n- The customer is GLOBEX.\nConversation so far:\n- typed on the page"

    stale = saved_from_the_page(langflow, row, typed, version=1)

    assert stale.status_code == 409
    assert 'role="alert">Not saved: the summary changed since this page was opened' in stale.text
    assert "The fold found the deadline: June 3." in stale.text
    assert "The customer is GLOBEX." in stale.text
    assert "Saved." not in stale.text
    assert langflow.http.get(row).json()["summary"] == folded
    again = saved_from_the_page(langflow, row, typed, version=2)
    assert again.status_code == 303  # the owner chose theirs, on the version they now saw
    assert langflow.http.get(row).json()["summary"] == typed


def test_a_put_on_a_version_a_fold_moved_since_is_refused_and_the_fold_kept(langflow):
    row = seeded_row(langflow)
    read = langflow.http.get(row)
    assert read.headers["etag"] == '"1"'
    folded = "Key facts:\n- The fold found the deadline: June 3.\nConversation so far:\n- the deadline"
    assert (
        langflow.http.put(row, json={"summary": folded}, headers={"If-Match": read.headers["etag"]}).status_code == 200
    )
    mine = "Key facts:\n- mine\nConversation so far:\n- mine"

    by_body = langflow.http.put(row, json={"summary": mine, "version": read.json()["version"]})
    by_header = langflow.http.put(row, json={"summary": mine}, headers={"If-Match": read.headers["etag"]})
    without = langflow.http.put(row, json={"summary": mine})

    assert (by_body.status_code, by_header.status_code, without.status_code) == (409, 409, 428)
    assert "changed since you read version 1" in by_body.json()["detail"]
    assert "If-Match" in without.json()["detail"]
    assert langflow.http.get(row).json()["summary"] == folded


def test_a_summary_sent_as_a_file_part_is_a_422_and_changes_nothing(langflow):
    row = seeded_row(langflow)
    with multi_user_mode():
        sent = langflow.http.post(
            f"{row}/summary",
            data={"action": "save", "version": "1"},
            files={"summary": ("notes.txt", b"Key facts:\n- from a file", "text/plain")},
            headers={"Authorization": "", "Sec-Fetch-Site": "same-origin"},
        )

    assert sent.status_code == 422
    assert "must be text fields" in sent.text
    assert "UploadFile" not in langflow.http.get(row).json()["summary"]
    assert langflow.http.get(row).json()["summary"] == SEEDED_SUMMARY


def test_its_owner_resets_the_summary_from_the_page(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    row = f"{API}/{flow_id}/sessions/{session_id}"

    reset = as_the_browser(langflow, f"{row}/summary", method="POST", data={"action": "reset"}, site="same-origin")

    assert (reset.status_code, reset.headers["location"]) == (303, "summary?done=reset")  # POST, redirect, GET
    assert langflow.http.get(row).status_code == 404
    after = as_the_browser(langflow, f"{row}/summary?done=reset")
    assert after.status_code == 200
    assert "Reset. The summary is gone" in after.text


@pytest.mark.parametrize(
    ("method", "suffix", "data", "headers"),
    [
        ("POST", "/summary", {"summary": "Key facts:\n- HACKED", "action": "save"}, {"Sec-Fetch-Site": "cross-site"}),
        ("POST", "/summary", {"action": "reset"}, {"Sec-Fetch-Site": "same-site"}),
        ("POST", "/summary", {"action": "reset"}, {"Origin": "https://elsewhere.example"}),
        ("DELETE", "", None, {"Sec-Fetch-Site": "cross-site"}),
    ],
    ids=["form-from-another-site", "form-from-a-sibling-subdomain", "old-browser-form", "delete-from-another-site"],
)
def test_no_request_from_another_site_changes_the_summary(langflow, method, suffix, data, headers):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    row = f"{API}/{flow_id}/sessions/{session_id}"
    with multi_user_mode():  # the browser's cookie alone, as a page on another site would send it
        refused = langflow.http.request(method, f"{row}{suffix}", data=data, headers={"Authorization": "", **headers})

    assert refused.status_code == 403, refused.text
    assert langflow.http.get(row).json()["summary"] == SEEDED_SUMMARY


def test_a_put_from_another_site_is_refused(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    row = f"{API}/{flow_id}/sessions/{session_id}"
    with multi_user_mode():
        refused = langflow.http.put(
            row,
            json={"summary": "Key facts:\n- HACKED", "version": 1},
            headers={"Authorization": "", "Sec-Fetch-Site": "cross-site"},
        )
    assert refused.status_code == 403
    assert langflow.http.get(row).json()["summary"] == SEEDED_SUMMARY


def test_a_link_stored_before_the_page_took_the_summary_s_name_still_opens_it(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)

    page = as_the_browser(langflow, f"{API}/{flow_id}/sessions/{session_id}/notes?context_id=")

    [moved] = page.history
    assert (moved.status_code, moved.headers["location"]) == (308, "summary?context_id=")
    assert page.status_code == 200, page.text
    assert SEEDED_SUMMARY in page.text


def test_the_summary_page_is_404_for_another_users_login_and_refused_without_one(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    stranger = Builder(langflow, f"stranger-{uuid.uuid4().hex[:8]}")
    page = f"{API}/{flow_id}/sessions/{session_id}/summary"

    theirs = as_the_browser(langflow, page, token=stranger.headers["Authorization"].removeprefix("Bearer "))
    nobody = as_the_browser(langflow, page, token="")

    assert theirs.status_code == 404, theirs.text
    assert SEEDED_SUMMARY not in theirs.text
    assert nobody.status_code in (401, 403)


def test_another_user_gets_404_for_every_route(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    stranger = Builder(langflow, f"stranger-{uuid.uuid4().hex[:8]}")
    path = f"{API}/{flow_id}/sessions/{session_id}"
    requests = [
        ("GET", f"{API}/{flow_id}/sessions", None),
        ("GET", path, None),
        ("GET", f"{path}/summary", None),
        ("PUT", path, {"summary": "Key facts:\n- mine now\nConversation so far:\n- nothing", "version": 1}),
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
    empty = langflow.http.put(path, json={"summary": "   ", "version": 1})
    long = langflow.http.put(path, json={"summary": "word " * 301, "version": 1})
    assert (empty.status_code, long.status_code) == (422, 422)
    assert "empty summary" in empty.text
    assert "301 words, over the 300-word cap" in long.text
    assert langflow.http.get(path).json()["summary"] == SEEDED_SUMMARY


def test_an_edited_summary_is_what_the_next_turn_sends(langflow, fake_model):
    session_id = new_session()
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    path = f"{API}/{flow_id}/sessions/{session_id}"
    corrected = "Key facts:\n- The customer is GLOBEX-7, not ACME.\nConversation so far:\n- codes were noted"

    edited = langflow.http.put(path, json={"summary": corrected, "version": 1})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["summary"], edited.json()["version"]) == (corrected, 2)

    before = len(fake_model.requests())
    langflow.run(flow_id, "Next one.", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}})
    chat = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"][-1]
    opening = chat["body"]["messages"][1]["content"]
    assert opening.startswith(SUMMARY_PREFIX)
    assert "GLOBEX-7" in opening
    assert "CODE-3" not in opening


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
    assert "CODE-0" in str(folds[0]["body"])  # folded again from the session's first message


def test_the_routes_are_in_langflows_openapi(langflow):
    paths = langflow.http.get("/openapi.json").json()["paths"]
    assert f"{API}/{{flow_id}}/sessions" in paths
    assert {"get", "put", "delete"} <= set(paths[f"{API}/{{flow_id}}/sessions/{{session_id}}"])
    assert f"{API}/{{flow_id}}/sessions/{{session_id}}/summary" in paths


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
    for turn in range(FOLDED_SESSION_TURNS):
        langflow.run(flow_id, f"Turn {turn}: note code CODE-{turn}.", session_id=session_id, tweaks=on)

    requests = fake_model.requests()[before:]
    assert {r["body"]["model"] for r in requests if r["kind"] == "summary"} == {"gpt-4.1-mini"}
    assert {r["body"]["model"] for r in requests if r["kind"] == "chat"} == {"gpt-4o-mini"}
    assert langflow.state_rows(flow_id) == [(session_id, FOLDED_MESSAGES)]


MARKER = "SUMMARY-TEXT-MARKER-5521"
STATEMENT_WORDS = ("SELECT", "UPDATE", "INSERT", "[SQL", "parameters", "session_memory_state WHERE")


def shows_no_statement(response) -> bool:
    return not any(word in response.text for word in STATEMENT_WORDS)


@pytest.mark.parametrize(
    ("summary", "says"),
    [
        (f"Key facts:\n- {MARKER}\x00\nConversation so far:\n- x", "the control character U+0000 at position 37"),
        (f"Key facts:\n- {MARKER}\x1b[31m\nConversation so far:\n- x", "the control character U+001B at position 37"),
        ("\u200b\u200d \ufeff", "empty summary"),
        (
            f"Key facts:\n- {'x' * 5_000_000} {'y' * 5_000_000}\nConversation so far:\n- x",
            "over the 4000-character cap",
        ),
    ],
    ids=["nul", "escape", "zero-width", "10MB-of-two-words"],
)
def test_a_summary_that_cannot_be_stored_or_sent_is_refused_with_a_clear_422(langflow, summary, says):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    path = f"{API}/{flow_id}/sessions/{session_id}"

    refused = langflow.http.put(path, json={"summary": summary, "version": 1})

    assert refused.status_code == 422, refused.text[:500]
    assert says in refused.json()["detail"]
    assert MARKER not in refused.text
    assert shows_no_statement(refused)
    assert langflow.http.get(path).json()["summary"] == SEEDED_SUMMARY  # and the next request is served


def test_a_session_id_holding_a_nul_is_not_found_on_either_database(langflow):
    flow_id, _ = langflow.seeded_folded_session(new_session())
    for method in ("GET", "PUT", "DELETE"):
        body = {"summary": "Key facts:\n- a\nConversation so far:\n- b", "version": 1} if method == "PUT" else None
        response = langflow.http.request(method, f"{API}/{flow_id}/sessions/a%00b", json=body)
        assert (response.status_code, response.json()["detail"]) == (404, "No session memory here"), method


@pytest.mark.expect_log("session_memory_api_failed")
def test_with_the_table_missing_every_route_answers_503_saying_how_to_restore_it(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    path = f"{API}/{flow_id}/sessions/{session_id}"
    edit = {"summary": f"Key facts:\n- {MARKER}\nConversation so far:\n- x", "version": 1}
    with langflow.engine.begin() as connection:
        connection.execute(text("DROP TABLE session_memory_state"))
    try:
        answers = [
            langflow.http.get(f"{API}/{flow_id}/sessions"),
            langflow.http.get(path),
            langflow.http.get(f"{path}/summary"),
            langflow.http.put(path, json=edit),
            langflow.http.delete(path),
        ]
    finally:
        asyncio.run(runner.upgrade(langflow.engine.url.render_as_string(hide_password=False)))

    for answer in answers:
        assert (answer.status_code, answer.json()) == (503, {"detail": TABLE_MISSING}), answer.text[:500]
    assert TABLE_MISSING == "session memory table missing: run `python -m langflow_session_memory migrate`"
    assert langflow.http.get(f"{API}/{flow_id}/sessions").status_code == 200  # the next request is served


@contextmanager
def edits_refused_by_the_database(langflow):
    """A trigger that fails every UPDATE of our table: a database error whose text quotes the statement's parameters."""
    if langflow.backend == "sqlite":
        create = [
            "CREATE TRIGGER refuse_edits BEFORE UPDATE ON session_memory_state "
            "BEGIN SELECT RAISE(ABORT, 'edits refused'); END"
        ]
        drop = ["DROP TRIGGER refuse_edits"]
    else:
        create = [
            "CREATE FUNCTION refuse_edits() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'edits refused'; END $$ "
            "LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_edits BEFORE UPDATE ON session_memory_state "
            "FOR EACH ROW EXECUTE FUNCTION refuse_edits()",
        ]
        drop = ["DROP TRIGGER refuse_edits ON session_memory_state", "DROP FUNCTION refuse_edits()"]
    with langflow.engine.begin() as connection:
        for statement in create:
            connection.execute(text(statement))
    try:
        yield
    finally:
        with langflow.engine.begin() as connection:
            for statement in drop:
                connection.execute(text(statement))


@pytest.mark.expect_log("session_memory_api_failed")
def test_a_database_error_answers_503_with_a_short_reason_and_no_text_in_the_answer_or_the_log(langflow):
    session_id = new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    path = f"{API}/{flow_id}/sessions/{session_id}"
    log_start = len(langflow.log_lines())

    with edits_refused_by_the_database(langflow):
        refused = langflow.http.put(
            path, json={"summary": f"Key facts:\n- {MARKER}\nConversation so far:\n- x", "version": 1}
        )

    assert refused.status_code == 503, refused.text[:500]
    assert refused.json()["detail"].startswith("session memory database error: ")
    assert MARKER not in refused.text
    assert shows_no_statement(refused)
    logged = langflow.log_lines()[log_start:]
    assert any("session_memory_api_failed reason=" in line for line in logged)
    assert not [line for line in logged if MARKER in line]
    assert langflow.http.get(path).json()["summary"] == SEEDED_SUMMARY  # rolled back; the next request is served


def test_another_users_rows_in_my_flow_are_not_mine_to_list_read_edit_or_reset(langflow):
    """A shared or public Playground stores an end user's session in the builder's flow, under that user's id."""
    session_id, theirs_only = new_session(), new_session()
    flow_id, _ = langflow.seeded_folded_session(session_id)
    end_user = uuid.uuid4()
    with langflow.engine.begin() as connection:  # written after mine, so theirs is the newest row of the session
        for their_session in (session_id, theirs_only):
            insert_state_row(
                connection,
                flow_id=flow_id,
                owner_id=end_user,
                session_id=their_session,
                summary=f"Key facts:\n- {MARKER}\nConversation so far:\n- theirs",
                cursor=(datetime.now(UTC), uuid.uuid4()),
            )
    mine, theirs = f"{API}/{flow_id}/sessions/{session_id}", f"{API}/{flow_id}/sessions/{theirs_only}"

    assert [item["session_id"] for item in langflow.http.get(f"{API}/{flow_id}/sessions").json()] == [session_id]
    assert langflow.http.get(mine).json()["summary"] == SEEDED_SUMMARY
    assert [langflow.http.request(method, theirs).status_code for method in ("GET", "DELETE")] == [404, 404]
    edit = {"summary": "Key facts:\n- mine\nConversation so far:\n- mine", "version": 1}
    assert langflow.http.put(theirs, json=edit).status_code == 404
    assert langflow.http.put(mine, json=edit).status_code == 200
    assert langflow.http.delete(mine).status_code == 204

    left = langflow.sql(
        "SELECT session_id, summary FROM session_memory_state WHERE session_id IN (:a, :b)", a=session_id, b=theirs_only
    )
    assert sorted((session, MARKER in summary) for session, summary in left) == sorted(
        [(session_id, True), (theirs_only, True)]
    )


ODD_SESSION_IDS = ["a/b", ".", "..", "%2F", "it's", "with space", "会话 ünïcode", "x" * 2000]


@pytest.mark.parametrize(
    "session_id",
    ODD_SESSION_IDS,
    ids=["slash", "dot", "dot-dot", "percent-2F", "quote", "space", "unicode", "2000-characters"],
)
def test_any_session_id_langflow_accepts_reaches_every_route_and_the_steps_link(langflow, session_id):
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    answer = langflow.run(
        flow_id, "What was the code?", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}}
    )
    link = answer_step_facts(answer)["summary_page"]
    row, page = summary_paths(flow_id, session_id, "")
    assert link == page

    read = langflow.http.get(row)
    opened = as_the_browser(langflow, link)
    assert (read.status_code, read.json()["session_id"]) == (200, session_id)
    assert opened.status_code == 200
    assert f"<dd>{escape(session_id)}</dd>" in opened.text
    typed = "Key facts:\n- typed on the page\nConversation so far:\n- x"
    form = {"summary": typed, "version": str(read.json()["version"]), "action": "save"}
    saved = as_the_browser(langflow, link, method="POST", data=form, site="same-origin")  # the form posts to its page
    assert (saved.status_code, langflow.http.get(row).json()["summary"]) == (303, typed)
    edited = {
        "summary": "Key facts:\n- edited by PUT\nConversation so far:\n- x",
        "version": read.json()["version"] + 1,
    }
    assert langflow.http.put(row, json=edited).status_code == 200
    assert langflow.http.delete(row).status_code == 204
    assert langflow.http.get(row).status_code == 404
