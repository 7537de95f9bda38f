"""The Agent's Embedding Model through the real Langflow app: Langflow's Embedding Model component on the Ollama
provider, wired as a builder wires it, against the bundled server's Ollama route (``/api/embed``).

The bundled server's vectors are bags of hashed words (no meaning: ``make eval-real`` judges that on a real
embedding model); here the summary holds every word of the question, so the word excerpts find nothing, and
what reaches the model shows what the embedding model found.
"""

import json
import uuid

import httpx
import pytest

from benchmarks.app import connect_embedding_model
from tests.app.langflow_client import insert_state_row
from tests.app.test_search_earlier_messages import ASKED, LOCKER_FACT, store_messages, switched_on
from tests.app.test_session_memory_agent import chat_requests

N_MESSAGES = 2
SUMMARY = "Key facts:\n- The locker code of team 10 was agreed.\nConversation so far:\n- The weather."
FILLERS = 30


@pytest.fixture
def ollama_at_the_bundled_server(fake_model, monkeypatch) -> str:
    """Langflow's Ollama provider pointed at the bundled server, a loopback host the operator trusts."""
    root = fake_model.base_url.removesuffix("/v1")
    monkeypatch.setenv("OLLAMA_BASE_URL", root)
    monkeypatch.setenv("LANGFLOW_SSRF_ALLOWED_HOSTS", "127.0.0.2")
    return root


def embedding_session(langflow) -> tuple[str, str, str]:
    """A flow with the Embedding Model wired to the Agent, and a session whose locker fact is folded among 30 older
    messages, the summary holding the question's words but not the code. Its flow, Agent and id."""
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    connect_embedding_model(langflow.http, langflow.catalogue_entry("EmbeddingModel"), flow_id, agent_id, "all-minilm")
    session_id = f"meaning-{uuid.uuid4()}"
    owner = langflow.user_id
    rows = [(flow_id, owner, session_id, "User", LOCKER_FACT.format(team=10), 100)]
    for minute in range(FILLERS):
        sender, text = ("Machine", "OK.") if minute % 2 else ("User", f"Filler: the weather is fine, day {minute}.")
        rows.append((flow_id, owner, session_id, sender, text, 99 - minute))
    folded = store_messages(langflow, rows)
    with langflow.engine.begin() as connection:
        insert_state_row(
            connection,
            flow_id=flow_id,
            owner_id=owner,
            session_id=session_id,
            summary=SUMMARY,
            cursor=(folded[-1]["timestamp"], folded[-1]["id"]),
            folded_count=len(folded),
        )
    return flow_id, agent_id, session_id


def embed_requests(fake_model, since: int) -> list[dict]:
    return [r for r in fake_model.requests()[since:] if r["kind"] == "embed"]


def test_the_catalogue_shows_embedding_model_as_an_advanced_handle(langflow):
    handle = langflow.catalogue_entry("SessionMemoryAgent")["template"]["embedding_model"]
    assert (handle["display_name"], handle["input_types"], handle["advanced"]) == (
        "Embedding Model",
        ["Embeddings"],
        True,
    )


def test_an_older_message_the_embedding_model_finds_reaches_the_model(
    langflow, fake_model, ollama_at_the_bundled_server
):
    flow_id, agent_id, session_id = embedding_session(langflow)
    before = len(fake_model.requests())

    langflow.run(flow_id, ASKED, session_id=session_id, tweaks=switched_on(agent_id))

    pool, query = embed_requests(fake_model, before)
    assert LOCKER_FACT.format(team=10) in pool["body"]["input"]  # the older messages, once
    assert query["body"]["input"] in (ASKED, [ASKED])
    [asked] = chat_requests(fake_model, before)
    assert "VAULT-10" in json.dumps(asked["body"]["messages"])


def test_with_the_switch_off_the_embedding_model_is_never_called(langflow, fake_model, ollama_at_the_bundled_server):
    flow_id, _, session_id = embedding_session(langflow)
    before = len(fake_model.requests())

    langflow.run(flow_id, ASKED, session_id=session_id)

    assert embed_requests(fake_model, before) == []
    [asked] = chat_requests(fake_model, before)
    assert "VAULT-10" not in json.dumps(asked["body"]["messages"])


@pytest.mark.expect_log("session_memory_excerpts_failed")
def test_a_failing_embedding_model_leaves_the_turn_as_without_it(langflow, fake_model, ollama_at_the_bundled_server):
    flow_id, agent_id, session_id = embedding_session(langflow)
    control = f"{ollama_at_the_bundled_server}/_control"
    httpx.post(control, json={"embed_fail_status": 500}, timeout=10).raise_for_status()
    try:
        before = len(fake_model.requests())
        response = langflow.run(flow_id, ASKED, session_id=session_id, tweaks=switched_on(agent_id))
    finally:
        httpx.post(control, json={"embed_fail_status": None}, timeout=10).raise_for_status()

    assert response.status_code == 200
    assert [r["status"] for r in embed_requests(fake_model, before)] == [500]
    asked = chat_requests(fake_model, before)[0]  # then the model searches with its tool, as without an embedding model
    assert "VAULT-10" not in json.dumps(asked["body"]["messages"])
