"""Cost of the cleanup listener: delete a 10,000-message session with and without it, in one run.

Uses Langflow's own statement for a session delete (``delete_messages_for_user_by_session``:
a bulk ``DELETE ... WHERE id IN (...)`` with ``synchronize_session="fetch"``) on real
SQLite and PostgreSQL databases. Rounds alternate with and without the listener so both
see the same machine state; the median of each is reported.
"""

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import delete, event, insert, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from benchmarks.databases import postgres_database
from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey, SessionState
from langflow_session_memory.services.session_memory.storage import cleanup, store

START = datetime(2026, 1, 1, tzinfo=UTC)


def message_row(key: SessionKey, message_id: uuid.UUID, i: int, text: str, **columns) -> dict:
    """Message number ``i`` of ``key``'s session, one second after the previous one, as Langflow stores it."""
    return {
        "id": message_id,
        "timestamp": START + timedelta(seconds=i),
        "sender": "User" if i % 2 == 0 else "Machine",
        "sender_name": "User" if i % 2 == 0 else "AI",
        "session_id": key.session_id,
        "context_id": key.context_id or None,
        "text": text,
        "flow_id": key.flow_id,
        "user_id": key.owner_id,
        "error": False,
        "edit": False,
        "is_output": False,
        "files": [],
        "properties": {},
        "category": "message",
        "content_blocks": [],
        **columns,
    }


async def _seed(sessions, key: SessionKey, count: int) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(count)]
    text = "lorem ipsum " * 10
    rows = [message_row(key, ids[i], i, f"message {i} {text}", sender_name="User") for i in range(count)]
    async with sessions.begin() as session:
        await session.execute(insert(MessageTable), rows)
        seen = await store.create_if_absent(session, key)
        cursor = Cursor(START + timedelta(seconds=count // 2), ids[count // 2])
        await store.compare_and_swap(session, seen, SessionState(key, "notes", cursor, count // 2))
    return ids


async def _delete_session(sessions, key: SessionKey) -> float:
    """Langflow's session delete: select the ids, then one bulk delete by ids."""
    started = time.perf_counter()
    async with sessions.begin() as session:
        ids = list(
            (await session.execute(select(MessageTable.id).where(MessageTable.session_id == key.session_id))).scalars()
        )
        await session.execute(
            delete(MessageTable).where(MessageTable.id.in_(ids)).execution_options(synchronize_session="fetch")
        )
    return time.perf_counter() - started


async def measure(url: str, messages: int, rounds: int) -> dict[str, float]:
    await runner.upgrade(url)
    engine = create_async_engine(runner.async_database_url(url))
    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: SQLModel.metadata.create_all(sync, tables=[MessageTable.__table__]))
    sessions = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
    timings: dict[str, list[float]] = {"without": [], "with": []}
    try:
        for _ in range(rounds):
            for mode in ("without", "with"):
                if mode == "with":
                    cleanup.install_cleanup_listeners()
                key = SessionKey(uuid.uuid4(), uuid.uuid4(), f"bench-{uuid.uuid4()}")
                await _seed(sessions, key, messages)
                timings[mode].append(await _delete_session(sessions, key))
                if mode == "with":
                    event.remove(Session, "do_orm_execute", cleanup._on_orm_execute)
                    event.remove(Session, "after_flush", cleanup._on_after_flush)
                    async with sessions() as session:
                        assert await store.load(session, key) is None, "the listener left the row behind"
    finally:
        await engine.dispose()
    without, with_ = statistics.median(timings["without"]), statistics.median(timings["with"])
    return {"without_ms": without * 1000, "with_ms": with_ * 1000, "ratio": with_ / without}


def run(messages: int = 10_000, rounds: int = 5) -> dict[str, dict[str, float]]:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        results["sqlite"] = asyncio.run(measure(f"sqlite:///{folder}/bench.db", messages, rounds))
    with postgres_database() as url:
        results["postgresql"] = asyncio.run(measure(url, messages, rounds))
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    for backend, result in run(arguments.messages, arguments.rounds).items():
        print(  # noqa: T201
            f"{backend}: without {result['without_ms']:.1f} ms, with {result['with_ms']:.1f} ms, "
            f"ratio {result['ratio']:.2f}"
        )
