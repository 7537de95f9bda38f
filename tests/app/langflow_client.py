"""Talks to an in-process Langflow through its public API, and reads (or seeds) its database with SQL."""

import asyncio
import copy
import json
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import langflow
import pytest
from langflow.services.database.models.message.model import MessageTable
from lfx.schema.properties import Properties
from sqlalchemy import Column, Connection, Integer, MetaData, Table, Text, Uuid, insert, text
from sqlmodel.sql.sqltypes import UTCDateTime

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.folding.background import settle_folds
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from tests.app.langflow_app import (
    MIGRATED_EVENT,
    LangflowLog,
    database_engine,
    failure_lines,
    one_app_at_a_time,
    running_langflow,
    shared_log_file,
    shown,
)
from tests.databases import fresh_database

STARTER_FLOW = Path(langflow.__file__).parent / "initial_setup" / "starter_projects" / "Simple Agent.json"
MODEL = [{"name": "gpt-4o-mini", "provider": "OpenAI", "metadata": {}}]
CLAUDE = [{"name": "claude-sonnet-4-5-20250929", "provider": "Anthropic", "metadata": {}}]
MESSAGE = MessageTable.__table__  # Langflow's own column types: each backend stores ids and times as Langflow does
# The contract columns of our table (docs/design.md), declared here so the tests do not depend on the package's model.
STATE = Table(
    "session_memory_state",
    MetaData(),
    Column("flow_id", Uuid),
    Column("owner_id", Uuid),
    Column("session_id", Text),
    Column("context_id", Text),
    Column("summary", Text),
    Column("cursor_timestamp", UTCDateTime()),
    Column("cursor_message_id", Uuid),
    Column("folded_count", Integer),
    Column("version", Integer),
    Column("created_at", UTCDateTime()),
    Column("updated_at", UTCDateTime()),
)
TOOL_OUTPUT = {"name": "component_as_tool", "display_name": "Toolset", "method": "to_toolkit", "types": ["Tool"]}
BATCH = DEFAULT_POLICY.batch_size


def turns_to_fold(n_messages: int, batches: int = 1) -> int:
    """The fewest turns of a new session at ``n_messages`` after which ``batches`` batches are folded.

    After each answer every full batch older than the newest ``n_messages`` messages is folded: after ``t`` turns
    (two messages each) that is ``2 t - n_messages`` messages. At the default, at N=2: 11 turns for one batch.
    """
    return math.ceil((batches * BATCH + n_messages) / 2)


FOLDED_SESSION_TURNS = turns_to_fold(2) + 1  # at N=2, one turn past the first fold: 12 at the default
FOLDED_MESSAGES = BATCH  # the first batch: messages 1-20 at the default
# A session seeded with a batch more turns: the next turn at N=2 folds one batch after its answer (22 at the default).
BACKLOG_SESSION_TURNS = FOLDED_SESSION_TURNS + BATCH // 2
SETTLE_TIMEOUT_S = 120  # longer than any fold a test makes (three batches of the 30 s fold timeout)


