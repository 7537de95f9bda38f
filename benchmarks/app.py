"""The real Langflow app in-process, driven through its public API like a user's client.

``TestClient(create_app())`` starts Langflow with its lifespan, this extension's plugin
(which migrates our table) and the component catalogue, as ``langflow run`` would; flows
are created with ``POST /api/v1/flows/`` and run with ``POST /api/v1/run/{id}``. Start-up
costs 15-40 s, so one app serves a whole process (Langflow's services are process-wide).
"""

import copy
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from benchmarks.inprocess import LogTail
from langflow_session_memory.bundled_server.langflow_env import import_langflow_main, langflow_environment

STARTER_FLOW = ("initial_setup", "starter_projects", "Simple Agent.json")


class LangflowApp:
    """The app through its public API (flows, run), and its database through SQL for what the API does not show."""

    def __init__(self, client, url: str, log_file: Path):
        from sqlalchemy import create_engine

        self.http = client
        self.engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        self.log = LogTail(log_file)
        token = client.get("/api/v1/auto_login").raise_for_status().json()["access_token"]
        client.headers["Authorization"] = f"Bearer {token}"
        self.api_key = client.post("/api/v1/api_key/", json={"name": "bench"}).raise_for_status().json()["api_key"]

    def create_flow(
        self,
        model: str,
        *,
        session_memory: bool = True,
        agent_inputs: dict | None = None,
        provider: str = "OpenAI",
    ) -> tuple[str, str]:
        """Langflow's "Simple Agent" starter (Chat Input -> Agent -> Chat Output), its Agent swapped for ours
        unless ``session_memory`` is False; ``agent_inputs`` set the Agent's inputs by name (``max_tokens``, ...);
        ``provider`` is the Langflow model provider of ``model``. Returns (flow id, agent node id)."""
        import langflow

        graph = json.loads(Path(langflow.__file__).parent.joinpath(*STARTER_FLOW).read_text())["data"]
        keep = {n["id"] for n in graph["nodes"] if n["data"]["type"] in {"ChatInput", "ChatOutput", "Agent"}}
        graph["nodes"] = [n for n in graph["nodes"] if n["id"] in keep]
        graph["edges"] = [e for e in graph["edges"] if e["source"] in keep and e["target"] in keep]
        agent = next(n for n in graph["nodes"] if n["data"]["type"] == "Agent")
        if session_memory:
            agent["data"]["node"] = self._catalogue_entry("SessionMemoryAgent")
            agent["data"]["type"] = "SessionMemoryAgent"
        template = agent["data"]["node"]["template"]
        template["model"]["value"] = [{"name": model, "provider": provider, "metadata": {}}]
        template["add_current_date_tool"]["value"] = False
        template["add_calculator_tool"]["value"] = False
        for input_name, value in (agent_inputs or {}).items():
            if input_name in template:
                template[input_name]["value"] = value
        name = "session memory agent" if session_memory else "stock agent"
        flow = self.http.post("/api/v1/flows/", json={"name": name, "data": graph})
        return flow.raise_for_status().json()["id"], agent["id"]

    def connect_embedding_model(self, flow_id: str, agent_id: str, model: str) -> None:
        """Langflow's Embedding Model component on the Ollama provider, wired to the Agent
        (:func:`connect_embedding_model`)."""
        connect_embedding_model(self.http, self._catalogue_entry("EmbeddingModel"), flow_id, agent_id, model)

    def _catalogue_entry(self, name: str) -> dict:
        for components in self.http.get("/api/v1/all").raise_for_status().json().values():
            for entry in components.values():
                code = entry.get("template", {}).get("code", {}).get("value", "") if isinstance(entry, dict) else ""
                if f'name = "{name}"' in code:
                    return entry
        raise LookupError(f"{name} is not in Langflow's component catalogue: is the package installed?")

    def run(self, flow_id: str, text: str, session_id: str, tweaks: dict) -> None:
        """One chat turn through ``/api/v1/run``; raises with Langflow's answer when it is not a 200."""
        body = {
            "input_value": text,
            "input_type": "chat",
            "output_type": "chat",
            "session_id": session_id,
            "tweaks": tweaks,
        }
        response = self.http.post(f"/api/v1/run/{flow_id}", headers={"x-api-key": self.api_key}, json=body)
        if response.status_code != 200:
            raise RuntimeError(f"run failed ({response.status_code}): {response.text[:500]}")

    def settle_folds(self) -> None:
        """Wait for the folds started after answers, as a user reads an answer before writing again.

        Without it a fold may still run when the next turn is sent or a figure is read: the demo and
        the eval would count what the machine's load left unfolded, not what the extension does.
        """
        import asyncio

        from langflow_session_memory.services.session_memory.folding.background import settle_folds
        from langflow_session_memory.services.session_memory.runtime import get_session_memory_service

        # After one answer a self-hosted server's backlog folds batch after batch (a 260-message backlog: 13 folds
        # of about 30 s on 2 cores), so the wait is what the policy lets those folds take, not a fixed figure.
        policy = get_session_memory_service().policy
        timeout = policy.claim(policy.idle_batches).total_seconds()
        self.http.portal.call(lambda: asyncio.wait_for(settle_folds(), timeout))

    def last_answer(self, session_id: str) -> tuple[str, dict]:
        """The Agent's last stored message in the session: its text and the usage Langflow stored with it."""
        text, properties = self.sql(
            "SELECT text, properties FROM message WHERE session_id = :s AND sender = 'Machine' "
            "ORDER BY timestamp DESC LIMIT 1",
            s=session_id,
        )[0]
        properties = json.loads(properties) if isinstance(properties, str) else properties or {}
        return text or "", properties.get("usage") or {}

    def state(self, session_id: str) -> tuple[int, str]:
        """``folded_count`` and ``summary`` of the session's state row; (0, "") when it has none."""
        rows = self.sql("SELECT folded_count, summary FROM session_memory_state WHERE session_id = :s", s=session_id)
        return (rows[0][0], rows[0][1]) if rows else (0, "")

    def owner(self, flow_id: str):
        """The flow's owner: whose messages its chats store."""
        flow_key = uuid.UUID(flow_id).hex if self.engine.dialect.name == "sqlite" else flow_id
        return uuid.UUID(str(self.sql("SELECT user_id FROM flow WHERE id = :f", f=flow_key)[0][0]))

    def store_messages(self, flow_id: str, session_id: str, said) -> list[uuid.UUID]:
        """``said`` (sender, sender name, text, timestamp) stored as Langflow stores a chat of the flow's owner; the
        ids of the rows, in order."""
        from langflow.services.database.models.message.model import MessageTable
        from sqlalchemy import insert

        owner = self.owner(flow_id)
        rows = [
            {
                "id": uuid.uuid4(),
                "timestamp": timestamp,
                "sender": sender,
                "sender_name": sender_name,
                "session_id": session_id,
                "text": text,
                "flow_id": uuid.UUID(flow_id),
                "user_id": owner,
                "error": False,
                "edit": False,
                "files": [],
                "properties": {},
                "category": "message",
                "content_blocks": [],
            }
            for sender, sender_name, text, timestamp in said
        ]
        with self.engine.begin() as connection:
            connection.execute(insert(MessageTable.__table__), rows)
        return [row["id"] for row in rows]

    def sql(self, statement: str, **parameters) -> list:
        from sqlalchemy import text

        with self.engine.connect() as connection:
            return connection.execute(text(statement), parameters).all()


