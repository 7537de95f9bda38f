"""Excerpt selection from the full-text index at scale: one 100,000-message session in a large message table.

The acceptance measure of the index (not a timed test): PostgreSQL with 5 million messages in Langflow's
table, SQLite with 1 million, one session of 100,000 of them, every session indexed. What is timed is what a
turn pays for its excerpts from the index (``Retrieval.excerpts`` when the index is ready): the
window's start, then ``passages_before`` (is_ready, one search per word, the chat's size, BM25, neighbours);
beside it today's words search by ``LIKE`` (``_matched``), the fallback, on the same data. Indexing is timed
apart, as it runs: ``index_older`` after answers, never on an answer's path.

The other sessions (500 to 2,000 messages, several flows and owners) are generated in SQL and indexed by one
``INSERT ... SELECT`` (the same ``scope_token``; their word counts approximated): only the big session goes
through the real indexing code. Run ``.venv/bin/python -m benchmarks.search_scale`` (``--help`` for the
knobs); results go to stdout and, with ``--write``, into the scale section of ``docs/benchmarks.md``.
"""

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from langflow.services.database.models.message.model import MessageTable
from sqlalchemy import event, func, insert, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.schema import CreateTable
from sqlmodel.ext.asyncio.session import AsyncSession

from benchmarks import search, sections
from benchmarks.databases import postgres_database
from benchmarks.history import p95
from benchmarks.session_delete import START, message_row
from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.rules import ranking
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage import messages, search_index

N_MESSAGES = 10
DEFAULT_TABLE = {"postgresql": 5_000_000, "sqlite": 1_000_000}
# The big session is inserted in this many slices between the other sessions': its rows spread over the table.
SLICES = 20
INSERT_CHUNK = 5_000
SESSIONS_PER_FLOW = 8
SMALLEST, LARGEST = 500, 2_000
FILLERS = 1_000
# Words only the other sessions use: common in the table, absent from the big session.
OTHER_VOCABULARY = ("warehouse", "shipment", "payroll", "pipeline")
# Name: (the turn's message, the planted text it should quote, or None).
QUERIES = {
    "common words": ("What did we say about the deploy cluster review?", None),
    "rare planted words, start of the session": ("What is the vault code?", "ZEBRA-42"),
    "common words and a rare one at the start": ("What about deploy cluster review meeting and the zebra?", "ZEBRA-42"),
    "filler words and rare ones": ("Answer in a few words from our conversation: what is the vault code?", "ZEBRA-42"),
    "word found nowhere": ("What about the quokka?", None),
    "words of other sessions only": ("What about the warehouse shipment?", None),
}
TARGET_P95_MS = {"postgresql": 50, "sqlite": 100}
SECTION_MARKER = "<!-- benchmarks.search_scale -->"
BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Timing:
    path: str
    query: str
    lines: int
    planted_found: bool | None
    p50_ms: float
    p95_ms: float


@dataclass(frozen=True)
class Plan:
    statement: str
    indexes: str
    ms: float


@dataclass(frozen=True)
class Measured:
    backend: str
    table_rows: int
    session: int
    rounds: int
    seed_s: float
    other_entries: int
    other_index_s: float
    real_indexed: int
    real_index_s: float
    answers: int
    timings: list[Timing]
    plans: list[Plan]

    @classmethod
    def from_json(cls, data: dict) -> "Measured":
        timings = [Timing(**timing) for timing in data.pop("timings")]
        plans = [Plan(**plan) for plan in data.pop("plans")]
        return cls(**data, timings=timings, plans=plans)


@dataclass(frozen=True)
class Chat:
    n: int
    flow_id: uuid.UUID
    owner_id: uuid.UUID
    session_id: str
    size: int