class LangflowClient:
    """A logged-in client of a running Langflow: ``client`` is its ``TestClient``, or an ``httpx.Client`` on a
    served Langflow with ``on_app_loop`` (:meth:`ServedLangflow.call`) to run code on the app's event loop."""

    def __init__(self, client, *, url: str, backend: str, log_file: str, on_app_loop: Callable | None = None):
        self.http = client
        self._on_app_loop = on_app_loop or client.portal.call
        self.url = url
        self.log_file = Path(log_file)
        self.backend = backend
        self.engine = database_engine(url)
        self.rows_after_start: int | None = None  # state rows right after the app started (SharedApps)
        token = client.get("/api/v1/auto_login").json()["access_token"]
        client.headers["Authorization"] = f"Bearer {token}"
        self.user_id = uuid.UUID(client.get("/api/v1/users/whoami").raise_for_status().json()["id"])
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
        self,
        *,
        session_memory: bool,
        n_messages: int,
        project_id: str | None = None,
        model: list[dict] = MODEL,
        tools: tuple[str, ...] = (),
        starter_tools: tuple[str, ...] = (),
        langflow_tools: dict[str, dict] | None = None,
    ) -> tuple[str, str]:
        """Chat Input -> (Session Memory) Agent -> Chat Output; returns (flow id, agent node id).

        ``model`` is the Agent's model selection (the bundled server answers OpenAI's and Anthropic's APIs).
        ``tools``: the code of custom components connected to the Agent's Tools in tool mode, as a builder
        connects one (the editor's Tool Mode switch). ``starter_tools``: the types of the starter's own tool nodes
        to keep as the starter wires them (``URLComponent``). ``langflow_tools``: Langflow's own components from
        the catalogue, by name, connected in tool mode with the given input values."""
        flow = json.loads(STARTER_FLOW.read_text())
        graph = flow["data"]
        kept_types = {"ChatInput", "ChatOutput", "Agent", *starter_tools}
        keep = {n["id"] for n in graph["nodes"] if n["data"]["type"] in kept_types}
        tool_edge = next(e for e in graph["edges"] if e["data"]["targetHandle"]["fieldName"] == "tools")
        graph["nodes"] = [n for n in graph["nodes"] if n["id"] in keep]
        graph["edges"] = [e for e in graph["edges"] if e["source"] in keep and e["target"] in keep]
        agent = next(n for n in graph["nodes"] if n["data"]["type"] == "Agent")
        for index, code in enumerate(tools):
            node, edge = self._tool_node(self._custom_component(code), index, agent["id"], tool_edge)
            graph["nodes"].append(node)
            graph["edges"].append(edge)
        for index, (name, values) in enumerate((langflow_tools or {}).items(), start=len(tools)):
            component = copy.deepcopy(self.catalogue_entry(name))
            for field, value in values.items():
                component["template"][field]["value"] = value
            node, edge = self._tool_node((name, component), index, agent["id"], tool_edge)
            graph["nodes"].append(node)
            graph["edges"].append(edge)
        if session_memory:
            agent["data"]["node"] = copy.deepcopy(self.catalogue_entry("SessionMemoryAgent"))
            agent["data"]["type"] = "SessionMemoryAgent"
        template = agent["data"]["node"]["template"]
        template["model"]["value"] = model
        template["n_messages"]["value"] = n_messages
        template["add_current_date_tool"]["value"] = False
        template["add_calculator_tool"]["value"] = False
        body = {"name": f"{'memory' if session_memory else 'stock'} agent", "data": graph}
        if project_id:
            body["folder_id"] = project_id
        created = self.http.post("/api/v1/flows/", json=body).raise_for_status().json()
        return created["id"], agent["id"]

    def _custom_component(self, code: str) -> tuple[str, dict]:
        """A custom component's type and template, as Langflow builds them from ``code``."""
        response = self.http.post("/api/v1/custom_component", json={"code": code})
        assert response.status_code == 200, response.text
        built = response.json()
        return built["type"], built["data"]

    def _tool_node(self, built: tuple[str, dict], index: int, agent_id: str, tool_edge: dict) -> tuple[dict, dict]:
        """A component's node in tool mode, and its edge to the Agent's Tools."""
        kind, component = built
        component["tool_mode"] = True
        component["outputs"] = [TOOL_OUTPUT]
        node_id = f"{kind}-tool{index}"
        edge = copy.deepcopy(tool_edge)
        source = {"dataType": kind, "id": node_id, "name": TOOL_OUTPUT["name"], "output_types": ["Tool"]}
        edge["data"]["sourceHandle"] = source
        edge["data"]["targetHandle"]["id"] = agent_id
        edge.update(
            id=f"tool-edge-{index}",
            source=node_id,
            target=agent_id,
            sourceHandle=json.dumps(source).replace('"', "œ"),
        )
        edge["targetHandle"] = json.dumps(edge["data"]["targetHandle"]).replace('"', "œ")
        node = {
            "id": node_id,
            "type": "genericNode",
            "position": {"x": 0, "y": 300 * (index + 1)},
            "data": {"id": node_id, "type": kind, "node": component},
        }
        return node, edge

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
        settle: bool = True,
    ):
        """``POST /api/v1/run`` with this client's API key; ``headers`` add to or replace it.

        ``settle``: then wait for the fold the turn started after its answer (see :meth:`settle_folds`).
        """
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
        if settle:
            self.settle_folds()
        return response

    def settle_folds(self) -> None:
        """Wait for the folds started after answers, as when a user reads an answer before writing again.

        Tests of what a turn leaves behind call this; tests of a turn during a fold do not.
        """
        self.on_app_loop(lambda: asyncio.wait_for(settle_folds(), SETTLE_TIMEOUT_S))

    def on_app_loop(self, make: Callable[[], Awaitable]):
        """Run ``make()`` where Langflow runs a flow's components (on the app's event loop, with its database)."""
        return self._on_app_loop(make)

    def wait_for_fold_claim(self, session_id: str, *, timeout: float = 20.0) -> None:
        """Wait until a fold of ``session_id`` holds its claim: the model is being asked for the summary."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sql(
                "SELECT 1 FROM session_memory_state WHERE session_id = :s AND fold_claimed_until IS NOT NULL",
                s=session_id,
            ):
                return
            time.sleep(0.05)
        raise AssertionError(f"no fold of {session_id} started within {timeout} s")

    def folded_session(self, session_id: str, *, project_id: str | None = None) -> tuple[str, str]:
        """A new flow whose ``session_id`` has a summary row: real turns at N=2 fold the first batch (12 turns,
        messages 1-20 folded, at the default).

        About 4 s a call; tests that need a folded start but not the fold itself use
        :meth:`seeded_folded_session`.
        """
        flow_id, agent_id = self.create_agent_flow(session_memory=True, n_messages=2, project_id=project_id)
        for i in range(FOLDED_SESSION_TURNS):
            self.run(
                flow_id,
                f"Turn {i}: note code CODE-{i}.",
                session_id=session_id,
                tweaks={agent_id: {"summarize_older_messages": True}},
            )
        assert self.state_rows(flow_id) == [(session_id, FOLDED_MESSAGES)]
        return flow_id, agent_id

    def seeded_folded_session(
        self,
        session_id: str,
        *,
        project_id: str | None = None,
        turns: int = FOLDED_SESSION_TURNS,
        tools: tuple[str, ...] = (),
        model: list[dict] = MODEL,
        **tool_nodes,
    ) -> tuple[str, str]:
        """What :meth:`folded_session` leaves, written with SQL: ``turns`` past turns, the first batch folded.
        ``tool_nodes``: Langflow's own tools, as :meth:`create_agent_flow` takes them.

        The messages are stored as Langflow stores a turn (the user's row, then the Agent's
        echo "OK: ..."), owned by the logged-in user, ten minutes ago and one second apart;
        the summary row is the one the fold would write (it names CODE-0 to CODE-9).
        """
        flow_id, agent_id = self.create_agent_flow(
            session_memory=True, n_messages=2, project_id=project_id, tools=tools, model=model, **tool_nodes
        )
        with self.engine.begin() as connection:
            cursor = seed_turns(connection, flow_id, self.user_id, session_id, turns=turns, agent_id=agent_id)
            insert_state_row(
                connection,
                flow_id=flow_id,
                owner_id=self.user_id,
                session_id=session_id,
                summary=SEEDED_SUMMARY,
                cursor=cursor,
                folded_count=FOLDED_MESSAGES,
            )
        assert self.state_rows(flow_id) == [(session_id, FOLDED_MESSAGES)]
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
        return LangflowLog(self.log_file).lines()

    def sql(self, statement: str, **params) -> list:
        with self.engine.connect() as connection:
            return connection.execute(text(statement), params).all()


SEEDED_SUMMARY = (
    "Key facts:\n"
    + "".join(f"- Turn {turn}: note code CODE-{turn}.\n" for turn in range(FOLDED_MESSAGES // 2))
    + "Conversation so far:\n- The user noted one code a turn, "
    + f"CODE-0 to CODE-{FOLDED_MESSAGES // 2 - 1}; the assistant acknowledged each."
)


def seed_turns(
    connection: Connection, flow_id, owner_id, session_id: str, *, turns: int, agent_id: str
) -> tuple[datetime, uuid.UUID]:
    """Store ``turns`` past turns as Langflow stores them; returns the (timestamp, id) of the batch's last message.

    Turn ``i`` is the user's "Turn i: note code CODE-i." and the Agent's echo of it (what the
    bundled model server answers), with the columns a real run fills (run id, source, usage).
    """
    assert 2 * turns >= FOLDED_MESSAGES, "a folded session holds at least the batch of folded messages"
    start = datetime.now(UTC) - timedelta(minutes=10)
    rows = []
    for turn in range(turns):
        run_id = uuid.uuid4()
        said = f"Turn {turn}: note code CODE-{turn}."
        agent = {"id": agent_id, "display_name": "Session Memory Agent", "source": MODEL[0]["name"]}
        usage = {"input_tokens": 750 + 25 * turn, "output_tokens": 8, "total_tokens": 758 + 25 * turn}
        for sender, sender_name, text_, properties in (
            ("User", "User", said, Properties().model_dump()),
            ("Machine", "AI", f"OK: {said}", {**Properties(source=agent, icon="Bot").model_dump(), "usage": usage}),
        ):
            rows.append(
                message_row(
                    flow_id=flow_id,
                    owner_id=owner_id,
                    session_id=session_id,
                    timestamp=start + timedelta(seconds=len(rows)),
                    sender=sender,
                    text_=text_,
                    sender_name=sender_name,
                    properties=properties,
                    run_id=run_id,
                    session_metadata={"graph_run_id": str(run_id)},
                )
            )
    connection.execute(insert(MESSAGE), rows)
    cursor = rows[FOLDED_MESSAGES - 1]
    return cursor["timestamp"], cursor["id"]


def message_row(*, flow_id, owner_id, session_id: str, timestamp: datetime, sender: str, text_: str, **columns) -> dict:
    """A ``message`` row with the columns Langflow always fills; ``columns`` add or replace others."""
    return {
        "id": uuid.uuid4(),
        "flow_id": uuid.UUID(str(flow_id)),
        "user_id": uuid.UUID(str(owner_id)),
        "session_id": session_id,
        "context_id": "",
        "timestamp": timestamp,
        "sender": sender,
        "sender_name": "User" if sender == "User" else "AI",
        "text": text_,
        "properties": {},
        "error": False,
        "edit": False,
        "is_output": False,
        "files": [],
        "category": "message",
        "content_blocks": [],
        **columns,
    }


def insert_state_row(
    connection: Connection,
    *,
    flow_id,
    owner_id,
    session_id: str,
    summary: str,
    cursor: tuple[datetime, uuid.UUID],
    folded_count: int = FOLDED_MESSAGES,
) -> None:
    """A ``session_memory_state`` row as a fold leaves it (version 1, no pause), its cursor on ``cursor``."""
    written = datetime.now(UTC) - timedelta(seconds=1)
    connection.execute(
        insert(STATE).values(
            flow_id=uuid.UUID(str(flow_id)),
            owner_id=uuid.UUID(str(owner_id)),
            session_id=session_id,
            context_id="",
            summary=summary,
            cursor_timestamp=cursor[0],
            cursor_message_id=cursor[1],
            folded_count=folded_count,
            version=1,
            created_at=written,
            updated_at=written,
        )
    )


def _name(entry: dict) -> str | None:
    code = entry.get("template", {}).get("code", {}).get("value", "")
    for line in code.splitlines():
        if line.strip().startswith("name = "):
            return line.split("=", 1)[1].strip().strip("\"'")
    return None


@contextmanager
def slow_folds(fake_model, seconds: float):
    """Every summary request takes ``seconds`` on the bundled server; chat requests stay fast."""
    config = fake_model.config
    saved = (config.timeout_s, config.fail_only_summaries)
    config.timeout_s, config.fail_only_summaries = seconds, True
    try:
        yield
    finally:
        config.timeout_s, config.fail_only_summaries = saved


class SharedApps:
    """One started Langflow app at a time in this process, kept for every test of its backend.

    Langflow's services are process-wide, so asking for the other backend stops the running
    app first. Each database is fresh and already carries our table, as after an earlier start.
    """

    def __init__(self, model_base_url: str, tmp_path_factory):
        self.model_base_url = model_base_url
        self.tmp_path_factory = tmp_path_factory
        self.log = LangflowLog(shared_log_file(tmp_path_factory))
        self._running: tuple[str, ExitStack, LangflowClient] | None = None

    def client(self, backend: str) -> LangflowClient:
        if self._running is not None and self._running[0] == backend:
            return self._running[2]
        self.stop()
        with ExitStack() as stack:
            home = self.tmp_path_factory.mktemp(f"langflow-{backend}")
            url = stack.enter_context(fresh_database(backend, home))
            asyncio.run(runner.upgrade(url))
            start = self.log.mark()
            http = stack.enter_context(
                running_langflow(url, home, log_file=self.log.path, model_base_url=self.model_base_url)
            )
            started = self.log.lines_since(start)
            if not any(MIGRATED_EVENT in line for line in started):
                pytest.fail(
                    f"{self.log.path} did not get the plugin's start-up line {MIGRATED_EVENT!r}: wrong log file?"
                )
            if failed := failure_lines(started):
                pytest.fail(f"Langflow logged session memory failures while starting:\n{shown(failed)}")
            client = LangflowClient(http, url=url, backend=backend, log_file=str(self.log.path))
            [(client.rows_after_start,)] = client.sql("SELECT count(*) FROM session_memory_state")
            self._running = (backend, stack.pop_all(), client)
        one_app_at_a_time(stop_shared_app=self.stop)
        return client

    def stop(self) -> None:
        if self._running is not None:
            _backend, stack, _client = self._running
            self._running = None
            stack.close()
