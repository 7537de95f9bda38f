"""The EXPAND migration on SQLite and PostgreSQL: upgrade, downgrade, idempotence, validator, drift."""

import asyncio
import json
import logging
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import create_async_engine

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.storage.model import (
    ENGINE_COLUMNS,
    ENGINE_INDEXES,
    SEARCH_TABLE_NAME,
    TABLE_NAME,
    SessionMemorySearchEntry,
    SessionMemoryState,
    session_memory_metadata,
)
from tests.databases import fresh_postgres_database

REVISION_FILES = sorted((runner.SCRIPT_LOCATION / "versions").glob("*.py"))
WORKERS = 2  # as two Langflow workers starting together


async def _run_sync(url: str, function):
    engine = create_async_engine(runner.async_database_url(url))
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(function)
    finally:
        await engine.dispose()


def _tables(connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_upgrade_downgrade_upgrade(database_url):
    await runner.upgrade(database_url)
    assert TABLE_NAME in await _run_sync(database_url, _tables)
    assert await runner.current_revision(database_url) == runner.head_revision()

    await runner.downgrade(database_url, "base")
    assert TABLE_NAME not in await _run_sync(database_url, _tables)
    assert await runner.current_revision(database_url) is None

    await runner.upgrade(database_url)
    assert TABLE_NAME in await _run_sync(database_url, _tables)


def _search_index_objects(connection) -> set[str]:
    """The engine's objects behind the full-text index: FTS5's table and triggers, or PostgreSQL's GIN index."""
    if connection.dialect.name == "sqlite":
        query = (
            "SELECT name FROM sqlite_master"
            " WHERE name LIKE 'session_memory_search_fts%' AND type IN ('table', 'trigger')"
        )
    else:
        query = "SELECT indexname FROM pg_indexes WHERE indexname = 'ix_session_memory_search_entry_body'"
    return set(connection.execute(text(query)).scalars())


async def test_the_search_index_comes_with_sm0007_and_goes_with_its_downgrade(database_url):
    await runner.upgrade(database_url)
    created = await _run_sync(database_url, _search_index_objects)
    assert created >= {"session_memory_search_fts", "session_memory_search_fts_insert"} or created == {
        "ix_session_memory_search_entry_body"
    }

    await runner.downgrade(database_url, "sm0006")
    assert await _run_sync(database_url, _search_index_objects) == set()
    assert "session_memory_search_entry" not in await _run_sync(database_url, _tables)
    assert TABLE_NAME in await _run_sync(database_url, _tables)


def _entry_columns(connection) -> set[str]:
    return {column["name"] for column in inspect(connection).get_columns(SEARCH_TABLE_NAME)}


def _index_and_find(connection) -> list[str]:
    """Insert one entry as sm0007 knew it, and what the engine's index finds for its word."""
    ids = {name: uuid.uuid4() for name in ("message_id", "flow_id", "owner_id")}
    connection.execute(  # the columns sm0007 made only
        insert(SessionMemorySearchEntry.__table__).values(
            **ids, session_id="s", timestamp=datetime.now(UTC), scope="7", body="painting landscapes"
        )
    )
    if connection.dialect.name == "sqlite":
        query = "SELECT body FROM session_memory_search_fts WHERE session_memory_search_fts MATCH 'paint'"
    else:
        query = f"SELECT body FROM {SEARCH_TABLE_NAME} WHERE document @@ to_tsquery('english', 'paint')"
    return list(connection.execute(text(query)).scalars())


async def test_sm0008_adds_the_fact_source_and_its_downgrade_leaves_the_index_working(database_url):
    await runner.upgrade(database_url, "sm0008")
    assert "source_message_id" in await _run_sync(database_url, _entry_columns)

    await runner.downgrade(database_url, "sm0007")

    assert "source_message_id" not in await _run_sync(database_url, _entry_columns)
    assert await _run_sync(database_url, _index_and_find) == ["painting landscapes"]  # the triggers stayed


@pytest.mark.parametrize(
    ("revision", "column"),
    [
        ("sm0002", "fold_claimed_until"),
        ("sm0003", "last_call_tokens"),
        ("sm0004", "unreported_input_tokens"),
        ("sm0005", "unreported_cached_input_tokens"),
        ("sm0006", "fold_batch_limit"),
    ],
)
async def test_added_column_comes_and_goes_with_rows_and_key_kept(database_url, revision, column):
    now = datetime.now(UTC)
    row = insert(SessionMemoryState.__table__).values(  # only these columns: valid at sm0001 too
        flow_id=uuid.uuid4(), owner_id=uuid.uuid4(), session_id="s", summary="notes", created_at=now, updated_at=now
    )
    previous = f"sm{int(revision[2:]) - 1:04d}"
    await runner.upgrade(database_url, previous)
    await _run_sync(database_url, lambda connection: connection.execute(row))

    await runner.upgrade(database_url, revision)
    assert column in await _run_sync(database_url, _columns)
    await runner.downgrade(database_url, previous)
    assert column not in await _run_sync(database_url, _columns)

    def summaries(connection):
        return connection.execute(text(f"SELECT summary FROM {TABLE_NAME}")).scalars().all()

    assert await _run_sync(database_url, summaries) == ["notes"]
    with pytest.raises(IntegrityError):  # the unique key survived the table rebuild
        await _run_sync(database_url, lambda connection: connection.execute(row))


def _columns(connection) -> set[str]:
    return {column["name"] for column in inspect(connection).get_columns(TABLE_NAME)}


@pytest.mark.parametrize("dropped", [TABLE_NAME, SEARCH_TABLE_NAME])
async def test_migrate_restores_a_dropped_table_that_the_version_table_still_records(database_url, dropped):
    await runner.upgrade(database_url)
    await _run_sync(database_url, lambda connection: connection.execute(text(f"DROP TABLE {dropped}")))
    assert await runner.current_revision(database_url) == runner.head_revision()

    await runner.upgrade(database_url)

    assert set(SessionMemoryState.__table__.columns.keys()) <= await _run_sync(database_url, _columns)
    assert dropped in await _run_sync(database_url, _tables)
    assert await _run_sync(database_url, _search_index_objects)
    assert await runner.current_revision(database_url) == runner.head_revision()


async def test_second_upgrade_is_a_no_op(database_url):
    await runner.upgrade(database_url)
    await runner.upgrade(database_url)
    assert await runner.current_revision(database_url) == runner.head_revision()


def _ours(name: str, type_: str) -> bool:
    """Our tables and their indexes, but for the full-text engine's, which the model cannot declare on both
    databases (PostgreSQL's GIN index on an expression; SQLite's FTS5 tables are not ours to compare)."""
    if type_ == "table":
        return name in session_memory_metadata.tables
    return not ((type_ == "index" and name in ENGINE_INDEXES) or (type_ == "column" and name in ENGINE_COLUMNS))


async def test_model_matches_migrated_database(database_url):
    await runner.upgrade(database_url)

    def diff(connection):
        context = MigrationContext.configure(
            connection,
            opts={"include_name": lambda name, type_, _: _ours(name, type_)},
        )
        return compare_metadata(context, session_memory_metadata)

    assert await _run_sync(database_url, diff) == []


async def test_langflow_alembic_version_is_untouched(database_url):
    async def langflow_revision():
        return await _run_sync(database_url, lambda c: c.execute(text("SELECT version_num FROM alembic_version")).all())

    await _run_sync(database_url, lambda c: c.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32))")))
    await _run_sync(database_url, lambda c: c.execute(text("INSERT INTO alembic_version VALUES ('e5a7c9b1d3f2')")))

    await runner.upgrade(database_url)
    await runner.downgrade(database_url, "base")
    await runner.upgrade(database_url)

    assert await langflow_revision() == [("e5a7c9b1d3f2",)]


