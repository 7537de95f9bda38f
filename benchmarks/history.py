"""(b) History-building time per turn against the stored session length, stock vs ours, on one database.

Stock is Langflow's own ``aget_agent_chat_history`` (what the Agent's ``get_memory_data``
awaits) on Langflow's database service. Ours is ``SessionMemoryService.build_history`` on
the same service's sessions, for a turn WITHOUT a fold: the state row's cursor leaves a
gap of fewer than 20 messages, so the turn reads the window, the gap and the state row in
one statement and sends the gap raw. The gap is 10 messages (a typical turn: it cycles
0..19 between folds); at the largest length it is also timed at 0 (just after a fold) and
19 (just before one), because ours converts every message it sends and the gap is what
it sends beyond stock. Sessions are seeded with bulk inserts
(``benchmarks.session_delete._seed``), each length in its own session of the same
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
SWEPT_GAPS = (0, GAP, 19)  # timed at the largest length only
SUMMARY = "Key facts:\n" + "\n".join(f"- fact {i}: the service runs on node-{i}." for i in range(30))


@dataclass(frozen=True)
class HistoryTiming:
    """Median and p95 (ms) of one backend at one stored length."""

    backend: str
    length: int
    gap: int
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
    """A session of ``length`` messages: (key, message ids in order)."""
    from langflow_session_memory.services.session_memory.rules.state import SessionKey

    key = SessionKey(uuid.uuid4(), uuid.uuid4(), f"history-{length}-{uuid.uuid4()}")
    return key, await _seed(sessions, key, length)


async def _leave_gap(sessions, key, ids: list, gap: int) -> None:
    """Move the summary's cursor so that ``gap`` unfolded messages sit between it and the window."""
    from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionState
    from langflow_session_memory.services.session_memory.storage import store

    last_folded = len(ids) - N_MESSAGES - gap - 1
    async with sessions.begin() as session:
        seen = await store.create_if_absent(session, key)
        folded = SessionState(
            key, SUMMARY, Cursor(START + timedelta(seconds=last_folded), ids[last_folded]), last_folded + 1
        )
        if not await store.compare_and_swap(session, seen, folded):
            raise RuntimeError("could not set the benchmark cursor")


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

    from langflow_session_memory.services.session_memory.rules.turn import Turn
    from langflow_session_memory.services.session_memory.service import SessionMemoryService

    engine = get_db_service().engine
    seeding = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
    seeded = {length: await _seed_session(seeding, length) for length in lengths}
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
    cases = [(length, GAP) for length in lengths] + [(max(lengths), gap) for gap in SWEPT_GAPS if gap != GAP]
    for length, gap in cases:
        key, ids = seeded[length]
        await _leave_gap(seeding, key, ids, gap)
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
                gap=gap,
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