def other_chats(rng: random.Random, rows: int) -> list[Chat]:
    """Sessions of SMALLEST to LARGEST messages, SESSIONS_PER_FLOW a flow (one owner each), ``rows`` in all."""
    chats, flow_id, owner_id = [], None, None
    while rows > 0:
        if len(chats) % SESSIONS_PER_FLOW == 0:
            flow_id, owner_id = uuid.uuid4(), uuid.uuid4()
        size = min(rows, rng.randint(SMALLEST, LARGEST))
        chats.append(Chat(len(chats), flow_id, owner_id, f"session {len(chats)}", size))
        rows -= size
    return chats


def other_filler(rng: random.Random) -> str:
    words = " ".join(rng.choice(search.VOCABULARY + OTHER_VOCABULARY) for _ in range(12))
    return f"about the {words}, lorem ipsum dolor sit amet."


def _uuid(value: uuid.UUID, backend: str):
    """A UUID as raw SQL stores it: native on PostgreSQL, 32 hex digits on SQLite (as SQLAlchemy's ``Uuid``)."""
    return value if backend == "postgresql" else value.hex


# The other sessions' messages of one slice, as ``message_row`` writes them; one statement per backend.
OTHER_MESSAGES = {
    "postgresql": """
        INSERT INTO message (id, timestamp, sender, sender_name, session_id, text, error, edit, flow_id, user_id,
            is_output, files, properties, category, content_blocks)
        SELECT gen_random_uuid(), CAST(:start AS timestamptz) + make_interval(secs => g.i),
            CASE WHEN g.i % 2 = 0 THEN 'User' ELSE 'Machine' END, CASE WHEN g.i % 2 = 0 THEN 'User' ELSE 'AI' END,
            c.session_id, 'Message ' || g.i || ': ' || f.text, false, false, c.flow_id, c.owner_id,
            false, '[]', '{}', 'message', '[]'
        FROM bench_chat c CROSS JOIN LATERAL generate_series(0, c.size - 1) AS g(i)
        JOIN bench_filler f ON f.n = (g.i * 7 + c.n) % :fillers
        WHERE c.n % :slices = :slice""",
    "sqlite": """
        INSERT INTO message (id, timestamp, sender, sender_name, session_id, text, error, edit, flow_id, user_id,
            is_output, files, properties, category, content_blocks)
        WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < :largest)
        SELECT lower(hex(randomblob(16))), strftime('%Y-%m-%d %H:%M:%S', :start, '+' || g.i || ' seconds') || '.000000',
            CASE WHEN g.i % 2 = 0 THEN 'User' ELSE 'Machine' END, CASE WHEN g.i % 2 = 0 THEN 'User' ELSE 'AI' END,
            c.session_id, 'Message ' || g.i || ': ' || f.text, 0, 0, c.flow_id, c.owner_id,
            0, '[]', '{}', 'message', '[]'
        FROM bench_chat c JOIN g ON g.i < c.size JOIN bench_filler f ON f.n = (g.i * 7 + c.n) % :fillers
        WHERE c.n % :slices = :slice""",
}
# The other sessions' index entries: what ``index_batch`` writes, the word count approximated by the spaces.
OTHER_ENTRIES = """
    INSERT INTO session_memory_search_entry (message_id, flow_id, owner_id, session_id, context_id, timestamp, sender,
        sender_name, scope, body, words)
    SELECT m.id, m.flow_id, m.user_id, m.session_id, m.context_id, m.timestamp, m.sender, m.sender_name, c.scope,
        substr(m.text, 1, :body), length(m.text) - length(replace(m.text, ' ', '')) + 2
    FROM bench_chat c JOIN message m ON m.flow_id = c.flow_id AND m.session_id = c.session_id AND m.user_id = c.owner_id
    ORDER BY c.n, m.timestamp"""