def test_every_revision_passes_langflow_migration_validator():
    """One validator run over every revision file (each start of Python with Langflow costs seconds).

    Its JSON report, not its log: in a test process whose Langflow app is running, the validator's
    log lines go to that app's log file, and the run would show nothing of what it checked.
    """
    result = subprocess.run(
        [sys.executable, "-m", "langflow.alembic.migration_validator", "--strict", "--json", *map(str, REVISION_FILES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(REVISION_FILES) >= 4
    checked = {Path(report["file"]).name: report for report in json.loads(result.stdout)}
    for revision_file in REVISION_FILES:
        report = checked[revision_file.name]  # the validator checked it
        assert (report["valid"], report["phase"], report["warnings"]) == (True, "EXPAND", [])
        assert "Phase: EXPAND" in revision_file.read_text()


@pytest.mark.postgres
async def test_concurrent_workers_migrate_a_fresh_postgres_database_once():
    """Langflow's workers are processes (alembic's ``context`` is process-global, so threads would not do)."""
    with fresh_postgres_database() as url:
        workers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "langflow_session_memory",
                "migrate",
                "--url",
                url,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(WORKERS)
        ]
        outputs = [await worker.communicate() for worker in workers]
        assert [worker.returncode for worker in workers] == [0] * WORKERS, outputs

        tables = await _run_sync(
            url,
            lambda c: c.execute(text("SELECT count(*) FROM pg_tables WHERE tablename = :t"), {"t": TABLE_NAME}).one(),
        )
        assert tables == (1,)
        assert await runner.current_revision(url) == runner.head_revision()


def test_the_start_up_migration_writes_no_alembic_line_per_revision(database_url, caplog):
    """Issue 40: 33 lines of alembic's INFO came before the address `make run` prints; the plugin says it in one."""
    caplog.set_level(logging.INFO)
    before = logging.getLogger("alembic").level
    runner.migrate(database_url)
    assert not [record.getMessage() for record in caplog.records if record.name.startswith("alembic")]
    assert logging.getLogger("alembic").level == before