def connect_embedding_model(http, component: dict, flow_id: str, agent_id: str, model: str) -> None:
    """Langflow's Embedding Model ``component`` (its catalogue entry) on the Ollama provider, wired to the Agent's
    Embedding Model as a builder connects it in the editor. Langflow finds the Ollama server by OLLAMA_BASE_URL."""
    flow = http.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
    node = copy.deepcopy(component)
    node["template"]["model"]["value"] = [{"name": model, "provider": "Ollama", "metadata": {}}]
    node_id = "EmbeddingModel-memory"
    flow["data"]["nodes"].append(
        {
            "id": node_id,
            "type": "genericNode",
            "position": {"x": 0, "y": 400},
            "data": {"id": node_id, "type": "EmbeddingModel", "node": node},
        }
    )
    source = {"dataType": "EmbeddingModel", "id": node_id, "name": "embeddings", "output_types": ["Embeddings"]}
    target = {"fieldName": "embedding_model", "id": agent_id, "inputTypes": ["Embeddings"], "type": "other"}
    edge = {"sourceHandle": source, "targetHandle": target}
    flow["data"]["edges"].append({"id": f"edge-{node_id}", "source": node_id, "target": agent_id, "data": edge})
    http.patch(f"/api/v1/flows/{flow_id}", json={"data": flow["data"]}).raise_for_status()


def _quiet_console() -> None:
    """Keep INFO records (every request) off the terminal; Langflow's log file still gets them all."""
    for handler in logging.root.handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)


@contextmanager
def langflow_app(url: str, *, model_base_url: str | None) -> Iterator[LangflowApp]:
    """Start the app on ``url`` (once per process); ``model_base_url`` None keeps the user's OpenAI settings."""
    with ExitStack() as stack:
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-app-", ignore_cleanup_errors=True)))
        environment = langflow_environment(
            url, home, model_base_url=model_base_url, plays_hosted=model_base_url is not None
        )
        os.environ.update(environment)
        import_langflow_main()
        from fastapi.testclient import TestClient
        from langflow.main import create_app
        from lfx.services.deps import get_settings_service

        get_settings_service().settings.database_url = url
        _quiet_console()
        client = stack.enter_context(TestClient(create_app()))
        _quiet_console()
        app = LangflowApp(client, url, Path(environment["LANGFLOW_LOG_FILE"]))
        try:
            yield app
        finally:
            app.engine.dispose()