async def seed(engine, backend: str, key: SessionKey, session_size: int, table_rows: int) -> None:
    """Langflow's message table (its indexes built after the load): the big session, with FACTS planted, in
    SLICES slices between the other sessions' messages, ``table_rows`` in all."""
    rng = random.Random(7)
    chats = other_chats(rng, table_rows - session_size)
    planted = {int(depth * session_size): fact for depth, fact in search.FACTS.items()}
    table = MessageTable.__table__
    uuid_type = "UUID" if backend == "postgresql" else "TEXT"  # SQLite's UUID would have numeric affinity
    async with engine.begin() as connection:
        await connection.execute(CreateTable(table))
        await connection.execute(text("CREATE TABLE bench_filler (n INTEGER PRIMARY KEY, text TEXT NOT NULL)"))
        await connection.execute(
            text("INSERT INTO bench_filler (n, text) VALUES (:n, :text)"),
            [{"n": n, "text": other_filler(rng)} for n in range(FILLERS)],
        )
        await connection.execute(
            text(
                f"CREATE TABLE bench_chat (n INTEGER PRIMARY KEY, flow_id {uuid_type} NOT NULL, "
                f"owner_id {uuid_type} NOT NULL, session_id TEXT NOT NULL, size INTEGER NOT NULL, scope TEXT NOT NULL)"
            )
        )
        await connection.execute(
            text(
                "INSERT INTO bench_chat (n, flow_id, owner_id, session_id, size, scope) "
                "VALUES (:n, :flow_id, :owner_id, :session_id, :size, :scope)"
            ),
            [
                {
                    "n": chat.n,
                    "flow_id": _uuid(chat.flow_id, backend),
                    "owner_id": _uuid(chat.owner_id, backend),
                    "session_id": chat.session_id,
                    "size": chat.size,
                    "scope": search_index.scope_token(chat.flow_id, chat.owner_id, chat.session_id),
                }
                for chat in chats
            ],
        )
    start = START.isoformat() if backend == "postgresql" else START.strftime("%Y-%m-%d %H:%M:%S")
    slice_size = -(-session_size // SLICES)
    for slice_ in range(SLICES):
        first = slice_ * slice_size
        for chunk in range(first, min(first + slice_size, session_size), INSERT_CHUNK):
            rows = [
                message_row(key, uuid.uuid4(), i, planted.get(i) or search.filler(rng, i))
                for i in range(chunk, min(chunk + INSERT_CHUNK, first + slice_size, session_size))
            ]
            async with engine.begin() as connection:
                await connection.execute(insert(MessageTable), rows)
        async with engine.begin() as connection:
            parameters = {"start": start, "fillers": FILLERS, "slices": SLICES, "slice": slice_, "largest": LARGEST}
            await connection.execute(text(OTHER_MESSAGES[backend]), parameters)
        print(f"  {backend}: slice {slice_ + 1}/{SLICES} inserted")  # noqa: T201
    async with engine.begin() as connection:
        if backend == "postgresql":
            await connection.execute(text("SET maintenance_work_mem = '1GB'"))
        for index in table.indexes:
            await connection.run_sync(index.create)


async def index_others(engine, backend: str) -> int:
    """Index every other session in one ``INSERT ... SELECT``; on PostgreSQL the GIN and chat indexes are dropped
    and rebuilt around it (as ``sm0007`` defines them), faster than row by row and the same in the end."""
    async with engine.begin() as connection:
        definitions = []
        if backend == "postgresql":
            definitions = (
                await connection.execute(
                    text(
                        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :table "
                        "AND indexdef NOT LIKE 'CREATE UNIQUE%'"
                    ),
                    {"table": search_index.ENTRY.name},
                )
            ).all()
            for name, _definition in definitions:
                await connection.execute(text(f'DROP INDEX "{name}"'))
        inserted = (await connection.execute(text(OTHER_ENTRIES), {"body": RETRIEVAL.indexed_characters})).rowcount
        if definitions:
            await connection.execute(text("SET maintenance_work_mem = '1GB'"))
        for _name, definition in definitions:
            await connection.execute(text(definition))
    return inserted


async def analyze(engine) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("ANALYZE"))


