"""The "Session Memory Chat" starter flow through the real app: among Langflow's templates, and it remembers."""

import pytest

from langflow_session_memory.flow_model import FlowModel
from langflow_session_memory.starter_flow import install_starter_flow, saved_flow
from langflow_session_memory.starter_flow_link import copy_of
from tests.app.langflow_client import BATCH, turns_to_fold
from tests.app.test_session_memory_agent import FACT, QUESTION, talk

STARTER_NAME = "Session Memory Chat"
TURNS_BEFORE_THE_QUESTION = turns_to_fold(4)  # at N=4 the last answer leaves a batch older: it folds after it (12)


def starter_template(langflow) -> dict:
    """The starter as the Templates dialog receives it."""
    examples = langflow.http.get("/api/v1/flows/basic_examples/").raise_for_status().json()
    (template,) = [example for example in examples if example["name"] == STARTER_NAME]
    return template


def agent_node(flow: dict) -> dict:
    (node,) = [node for node in flow["data"]["nodes"] if node["data"]["type"] == "SessionMemoryAgent"]
    return node["data"]["node"]


def flow_from_template(langflow, template: dict) -> str:
    """What picking the template in the dialog does: a copy in the user's own project; returns its id."""
    body = {key: template[key] for key in ("name", "description", "icon", "tags", "data")}
    return langflow.http.post("/api/v1/flows/", json=body).raise_for_status().json()["id"]


def test_the_starter_is_a_template_with_the_switch_on_and_four_recent_messages(langflow):
    node = agent_node(starter_template(langflow))

    template = node["template"]
    assert template["summarize_older_messages"]["value"] is True
    assert template["n_messages"]["value"] == 4
    assert [(model["name"], model["provider"]) for model in template["model"]["value"]] == [("gpt-5.4-mini", "OpenAI")]
    installed = langflow.catalogue_entry("SessionMemoryAgent")["template"]
    assert template["code"]["value"] == installed["code"]["value"]  # the installed component, not a stale copy
    assert set(installed) <= set(template)


def test_the_starter_is_laid_out_left_to_right(langflow):
    nodes = {node["data"]["type"]: node["position"] for node in starter_template(langflow)["data"]["nodes"]}
    assert nodes["ChatInput"]["x"] < nodes["SessionMemoryAgent"]["x"] < nodes["ChatOutput"]["x"]


def test_a_flow_made_from_the_starter_answers_from_its_summary(langflow):
    flow_id = flow_from_template(langflow, starter_template(langflow))
    session_id = flow_id  # the Playground's Default Session
    langflow.run(flow_id, FACT, session_id=session_id)
    talk(langflow, flow_id, session_id, TURNS_BEFORE_THE_QUESTION - 1)

    answer = langflow.run(flow_id, QUESTION, session_id=session_id).json()

    assert "PRJ-123" in answer["outputs"][0]["outputs"][0]["results"]["message"]["text"]
    row = langflow.http.get(f"/api/v1/session_memory/{flow_id}/sessions/{session_id}").raise_for_status().json()
    assert row["folded_count"] == BATCH
    assert "PRJ-123" in row["summary"]


@pytest.mark.parametrize(
    ("model", "variable", "api"),
    [
        (FlowModel("Ollama", "qwen2.5:1.5b"), "OLLAMA_BASE_URL", "ollama"),
        (FlowModel("OpenAI Compatible", "qwen2.5-coder-1.5b-instruct"), "OPENAI_COMPATIBLE_BASE_URL", "openai"),
    ],
)
def test_the_starters_copy_for_a_local_server_remembers_over_that_servers_api(
    langflow, fake_model, monkeypatch, model, variable, api
):
    """``make run MODEL=ollama`` or ``MODEL=openai-compatible``: the user's copy for the model, on Langflow's own
    provider for that server, every request on that server's API."""
    root = fake_model.base_url.removesuffix("/v1")
    monkeypatch.setenv(variable, root if api == "ollama" else fake_model.base_url)
    monkeypatch.setenv("LANGFLOW_SSRF_ALLOWED_HOSTS", "127.0.0.2")
    body = copy_of(starter_template(langflow), model)
    flow_id = langflow.http.post("/api/v1/flows/", json=body).raise_for_status().json()["id"]
    before = len(fake_model.requests())
    langflow.run(flow_id, FACT, session_id=flow_id)
    talk(langflow, flow_id, flow_id, TURNS_BEFORE_THE_QUESTION - 1)

    answer = langflow.run(flow_id, QUESTION, session_id=flow_id).json()

    assert "PRJ-123" in answer["outputs"][0]["outputs"][0]["results"]["message"]["text"]
    requests = fake_model.requests()[before:]
    assert {(r["api"], r["body"]["model"]) for r in requests} == {(api, model.name)}
    assert "summary" in {r["kind"] for r in requests}
    row = langflow.http.get(f"/api/v1/session_memory/{flow_id}/sessions/{flow_id}").raise_for_status().json()
    assert "PRJ-123" in row["summary"]


def test_another_start_refreshes_the_starter_instead_of_adding_a_second(langflow):
    assert langflow.on_app_loop(install_starter_flow) == "updated"
    assert langflow.sql("SELECT count(*) FROM flow WHERE name = :n AND user_id IS NULL", n=STARTER_NAME) == [(1,)]
    starter_id = saved_flow()["id"]
    stored = langflow.sql("SELECT id FROM flow WHERE name = :n AND user_id IS NULL", n=STARTER_NAME)
    assert [str(row[0]).replace("-", "") for row in stored] == [starter_id.replace("-", "")]
