"""(a) Input tokens per turn over a long session: stock Agent at N=100 vs the switch on at N=10.

By default through the full Langflow app (``/api/v1/run``, one app per process; a turn
costs about 0.25 s there, so two 1,000-turn sessions fit the budget side by side; token
counts do not depend on timing). ``path="graph"`` runs the same session as a Langflow
``Graph`` on initialised services instead (the smoke test does, to skip the app's 30 s
start-up). Tokens are what the bundled model server counted for each request
(``ceil(chars/4) + 4`` per message): the chat request(s) of the turn, and separately the
fold requests the switch adds, each with the tokens the server reported served from its
prompt cache (OpenAI's documented rules; the session starts with an empty cache). The
session starts with a fact, pastes a ~5,000-character log now and then, and ends with a
question about the fact.
"""

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

from benchmarks import conversation
from benchmarks.app import LangflowApp, langflow_app
from benchmarks.inprocess import (
    PROBLEM_EVENTS,
    AgentConfig,
    GraphAgent,
    Runtime,
    model_calls,
    run_with_langflow,
    state_row,
)
from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, RunningServer, run_in_thread

STOCK = AgentConfig(label="stock Agent, N=100", n_messages=100)
MEMORY = AgentConfig(label="switch on, N=10", n_messages=10, summarize=True)


@dataclass(frozen=True)
class TokenSeries:
    """Per-turn token counts of one configuration over one session."""

    label: str
    path: str
    chat_input_tokens: list[int]
    chat_cached_tokens: list[int]
    fold_input_tokens: list[int]
    fold_cached_tokens: list[int]
    fold_output_tokens: list[int]
    folds: list[int]
    last_answer: str
    max_summary_words: int
    seconds_per_turn: float
    problem_events: list[str]  # failed folds, pauses, fallbacks, resets (``PROBLEM_EVENTS``)


class Chat(Protocol):
    """One configuration's flow, whichever way Langflow runs it."""

    path: str

    async def turn(self, session_id: str, text: str) -> str: ...

    async def summary(self, session_id: str) -> str: ...

    async def events(self) -> list[dict[str, str]]: ...


class AppChat:
    """A flow on the running app, called through ``/api/v1/run`` (the app's client is synchronous: off the loop)."""

    path = "app"

    def __init__(self, app: LangflowApp, config: AgentConfig):
        self.app = app
        self.flow_id, agent_id = app.create_flow(config.model, session_memory=not config.stock)
        self.tweaks = {agent_id: {"n_messages": config.n_messages}}
        if not config.stock:
            self.tweaks[agent_id]["summarize_older_messages"] = config.summarize

    async def turn(self, session_id: str, text: str) -> str:
        await asyncio.to_thread(self.app.run, self.flow_id, text, session_id, self.tweaks)
        answer, _ = await asyncio.to_thread(self.app.last_answer, session_id)
        return answer

    async def summary(self, session_id: str) -> str:
        _, summary = await asyncio.to_thread(self.app.state, session_id)
        return summary

    async def events(self) -> list[dict[str, str]]:
        return await asyncio.to_thread(self.app.log.read_events)


class GraphChat:
    """The same flow as a ``Graph`` on Langflow's initialised services."""

    path = "graph"

    def __init__(self, runtime: Runtime, config: AgentConfig):
        self.runtime = runtime
        self.agent = GraphAgent(config)

    async def turn(self, session_id: str, text: str) -> str:
        return await self.agent.turn(session_id, text)

    async def summary(self, session_id: str) -> str:
        row = await state_row(session_id, self.agent.flow_id)
        return (row or {}).get("summary", "")

    async def events(self) -> list[dict[str, str]]:
        return await self.runtime.log.events()


def session_script(turns: int) -> list[str]:
    """``turns`` user messages: the fact, filler with a pasted log every 250 turns (from turn 20), the question."""
    filler_turns = max(turns - 2, 0)
    return conversation.script(filler_turns, log_at=tuple(range(20, filler_turns, 250)))


async def measure(chat: Chat, server: RunningServer, label: str, turns: int) -> TokenSeries:
    """Replay the session through ``chat``; ``server`` is the model server it talks to."""
    session_id = f"tokens-{uuid.uuid4()}"
    await chat.events()  # only this session's events count
    await asyncio.to_thread(server.clear_prompt_cache)  # nothing cached by an earlier session
    series: dict[str, list[int]] = {
        "chat": [],
        "chat_cached": [],
        "fold_in": [],
        "fold_cached": [],
        "fold_out": [],
        "folds": [],
    }
    answer, max_words, started = "", 0, time.perf_counter()
    for text in session_script(turns):
        before = len(server.requests())
        answer = await chat.turn(session_id, text)
        calls = model_calls(server.requests()[before:])
        series["chat"].append(calls.chat_input_tokens)
        series["chat_cached"].append(calls.chat_cached_tokens)
        series["fold_in"].append(calls.fold_input_tokens)
        series["fold_cached"].append(calls.fold_cached_tokens)
        series["fold_out"].append(calls.fold_output_tokens)
        series["folds"].append(calls.folds)
        if calls.folds:
            max_words = max(max_words, len((await chat.summary(session_id)).split()))
    seconds_per_turn = (time.perf_counter() - started) / max(len(series["chat"]), 1)
    problems = [e["event"] for e in await chat.events() if e["event"] in PROBLEM_EVENTS]
    return TokenSeries(
        label=label,
        path=chat.path,
        chat_input_tokens=series["chat"],
        chat_cached_tokens=series["chat_cached"],
        fold_input_tokens=series["fold_in"],
        fold_cached_tokens=series["fold_cached"],
        fold_output_tokens=series["fold_out"],
        folds=series["folds"],
        last_answer=answer,
        max_summary_words=max_words,
        seconds_per_turn=seconds_per_turn,
        problem_events=problems,
    )


async def measure_graph(runtime: Runtime, configs: tuple[AgentConfig, ...], turns: int) -> list[TokenSeries]:
    """The Graph path inside a process whose Langflow services are already up (see ``run_with_langflow``)."""
    return [await measure(GraphChat(runtime, config), runtime.server, config.label, turns) for config in configs]


def job(url: str, configs: tuple[AgentConfig, ...], turns: int, path: str = "app") -> list[TokenSeries]:
    """Entry point for a fresh process: Langflow on ``url``, the bundled model server answering at once."""
    if path == "graph":
        return run_with_langflow(url, lambda runtime: measure_graph(runtime, configs, turns), model=FakeModelConfig())
    with run_in_thread(FakeModelConfig()) as server, langflow_app(url, model_base_url=server.base_url) as app:
        chats = [(AppChat(app, config), config.label) for config in configs]
        return [asyncio.run(measure(chat, server, label, turns)) for chat, label in chats]