async def index_session(service: SessionMemoryService, turn: Turn) -> tuple[int, int]:
    """The big session through the real path: ``index_older`` after one answer after another until it is
    indexed; (messages indexed, answers)."""
    indexed, answers = 0, 0
    while batch := await service.retrieval.index_older(turn):
        indexed, answers = indexed + batch, answers + 1
    return indexed, answers


async def index_path(service: SessionMemoryService, turn: Turn, question: str) -> tuple:
    """What ``excerpts`` costs when the index is ready: the window's start, then ``passages_before``."""
    async with service.sessions() as session:
        before = await messages.window_start(session, turn.key, N_MESSAGES, input_message_id=turn.input_message_id)
    passages = await service.retrieval.passages_before(
        turn.key, question, before=before, tokens=RETRIEVAL.passage_tokens
    )
    if passages is None:
        raise RuntimeError("the index is not ready: the benchmark would time the fallback")
    return passages


async def timed(call, rounds: int) -> tuple[tuple, float, float]:
    found = await call()  # warm-up
    elapsed = []
    for _ in range(rounds):
        started = time.perf_counter()
        await call()
        elapsed.append((time.perf_counter() - started) * 1000)
    return found, statistics.median(elapsed), p95(elapsed)


def _indexes_used(plan: list[str]) -> str:
    names = re.findall(
        r"(?:Index Scan(?: Backward)? using|Bitmap Index Scan on|Index Only Scan using) (\w+)", "\n".join(plan)
    )
    return ", ".join(dict.fromkeys(names)) or "none (sequential scan)"


async def postgres_plans(engine, key: SessionKey, before: Cursor) -> list[Plan]:
    """EXPLAIN ANALYZE of each query word's search (``search_index._matching``) and of ``chat_size``'s count,
    printed in full; which indexes each used and its execution time are kept for the report."""
    statements = {
        f"per-word search of `{word}`": select(
            *search_index._matching(
                word, 0, key, before, RETRIEVAL.indexed_per_word, RETRIEVAL.read_characters, "postgresql"
            ).c
        )
        for word in dict.fromkeys(word for question, _ in QUERIES.values() for word in ranking.query_words(question))
    }
    newest = (
        select(search_index.ENTRY.c.words)
        .where(search_index._chat(key), search_index._before(before))
        .order_by(search_index.ENTRY.c.timestamp.desc(), search_index.ENTRY.c.message_id.desc())
        .limit(RETRIEVAL.indexed_counted)
        .subquery()
    )
    statements["`chat_size` (count of the newest 10,000)"] = select(func.count(), func.avg(newest.c.words))
    plans = []
    async with engine.connect() as connection:
        for name, statement in statements.items():
            sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
            lines = [row[0] for row in await connection.execute(text(f"EXPLAIN (ANALYZE, BUFFERS) {sql}"))]
            print(f"  EXPLAIN ANALYZE, {name}:\n    " + "\n    ".join(lines))  # noqa: T201
            execution = next(float(m.group(1)) for line in lines if (m := re.search(r"Execution Time: ([\d.]+)", line)))
            plans.append(Plan(name, _indexes_used(lines), execution))
    return plans


def _engine(backend: str, url: str):
    """An engine as Langflow's: pooled; PostgreSQL without prepared statements; SQLite in WAL, unsynced to load fast."""
    if backend == "postgresql":
        return create_async_engine(runner.async_database_url(url), connect_args={"prepare_threshold": None})
    engine = create_async_engine(runner.async_database_url(url))

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(connection, _record) -> None:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=OFF")

    return engine


