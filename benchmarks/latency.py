"""(c) Turn latency with a model that takes 1 s to answer: stock Agent vs the switch on, same N.

Both sessions start empty and advance turn by turn, alternating, so both see the same
machine state. Routine folds run after the answer (``mode=background``), on the same loop,
while the next turns run: this shows whether any turn still waits for one. A fold inside a
turn (``mode=inline``) would make that turn about one model latency longer.
"""

import statistics
import time
import uuid
from dataclasses import dataclass

from benchmarks import conversation
from benchmarks.history import p95
from benchmarks.inprocess import FOLD_EVENT, AgentConfig, GraphAgent, Runtime, run_with_langflow
from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig
from langflow_session_memory.services.session_memory.folding.background import settle_folds

N_MESSAGES = 10


@dataclass(frozen=True)
class LatencySeries:
    """Per-turn wall time (ms) of one configuration, and which turns folded."""

    label: str
    turn_ms: list[float]
    folds: list[int]  # folds inside each turn
    model_requests: list[int]  # chat requests of each turn
    fold_latency_ms: list[int]
    background_folds: int = 0

    @property
    def p50(self) -> float:
        return statistics.median(self.turn_ms)

    @property
    def p95(self) -> float:
        return p95(self.turn_ms)

    def stalls(self, model_latency_ms: float) -> int:
        """Turns at least half a model call slower than the median that made a single model call."""
        threshold = self.p50 + model_latency_ms / 2
        return sum(1 for ms, n in zip(self.turn_ms, self.model_requests, strict=True) if ms > threshold and n == 1)


async def measure(runtime: Runtime, turns: int) -> list[LatencySeries]:
    """Stock and switch-on sessions of ``turns`` turns each, interleaved, after one warm-up turn each."""
    configs = (
        AgentConfig(label=f"stock Agent, N={N_MESSAGES}", n_messages=N_MESSAGES),
        AgentConfig(label=f"switch on, N={N_MESSAGES}", n_messages=N_MESSAGES, summarize=True),
    )
    server = runtime.server
    agents = [(GraphAgent(config), f"latency-{uuid.uuid4()}") for config in configs]
    for agent, _ in agents:  # the first turn of a process pays one-off imports and caches
        await agent.turn(f"warm-up-{uuid.uuid4()}", conversation.filler(0))
    await runtime.log.events()
    times: list[list[float]] = [[], []]
    folds: list[list[int]] = [[], []]
    requests: list[list[int]] = [[], []]
    fold_events: list[dict[str, str]] = []
    texts = [conversation.FACT, *[conversation.filler(i) for i in range(max(turns - 1, 0))]]
    for text in texts:
        for index, (agent, session_id) in enumerate(agents):
            before = len(server.requests())
            started = time.perf_counter()
            await agent.turn(session_id, text)
            times[index].append((time.perf_counter() - started) * 1000)
            # A background fold of the other session may answer during this turn: count chat requests only.
            requests[index].append(sum(1 for r in server.requests()[before:] if r["kind"] == "chat"))
            logged = await runtime.log.events(FOLD_EVENT)
            fold_events += logged
            folds[index].append(sum(1 for e in logged if e.get("mode") == "inline" and _of(e, session_id)))
    await settle_folds()
    fold_events += await runtime.log.events(FOLD_EVENT)
    return [
        LatencySeries(
            label=config.label,
            turn_ms=times[i],
            folds=folds[i],
            model_requests=requests[i],
            fold_latency_ms=[int(e["latency_ms"]) for e in fold_events if _of(e, session_id)],
            background_folds=sum(1 for e in fold_events if e.get("mode") == "background" and _of(e, session_id)),
        )
        for i, (config, (_agent, session_id)) in enumerate(zip(configs, agents, strict=True))
    ]


def _of(event: dict[str, str], session_id: str) -> bool:
    return event.get("session_id") == repr(session_id)


def job(url: str, turns: int, model_latency_s: float) -> list[LatencySeries]:
    """Entry point for a fresh process: Langflow on ``url``, a model server answering after ``model_latency_s``."""
    return run_with_langflow(
        url, lambda runtime: measure(runtime, turns), model=FakeModelConfig(latency_s=model_latency_s)
    )
