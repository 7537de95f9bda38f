"""Real Langflow in one process without HTTP: Langflow's services on one database, flows run as Graphs.

The full app (``TestClient(create_app())`` and ``/api/v1/run``, see ``app.py``) takes
about 30 s to start on 2 cores and adds its HTTP layer to every turn; running the same
flow as a ``Graph`` on Langflow's initialised services starts in about 10 s and times the
turn itself. Both paths run Langflow's own ChatInput, Agent and ChatOutput components and
store every message in Langflow's ``message`` table (langflow-integration.md, section 10).

Langflow's services are process-wide, so each benchmark job runs in a fresh process
(``run.py``) and calls :func:`run_with_langflow` once.
"""

import asyncio
import json
import os
import re
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, RunningServer, run_in_thread
from langflow_session_memory.bundled_server.langflow_env import langflow_environment
from langflow_session_memory.services.session_memory import log_events

MODEL = "gpt-4o-mini"
FOLD_EVENT = log_events.FOLD.name
LOST_RACE_EVENT = log_events.LOST_RACE.name
FOLD_ELSEWHERE_EVENT = log_events.FOLD_ELSEWHERE.name
# Our events that say the memory path did not do its job (a turn's own figures, session_memory_turn, are not).
PROBLEM_EVENTS = log_events.PROBLEMS
_FIELD = re.compile(r"(\w+)=(\S+)")
T = TypeVar("T")


@dataclass
class Runtime:
    """What a measurement gets inside a process whose Langflow services are up."""

    log: "LogTail"
    server: RunningServer | None = None


def run_with_langflow(
    url: str, work: Callable[[Runtime], Awaitable[T]], *, model: FakeModelConfig | None = None, migrate: bool = True
) -> T:
    """Start the model server (if ``model``), Langflow's services on ``url`` and our migrations, run ``work``.

    Call once per process: Langflow reads its settings once. Everything that blocks
    (temp folder, model server start, logger set-up) happens here, outside the event loop.
    """
    from lfx.log.logger import configure

    with ExitStack() as stack:
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-bench-", ignore_cleanup_errors=True)))
        server = stack.enter_context(run_in_thread(model)) if model is not None else None
        os.environ.update(
            langflow_environment(
                url, home, model_base_url=server.base_url if server else None, plays_hosted=server is not None
            )
        )
        configure(log_level="INFO", log_file=home / "langflow.log")
        runtime = Runtime(log=LogTail(home / "langflow.log"), server=server)
        return asyncio.run(_serve(url, runtime, work, migrate=migrate))


async def _serve(url: str, runtime: Runtime, work: Callable[[Runtime], Awaitable[T]], *, migrate: bool) -> T:
    """Langflow's services, and folds after answers on this loop, as the plugin's lifespan runs them in a server."""
    from langflow.services.utils import initialize_services, teardown_services

    from langflow_session_memory.migrations import runner
    from langflow_session_memory.services.session_memory.runtime import get_session_memory_service

    await initialize_services()
    if migrate:
        await runner.upgrade(url)
    background = get_session_memory_service().background
    background.open()
    try:
        return await work(runtime)
    finally:
        await background.close()
        await teardown_services()


@dataclass(frozen=True)
class AgentConfig:
    """One configuration of the Agent under test; ``summarize is None`` is Langflow's stock Agent."""

    label: str
    n_messages: int
    summarize: bool | None = None
    model: str = MODEL

    @property
    def stock(self) -> bool:
        return self.summarize is None