async def measure(backend: str, url: str, session_size: int, table_rows: int, rounds: int) -> Measured:
    await runner.upgrade(url)
    engine = _engine(backend, url)
    sessions = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
    try:
        key = SessionKey(flow_id=uuid.uuid4(), owner_id=uuid.uuid4(), session_id="long session")
        started = time.perf_counter()
        await seed(engine, backend, key, session_size, table_rows)
        seed_s = time.perf_counter() - started
        print(f"{backend}: seeded {table_rows:,} messages ({session_size:,} in the big session) in {seed_s:.0f} s")  # noqa: T201
        started = time.perf_counter()
        other_entries = await index_others(engine, backend)
        other_index_s = time.perf_counter() - started
        print(f"{backend}: indexed {other_entries:,} messages of the other sessions by SQL in {other_index_s:.0f} s")  # noqa: T201
        await analyze(engine)
        async with sessions() as session:
            window = await messages.newest(session, key, N_MESSAGES)
        service = SessionMemoryService(sessions)
        turn = Turn(key=key, n_messages=N_MESSAGES, input_message_id=window[-1].id)
        started = time.perf_counter()
        real_indexed, answers = await index_session(service, turn)
        real_index_s = time.perf_counter() - started
        print(  # noqa: T201
            f"{backend}: index_older indexed {real_indexed:,} messages of the big session over {answers} answers "
            f"in {real_index_s:.1f} s ({real_indexed / real_index_s:,.0f} messages/s)"
        )
        await analyze(engine)
        timings = []
        for name, (question, planted) in QUERIES.items():
            asked = Turn(key=key, n_messages=N_MESSAGES, input_message_id=window[-1].id, input_text=question)
            calls = {
                "index": lambda asked=asked, question=question: index_path(service, asked, question),
                "words (LIKE)": lambda asked=asked: service.retrieval._matched(
                    asked, "", window, messages.cursor_of(window[0])
                ),
            }
            for path, call in calls.items():
                found, p50_ms, p95_ms = await timed(call, rounds)
                planted_found = None if planted is None else any(planted in excerpt.text for excerpt in found)
                timings.append(Timing(path, name, len(found), planted_found, p50_ms, p95_ms))
                print(f"  {path}, {name}: {len(found)} quoted, p50 {p50_ms:.1f} ms, p95 {p95_ms:.1f} ms")  # noqa: T201
        plans = []
        if backend == "postgresql":
            plans = await postgres_plans(engine, key, messages.cursor_of(window[0]))
        return Measured(
            backend,
            table_rows,
            session_size,
            rounds,
            seed_s,
            other_entries,
            other_index_s,
            real_indexed,
            real_index_s,
            answers,
            timings,
            plans,
        )
    finally:
        await engine.dispose()


def _planted(found: bool | None) -> str:
    return "—" if found is None else "yes" if found else "no"


