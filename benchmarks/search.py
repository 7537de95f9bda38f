"""Time of one ``search_earlier_messages`` call on a 100,000-message session, SQLite and PostgreSQL.

What is timed is the tool's work after the model called it (``Retrieval.earlier``):
the window's start (one keyset statement with OFFSET N-1), the candidates (messages
before it holding any keyword, newest first, LIMIT 200, the first 20,000 characters of
each) and the ranking. The session is bulk-inserted as Langflow stores it; a few facts sit
at known depths. Queries cover the cheap case (common words: 200 candidates are found at
once) and the expensive ones (a rare word at the session's start, a word that is nowhere:
the range scan reads every older message of the session). Run
``.venv/bin/python -m benchmarks.search`` (``--help`` for the knobs); results go to stdout
and, with ``--write``, into the search section of ``docs/benchmarks.md``.
"""

import argparse
import asyncio
import random
import re
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from benchmarks.databases import postgres_database
from benchmarks.history import p95
from benchmarks.session_delete import message_row
from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.rules.recall import keywords
from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import messages as message_queries

N_MESSAGES = 10
INSERT_CHUNK = 5_000
VOCABULARY = (
    "deploy",
    "cluster",
    "invoice",
    "budget",
    "review",
    "ticket",
    "backlog",
    "release",
    "meeting",
    "customer",
    "report",
    "schedule",
    "incident",
    "vendor",
    "roadmap",
    "design",
)
# Facts planted at a depth given as a fraction of the session (0 = its first message).
FACTS = {0.001: "The vault code is ZEBRA-42, keep it safe.", 0.5: "Team 10 keeps its locker code as VAULT-10."}
QUERIES = {
    "common words (200 candidates at once)": "deploy cluster review",
    "common words and a rare one at the start": "deploy cluster review meeting vault ZEBRA-42",
    "rare word, middle of the session": "locker code team 10",
    "rare word, start of the session": "vault code ZEBRA-42",
    "word found nowhere (whole range read)": "quokka",
}
WORST_QUERY = "rare word, start of the session"
# The same candidate statement on PostgreSQL with other keyword filters, to compare what the tool uses.
POSTGRES_FILTERS = {
    "one `~*` regex": "text ~* :pattern",
    "one `ILIKE` per word": "({ilike})",
    "`to_tsvector('simple', text) @@ to_tsquery(...)` (no index)": (
        "to_tsvector('simple', text) @@ to_tsquery('simple', :tsquery)"
    ),
}
SECTION_MARKER = "<!-- benchmarks.search -->"
BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class FilterTiming:
    keyword_filter: str
    median_ms: float


@dataclass(frozen=True)
class SearchTiming:
    backend: str
    messages: int
    query: str
    matches: int
    median_ms: float
    p95_ms: float
    path: str = "tool"
    planted_found: bool = False


def filler(rng: random.Random, i: int) -> str:
    words = " ".join(rng.choice(VOCABULARY) for _ in range(12))
    return f"Message {i}: about the {words}, lorem ipsum dolor sit amet."


async def seed(sessions, key: SessionKey, count: int) -> uuid.UUID:
    """``count`` messages of one session (plus one message of another session per 10); returns the input's id."""
    rng = random.Random(7)
    planted = {int(depth * count): fact for depth, fact in FACTS.items()}
    other = SessionKey(key.flow_id, key.owner_id, "another session")
    last_id = None
    for first in range(0, count, INSERT_CHUNK):
        rows = []
        for i in range(first, min(first + INSERT_CHUNK, count)):
            last_id = uuid.uuid4()
            rows.append(message_row(key, last_id, i, planted.get(i) or filler(rng, i)))
            if i % 10 == 0:
                rows.append(message_row(other, uuid.uuid4(), i, filler(rng, i)))
        async with sessions.begin() as session:
            await session.execute(insert(MessageTable), rows)
    return last_id


async def tool_matches(service: SessionMemoryService, turn: Turn, query: str) -> list:
    matches, _words = await service.retrieval.earlier(turn, query)
    return matches


async def postgres_filters(engine, key: SessionKey, words: tuple[str, ...], rounds: int) -> list[FilterTiming]:
    """The candidate statement of the worst query with each filter of :data:`POSTGRES_FILTERS`, timed alike."""
    parameters = {
        "session_id": key.session_id,
        "flow_id": key.flow_id,
        "owner_id": key.owner_id,
        "pattern": "|".join(re.escape(word) for word in words),
        "tsquery": " | ".join(words),
        **{f"word{i}": f"%{word}%" for i, word in enumerate(words)},
    }
    ilike = " OR ".join(f"text ILIKE :word{i}" for i in range(len(words)))
    timings = []
    async with engine.connect() as connection:
        for name, keyword_filter in POSTGRES_FILTERS.items():
            statement = text(
                "SELECT id FROM message WHERE session_id = :session_id AND flow_id = :flow_id "
                f"AND user_id = :owner_id AND NOT error AND {keyword_filter.format(ilike=ilike)} "
                "ORDER BY timestamp DESC, id DESC LIMIT 200"
            )
            elapsed = []
            for _ in range(rounds):
                started = time.perf_counter()
                await connection.execute(statement, parameters)
                elapsed.append((time.perf_counter() - started) * 1000)
            timings.append(FilterTiming(name, statistics.median(elapsed)))
    return timings


