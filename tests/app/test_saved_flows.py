"""Saved flows survive upgrades: the Session Memory Agent's code as every earlier version wrote it runs on this package.

Langflow keeps a node's component code in the saved flow and runs that copy, not the installed file
(docs/design.md, "Contracts"), so a flow saved with an earlier version of this extension runs the
component code of that version against the package installed now. Every version of the component that
reached main is kept in ``saved_components/`` (named by its commit's UTC time and hash; no git history is needed,
so the test runs in a shallow clone and from the sdist). Each is built by Langflow from its code
(``POST /api/v1/custom_component``), saved in a flow on a session whose first batch is folded, and run with the
switch on: the model's request must carry the summary, which only the memory path puts there (the stock Agent's
window of 2 holds turn 11 alone).
"""

import uuid
from pathlib import Path

import pytest

from tests.app.langflow_client import MODEL

SAVED = Path(__file__).resolve().parent / "saved_components"
QUESTION = "Which code did I note in turn 3?"
VERSIONS = sorted(SAVED.glob("*.component"))


def saved_with(langflow, flow_id: str, agent_id: str, code: str) -> None:
    """The flow's Agent node as Langflow saves it from ``code``: its template built from that code, the
    settings a builder gave it (the model, N=2, the switch on, no built-in tools)."""
    response = langflow.http.post("/api/v1/custom_component", json={"code": code})
    assert response.status_code == 200, response.text
    node = response.json()["data"]
    template = node["template"]
    for name, value in (
        ("model", MODEL),
        ("n_messages", 2),
        ("summarize_older_messages", True),
        ("add_current_date_tool", False),
        ("add_calculator_tool", False),
    ):
        template[name]["value"] = value
    flow = langflow.http.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
    agent = next(n for n in flow["data"]["nodes"] if n["id"] == agent_id)
    agent["data"]["node"] = node
    langflow.http.patch(f"/api/v1/flows/{flow_id}", json={"data": flow["data"]}).raise_for_status()


@pytest.mark.parametrize("langflow", ["sqlite"], indirect=True)
@pytest.mark.parametrize("saved", VERSIONS, ids=[path.stem for path in VERSIONS])
def test_a_flow_saved_with_an_earlier_version_of_the_component_still_sends_its_summary(langflow, fake_model, saved):
    commit, code = saved.stem, saved.read_text(encoding="utf-8")
    session_id = f"saved-{commit}-{uuid.uuid4()}"
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    saved_with(langflow, flow_id, agent_id, code)
    before = len(fake_model.requests())

    langflow.run(flow_id, QUESTION, session_id=session_id)

    chat = [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    assert chat, f"the component of {commit} made no model call"
    # CODE-3 is in the summary alone: the window of 2 holds turn 11, the unfolded rest turn 10.
    assert "CODE-3" in str(chat[0]["body"]), f"the component of {commit} ran without memory"


def test_every_version_of_the_component_is_tried_back_to_the_first():
    assert len(VERSIONS) >= 14  # the 14 versions up to 2026-12-06, and every later one
    assert VERSIONS[0].stem.endswith("_144a3b0")  # the first, 2026-11-30 08:38 UTC
    assert all("class SessionMemoryAgentComponent" in path.read_text(encoding="utf-8") for path in VERSIONS)