def section(results: list[Measured]) -> str:
    lines = [
        SECTION_MARKER,
        "## Excerpts from the full-text index at scale",
        "",
        f"`python -m benchmarks.search_scale` (not part of `make bench`; `--write` renews this section), "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores. One session of many messages in a large "
        "message table, every session indexed; the excerpt selection of one turn (N="
        f"{N_MESSAGES}, passages within {RETRIEVAL.passage_tokens} tokens), p50 and p95 of "
        f"{' and '.join(f'{m.rounds} calls ({m.backend})' for m in results)} after one warm-up, the database "
        "analysed after indexing. *index*: what `Retrieval.excerpts` costs when "
        "the index is ready (the window's start, then `passages_before`: is_ready, one search per word, the "
        "chat's size, BM25, neighbours). *words (LIKE)*: today's search without the index (`_matched`, the "
        "fallback; words held in the window are not searched). *planted* says whether the fact the question "
        f"names was quoted. Targets: p95 <= {TARGET_P95_MS['postgresql']} ms on PostgreSQL, "
        f"<= {TARGET_P95_MS['sqlite']} ms on SQLite.",
        "",
        "| backend | table rows | session messages | path | query | lines quoted | planted found | p50 ms | p95 ms |",
        "| --- | ---: | ---: | --- | --- | ---: | --- | ---: | ---: |",
    ]
    lines += [
        f"| {m.backend} | {m.table_rows:,} | {m.session:,} | {t.path} | {t.query} | {t.lines} | "
        f"{_planted(t.planted_found)} | {t.p50_ms:.1f} | {t.p95_ms:.1f} |"
        for m in results
        for t in m.timings
    ]
    lines += ["", "Loading and indexing (index writes run after answers, off the answer's path):", ""]
    for m in results:
        worst = max(t.p95_ms for t in m.timings if t.path == "index")
        lines.append(
            f"- {m.backend}: {m.table_rows:,} messages seeded in {m.seed_s:.0f} s; the big session's "
            f"{m.real_indexed:,} through the real path (`index_older` after {m.answers} answers, batches of "
            f"{RETRIEVAL.index_batch}) in {m.real_index_s:.1f} s, "
            f"{m.real_indexed / m.real_index_s:,.0f} messages/s; the other sessions' {m.other_entries:,} by one "
            f"`INSERT ... SELECT` (not the real path) in {m.other_index_s:.0f} s. Worst index-path p95 "
            f"{worst:.1f} ms against {TARGET_P95_MS[m.backend]} ms."
        )
    for m in results:
        if m.plans:
            lines += [
                "",
                f"PostgreSQL plans ({m.table_rows:,} rows; EXPLAIN ANALYZE, one run after the timings):",
                "",
                "| statement | indexes used | execution ms |",
                "| --- | --- | ---: |",
                *(f"| {p.statement} | {p.indexes} | {p.ms:.1f} |" for p in m.plans),
            ]
    return "\n".join(lines) + "\n"


def saved_section(markdown: Path) -> str:
    """This section of an existing ``docs/benchmarks.md``, or ""."""
    return sections.saved(markdown, SECTION_MARKER)


def write_section(markdown: Path, text_: str) -> None:
    """Renew this section of ``docs/benchmarks.md`` in place; a first one goes before ``benchmarks.search``'s, which
    that module renews from its marker to the end."""
    sections.replace(markdown, SECTION_MARKER, text_, ahead_of=search.SECTION_MARKER)


async def main(session: int, rounds: int, backends: list[str], table: int | None = None) -> list[Measured]:
    """Measure each backend, one after the other."""
    measured = []
    for backend in backends:
        rows = table or DEFAULT_TABLE[backend]
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as directory:
                measured.append(await measure(backend, f"sqlite:///{directory}/scale.db", session, rows, rounds))
        else:
            with postgres_database() as url:
                measured.append(await measure(backend, url, session, rows, rounds))
    return measured


def merged(results: Path, measured: list[Measured]) -> list[Measured]:
    """``measured`` merged into the JSON file ``results`` by backend (saved back): separate runs make one report."""
    kept = {}
    if results.exists():
        kept = {data["backend"]: Measured.from_json(data) for data in json.loads(results.read_text(encoding="utf-8"))}
    kept |= {m.backend: m for m in measured}
    results.write_text(json.dumps([asdict(m) for m in kept.values()], indent=1), encoding="utf-8")
    return list(kept.values())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=int, default=100_000, help="messages of the big session")
    parser.add_argument(
        "--table", type=int, help="messages in the table (default: 5,000,000 PostgreSQL, 1,000,000 SQLite)"
    )
    parser.add_argument("--rounds", type=int, default=50, help="timed calls per query and path")
    parser.add_argument("--backend", action="append", choices=["postgresql", "sqlite"], help="default: both")
    parser.add_argument("--results", type=Path, help="JSON file the measures are merged into, by backend")
    parser.add_argument("--write", action="store_true", help="renew the scale section of docs/benchmarks.md")
    arguments = parser.parse_args()
    measures = asyncio.run(
        main(arguments.session, arguments.rounds, arguments.backend or ["postgresql", "sqlite"], arguments.table)
    )
    if arguments.results:
        measures = merged(arguments.results, measures)
    report = section(measures)
    print(report)  # noqa: T201
    if arguments.write:
        write_section(BENCHMARKS_MD, report)