async def measure(backend: str, url: str, messages: int, rounds: int) -> tuple[list[SearchTiming], list[FilterTiming]]:
    await runner.upgrade(url)
    engine = create_async_engine(runner.async_database_url(url))
    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: SQLModel.metadata.create_all(sync, tables=[MessageTable.__table__]))
    sessions = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
    try:
        key = SessionKey(flow_id=uuid.uuid4(), owner_id=uuid.uuid4(), session_id="long session")
        started = time.perf_counter()
        input_id = await seed(sessions, key, messages)
        async with engine.begin() as connection:
            await connection.execute(text("ANALYZE"))
        print(f"{backend}: seeded {messages:,} messages in {time.perf_counter() - started:.0f} s")  # noqa: T201
        timings = []
        async with sessions() as session:
            window = await message_queries.newest(session, key, N_MESSAGES)
        service = SessionMemoryService(sessions)
        for name, query in QUERIES.items():
            # As a turn's message, asked: a statement quotes nothing (``recall.asks``).
            turn = Turn(key=key, n_messages=N_MESSAGES, input_message_id=input_id, input_text=f"What about {query}?")
            calls = {
                "tool": lambda turn=turn, query=query: tool_matches(service, turn, query),
                "excerpts": lambda turn=turn: service.retrieval.excerpts(turn, "", window),
            }
            for path, call in calls.items():
                found = await call()  # warm-up
                elapsed = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    await call()
                    elapsed.append((time.perf_counter() - started) * 1000)
                planted = any(
                    fact in hit.excerpt if path == "tool" else fact in hit.text
                    for hit in found
                    for fact in FACTS.values()
                )
                timings.append(
                    SearchTiming(
                        backend, messages, name, len(found), statistics.median(elapsed), p95(elapsed), path, planted
                    )
                )
                print(f"  {path}, {name}: median {timings[-1].median_ms:.1f} ms, p95 {timings[-1].p95_ms:.1f} ms")  # noqa: T201
        filters = []
        if backend == "postgresql":
            filters = await postgres_filters(engine, key, keywords(QUERIES[WORST_QUERY]), max(rounds // 4, 1))
        return timings, filters
    finally:
        await engine.dispose()


def section(timings: list[SearchTiming], filters: list[FilterTiming], rounds: int) -> str:
    lines = [
        SECTION_MARKER,
        "## Search of older messages (`search_earlier_messages`)",
        "",
        f"`python -m benchmarks.search` (not part of `make bench`; `--write` renews this section), "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC: one call of the tool's search (window start, candidates "
        f"LIMIT 200, ranking) on sessions of {', '.join(sorted({f'{t.messages:,}' for t in timings}))} messages, "
        f"N={N_MESSAGES}, median and p95 of "
        f"{rounds} calls after one warm-up; PostgreSQL analysed after seeding. A rare word or one that is nowhere "
        "makes the database read the session's older messages in full (the keyword filter cannot use an index; "
        "the range scan is bounded by the session, and the result by LIMIT).",
        "",
        "The same queries as a turn's message, for the excerpts a turn quotes without a tool call "
        "(`Retrieval.excerpts`: one bounded scan per word, LIMIT 50 each, the words weighed by how "
        "rare they are); *planted fact* says whether the fact the query names was among what the model gets.",
        "",
        "| backend | messages | path | query | matches shown | planted fact | median ms | p95 ms |",
        "| --- | ---: | --- | --- | ---: | --- | ---: | ---: |",
    ]
    lines += [
        f"| {t.backend} | {t.messages:,} | {t.path} | {t.query} | {t.matches} | {'yes' if t.planted_found else 'no'} | "
        f"{t.median_ms:.1f} | {t.p95_ms:.1f} |"
        for t in timings
    ]
    if filters:
        lines += [
            "",
            f'The candidate statement alone on PostgreSQL for "{WORST_QUERY}" (`{QUERIES[WORST_QUERY]}`) with '
            "other keyword filters; the tool runs the first:",
            "",
            "| keyword filter | median ms |",
            "| --- | ---: |",
            *(f"| {f.keyword_filter} | {f.median_ms:.1f} |" for f in filters),
        ]
    return "\n".join(lines) + "\n"


def saved_section(markdown: Path) -> str:
    """The search section of an existing ``docs/benchmarks.md`` (from its marker to the end), or ""."""
    current = markdown.read_text(encoding="utf-8") if markdown.exists() else ""
    _before, marker, section_text = current.partition(SECTION_MARKER)
    return marker + section_text


def write_section(markdown: Path, text_: str) -> None:
    """Replace the search section (from its marker to the end) of ``docs/benchmarks.md``, or append it."""
    current = markdown.read_text(encoding="utf-8")
    kept = current.split(SECTION_MARKER)[0].rstrip("\n")
    markdown.write_text(f"{kept}\n\n{text_}", encoding="utf-8")


async def main(sizes: list[int], rounds: int, backends: list[str]) -> str:
    timings, filters = [], []
    for size in sizes:
        for backend in backends:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as directory:
                    measured = await measure(backend, f"sqlite:///{directory}/search.db", size, rounds)
            else:
                with postgres_database() as url:
                    measured = await measure(backend, url, size, rounds)
            timings += measured[0]
            filters += measured[1] if size == max(sizes) else []
    return section(timings, filters, rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--messages", type=int, action="append", help="messages in the searched session (default: 10,000 and 100,000)"
    )
    parser.add_argument("--rounds", type=int, default=20, help="timed calls per query")
    parser.add_argument("--backend", action="append", choices=["sqlite", "postgresql"], help="default: both")
    parser.add_argument("--write", action="store_true", help="renew the search section of docs/benchmarks.md")
    arguments = parser.parse_args()
    sizes = arguments.messages or [10_000, 100_000]
    report = asyncio.run(main(sizes, arguments.rounds, arguments.backend or ["sqlite", "postgresql"]))
    print(report)  # noqa: T201
    if arguments.write:
        write_section(BENCHMARKS_MD, report)
