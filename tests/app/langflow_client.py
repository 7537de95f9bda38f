"""Talks to an in-process Langflow through its public API, and reads its database with SQL."""

import copy
import json
import uuid
from pathlib import Path

import langflow
from sqlalchemy import create_engine, text

STARTER_FLOW = Path(langflow.__file__).parent / "initial_setup" / "starter_projects" / "Simple Agent.json"
MODEL = [{"name": "gpt-4o-mini", "provider": "OpenAI", "metadata": {}}]


class LangflowClient:
    def __init__(self, client, *, url: str, backend: str, log_file: str):
        self.http = client
        self.log_file = Path(log_file)
        self.backend = backend
        self.engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        token = client.get("/api/v1/auto_login").json()["access_token"]
        client.headers["Authorization"] = f"Bearer {token}"
        self.api_key = client.post("/api/v1/api_key/", json={"name": "tests"}).json()["api_key"]

    def catalogue_entry(self, name: str) -> dict:
        """A component's template from ``GET /api/v1/all``, found by its ``name``."""
        catalogue = self.http.get("/api/v1/all").raise_for_status().json()
        for components in catalogue.values():
            for entry in components.values():
                if isinstance(entry, dict) and entry.get("template", {}).get("_type") and _name(entry) == name:
                    return entry
        raise LookupError(f"{name} is not in the component catalogue")

    def create_agent_flow(
        self, *, session_memory: bool, n_messages: int, project_id: str | None = None
    ) -> tuple[str, str]:
        """Chat Input -> (Session Memory) Agent -> Chat Output; returns (flow id, agent node id)."""
        flow = json.loads(STARTER_FLOW.read_text())
        graph = flow["data"]
        keep = {n["id"] for n in graph["nodes"] if n["data"]["type"] in {"ChatInput", "ChatOutput", "Agent"}}
        graph["nodes"] = [n for n in graph["nodes"] if n["id"] in keep]
        graph["edges"] = [e for e in graph["edges"] if e["source"] in keep and e["target"] in keep]
        agent = next(n for n in graph["nodes"] if n["data"]["type"] == "Agent")
        if session_memory:
            agent["data"]["node"] = copy.deepcopy(self.catalogue_entry("SessionMemoryAgent"))
            agent["data"]["type"] = "SessionMemoryAgent"
        template = agent["data"]["node"]["template"]
        template["model"]["value"] = MODEL
        template["n_messages"]["value"] = n_messages
        template["add_current_date_tool"]["value"] = False
        template["add_calculator_tool"]["value"] = False
        body = {"name": f"{'memory' if session_memory else 'stock'} agent", "data": graph}
        if project_id:
            body["folder_id"] = project_id
        created = self.http.post("/api/v1/flows/", json=body).raise_for_status().json()
        return created["id"], agent["id"]

    def run(
        self,
        flow_id: str,
        text_: str,
        *,
        session_id: str,
        tweaks: dict | None = None,
        stream: bool = False,
        check: bool = True,
        headers: dict | None = None,
    ):
        """``POST /api/v1/run`` with this client's API key; ``headers`` add to or replace it."""
        response = self.http.post(
            f"/api/v1/run/{flow_id}",
            params={"stream": str(stream).lower()},
            headers={"x-api-key": self.api_key, **(headers or {})},
            json={
                "input_value": text_,
                "input_type": "chat",
                "output_type": "chat",
                "session_id": session_id,
                "tweaks": tweaks or {},
            },
        )
        if check:
            assert response.status_code == 200, response.text
        return response

    def folded_session(self, session_id: str, *, project_id: str | None = None) -> tuple[str, str]:
        """A new flow whose ``session_id`` has a summary row (12 turns at N=2 fold messages 1-20)."""
        flow_id, agent_id = self.create_agent_flow(session_memory=True, n_messages=2, project_id=project_id)
        for i in range(12):
            self.run(
                flow_id,
                f"Turn {i}: note code CODE-{i}.",
                session_id=session_id,
                tweaks={agent_id: {"summarize_older_messages": True}},
            )
        assert self.state_rows(flow_id) == [(session_id, 20)]
        return flow_id, agent_id

    def state_rows(self, flow_id: str) -> list[tuple[str, int]]:
        return self.sql(
            "SELECT session_id, folded_count FROM session_memory_state WHERE flow_id = :f",
            f=uuid.UUID(flow_id).hex if self.backend == "sqlite" else flow_id,
        )

    def message_ids(self, flow_id: str) -> list[str]:
        """The flow's stored messages, oldest first, as the monitor API lists them."""
        response = self.http.get("/api/v1/monitor/messages", params={"flow_id": flow_id}).raise_for_status()
        return [m["id"] for m in sorted(response.json(), key=lambda m: m["timestamp"])]

    def log_lines(self) -> list[str]:
        """Langflow's own log file, as an operator reads it."""
        return self.log_file.read_text().splitlines() if self.log_file.exists() else []

    def sql(self, statement: str, **params) -> list:
        with self.engine.connect() as connection:
            return connection.execute(text(statement), params).all()


def _name(entry: dict) -> str | None:
    code = entry.get("template", {}).get("code", {}).get("value", "")
    for line in code.splitlines():
        if line.strip().startswith("name = "):
            return line.split("=", 1)[1].strip().strip("\"'")
    return None
