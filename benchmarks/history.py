"""(b) History-building time per turn against the stored session length, stock vs ours, on one database.

Stock is Langflow's own ``aget_agent_chat_history`` (what the Agent's ``get_memory_data``
awaits) on Langflow's database service. Ours is ``SessionMemoryService.build_history`` on
the same service's sessions, for a turn WITHOUT a fold: the state row's cursor leaves a
gap of fewer than 20 messages, so the turn reads the window, the state row, the
folded-range count and the gap, and sends the gap raw. Sessions are seeded with bulk
inserts (``benchmarks.session_delete._seed``), each length in its own session of the same
database. Calls alternate stock/ours so both see the same machine state.
"""

import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from benchmarks.inprocess import run_with_langflow
from benchmarks.session_delete import START, _seed

N_MESSAGES = 10
GAP = 10  # unfolded messages between the cursor and the window: fewer than a batch, so no fold
SUMMARY = "Key facts:\n" + "\n".join(f"- fact {i}: the service runs on node-{i}." for i in range(30))


@dataclass(frozen=True)
class HistoryTiming:
    """Median and p95 (ms) of one backend at one stored length."""

    backend: str
    length: int
    stock_median_ms: float
    stock_p95_ms: float
    ours_median_ms: float
    ours_p95_ms: float
    messages_sent: int

    @property
    def ratio(self) -> float:
        return self.ours_median_ms / self.stock_median_ms


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _no_fold():
    raise AssertionError("a turn without a fold must not build the model")


async def _seed_session(sessions, length: int):
    """A session of ``length`` messages whose summary covers all but the window and ``GAP`` messages."""
    from langflow_session_memory.services.session_memory import store
    from langflow_session_memory.services.session_memory.model import Cursor, SessionKey, SessionState

    key = SessionKey(uuid.uuid4(), uuid.uuid4(), f"history-{length}-{uuid.uuid4()}")
    ids = await _seed(sessions, key, length)
    last_folded = length - N_MESSAGES - GAP - 1
    async with sessions.begin() as session:
        seen = await store.load(session, key)
        folded = SessionState(
            key, SUMMARY, Cursor(START + timedelta(seconds=last_folded), ids[last_folded]), last_folded + 1
        )
        if not await store.compare_and_swap(session, seen, folded):
            raise RuntimeError("could not set the benchmark cursor")
    return key


async def _analyze(engine) -> None:
    """PostgreSQL plans with statistics; autovacuum would gather them shortly after a real bulk load."""
    from sqlalchemy import text

    if engine.dialect.name == "postgresql":
        async with engine.connect() as connection:
            await connection.execute(text("ANALYZE message"))
            await connection.execute(text("ANALYZE session_memory_state"))
            await connection.commit()


async def measure(backend: str, lengths: tuple[int, ...], repeats: int, warmup: int = 5) -> list[HistoryTiming]:
    """One ``HistoryTiming`` per length, on the database Langflow's services run on."""
    from lfx.components.models_and_agents.memory import aget_agent_chat_history
    from lfx.services.deps import get_db_service, session_scope
    from sqlalchemy.ext.asyncio import async_sessionmaker
    from sqlmodel.ext.asyncio.session import AsyncSession

    from langflow_session_memory.services.session_memory.service import SessionMemoryService, Turn

    engine = get_db_service().engine
    seeding = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
    keys = {length: await _seed_session(seeding, length) for length in lengths}
    await _analyze(engine)
    service = SessionMemoryService(sessions=session_scope)

    async def stock(key) -> int:
        history = await aget_agent_chat_history(
            session_id=key.session_id, flow_id=key.flow_id, n_messages=N_MESSAGES, user_id=key.owner_id
        )
        return len(history)

    async def ours(key) -> int:
        history = await service.build_history(Turn(key=key, n_messages=N_MESSAGES, input_message_id=None), _no_fold)
        if history.folded:
            raise RuntimeError("the benchmark turn folded; it must measure a turn without a fold")
        return len(history.messages)

    results = []
    for length, key in keys.items():
        timings: dict[str, list[float]] = {"stock": [], "ours": []}
        sent: dict[str, int] = {}
        for round_ in range(warmup + repeats):
            order = (("stock", stock), ("ours", ours)) if round_ % 2 else (("ours", ours), ("stock", stock))
            for name, build in order:
                started = time.perf_counter()
                sent[name] = await build(key)
                if round_ >= warmup:
                    timings[name].append((time.perf_counter() - started) * 1000)
        results.append(
            HistoryTiming(
                backend=backend,
                length=length,
                stock_median_ms=statistics.median(timings["stock"]),
                stock_p95_ms=p95(timings["stock"]),
                ours_median_ms=statistics.median(timings["ours"]),
                ours_p95_ms=p95(timings["ours"]),
                messages_sent=sent["ours"],
            )
        )
    return results


def job(url: str, backend: str, lengths: tuple[int, ...], repeats: int) -> list[HistoryTiming]:
    """Entry point for a fresh process: Langflow's services on ``url``; no model is ever called."""
    return run_with_langflow(url, lambda _runtime: measure(backend, lengths, repeats))