@dataclass
class GraphAgent:
    """Chat Input -> Agent -> Chat Output, run as a Langflow ``Graph`` once per turn, like one flow."""

    config: AgentConfig
    flow_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    user_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    summary_model: Callable[[], object] | None = None  # makes the component connected to "Summary Model"

    def _graph(self):
        from lfx.components.input_output import ChatInput, ChatOutput
        from lfx.components.models_and_agents.agent import AgentComponent
        from lfx.graph import Graph

        from langflow_session_memory.components.session_memory.session_memory_agent import (
            SessionMemoryAgentComponent,
        )

        chat_input = ChatInput()
        options = {"summarize_older_messages": self.config.summarize} if not self.config.stock else {}
        if self.summary_model is not None:
            options["summary_model"] = self.summary_model().build_model
        agent = AgentComponent() if self.config.stock else SessionMemoryAgentComponent()
        agent.set(
            model=[{"name": self.config.model, "provider": "OpenAI", "metadata": {}}],
            input_value=chat_input.message_response,
            n_messages=self.config.n_messages,
            add_current_date_tool=False,
            add_calculator_tool=False,
            **options,
        )
        chat_output = ChatOutput()
        chat_output.set(input_value=agent.message_response)
        return Graph(chat_input, chat_output, flow_id=self.flow_id, user_id=self.user_id)

    async def turn(self, session_id: str, text: str) -> str:
        """Run one user message through the flow; returns the Agent's answer as Chat Output shows it."""
        outputs = await self._graph().arun(inputs=[{"input_value": text}], session_id=session_id)
        for run in outputs:
            for output in run.outputs:
                message = (output.results or {}).get("message")
                if message is not None:
                    return message.text
        raise RuntimeError(f"the flow produced no chat output for {text[:40]!r}")


@dataclass(frozen=True)
class ModelCalls:
    """What the bundled model server saw during one turn."""

    chat_input_tokens: int
    chat_cached_tokens: int
    fold_input_tokens: int
    fold_cached_tokens: int
    fold_output_tokens: int
    folds: int


def model_calls(records: list[dict]) -> ModelCalls:
    """Sum a turn's request records (``RunningServer.requests()`` slice) by kind; cached tokens are those the
    server reported from its prompt cache."""
    chat = [r for r in records if r["kind"] == "chat" and r["status"] == 200]
    folds = [r for r in records if r["kind"] == "summary" and r["status"] == 200]
    return ModelCalls(
        chat_input_tokens=sum(r["prompt_tokens"] for r in chat),
        chat_cached_tokens=sum(r["cached_tokens"] for r in chat),
        fold_input_tokens=sum(r["prompt_tokens"] for r in folds),
        fold_cached_tokens=sum(r["cached_tokens"] for r in folds),
        fold_output_tokens=sum(r["completion_tokens"] for r in folds),
        folds=len(folds),
    )


class LogTail:
    """Langflow's JSON log file read incrementally, so a caller sees the events of one stretch of work.

    Langflow rotates the file at 10 MB (``langflow.log`` -> ``langflow.log.1``); the unread
    end of the rotated file is read first.
    """

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.inode: int | None = None

    async def events(self, name: str | None = None) -> list[dict[str, str]]:
        """Our named events (``name`` or all ``session_*``) logged since the previous read, fields parsed."""
        return await asyncio.to_thread(self.read_events, name)

    def read_events(self, name: str | None = None) -> list[dict[str, str]]:
        """The same, for synchronous callers."""
        found = []
        for line in self._read_new().splitlines():
            try:
                message = str(json.loads(line).get("event", ""))
            except ValueError:
                continue
            event = message.split(" ", 1)[0]
            if (name is None and event.startswith("session_")) or event == name:
                found.append({"event": event, **dict(_FIELD.findall(message))})
        return found

    def _read_new(self) -> str:
        """Complete lines added since the last read; a line still being written waits for the next read."""
        if not self.path.exists():
            return ""
        rotated_tail = b""
        inode = self.path.stat().st_ino
        if self.inode is not None and inode != self.inode:
            rotated = self.path.with_name(self.path.name + ".1")
            if rotated.exists() and rotated.stat().st_ino == self.inode:
                rotated_tail = _read_from(rotated, self.offset)
            self.offset = 0
        self.inode = inode
        data = _read_from(self.path, self.offset)
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return (rotated_tail + complete).decode("utf-8", errors="replace")


def _read_from(path: Path, offset: int) -> bytes:
    with path.open("rb") as file:
        file.seek(offset)
        return file.read()


async def state_row(session_id: str, flow_id: str) -> dict | None:
    """Our ``session_memory_state`` row for a session, read through Langflow's own database session."""
    from lfx.services.deps import session_scope
    from sqlalchemy import text

    flow = uuid.UUID(flow_id)
    async with session_scope() as session:
        dialect = session.bind.dialect.name
        row = (
            await session.execute(
                text(
                    "SELECT summary, folded_count, version FROM session_memory_state "
                    "WHERE session_id = :session AND flow_id = :flow"
                ),
                {"session": session_id, "flow": flow.hex if dialect == "sqlite" else flow},
            )
        ).first()
    return dict(row._mapping) if row else None
