"""Apply this extension's migrations to Langflow's database.

Used by the start-up plugin (from a thread, since alembic runs its own event loop), the
``python -m langflow_session_memory`` CLI and the tests. Safe when several workers start
at once: PostgreSQL takes an advisory lock inside the migration transaction, SQLite runs
it under ``BEGIN EXCLUSIVE``.
"""

import asyncio
import hashlib
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, inspect, pool
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from langflow_session_memory.services.session_memory.storage.model import session_memory_metadata

VERSION_TABLE = "alembic_version_session_memory"
# Distinct from Langflow's own migration lock so the two never wait on each other.
POSTGRES_LOCK_KEY = int(hashlib.sha256(b"langflow-session-memory").hexdigest()[:15], 16)
SCRIPT_LOCATION = Path(__file__).parent


def async_database_url(url: str) -> str:
    """Rewrite a plain URL to the async drivers Langflow uses (same rule as its DatabaseService)."""
    driver, sep, rest = url.partition("://")
    drivers = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
    return f"{drivers.get(driver, driver)}{sep}{rest}"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _sqlite_exclusive_transactions(engine: AsyncEngine) -> None:
    """Let SQLite run the whole migration as one ``BEGIN EXCLUSIVE`` transaction (as Langflow's env does)."""

    def on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None

    def on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("PRAGMA busy_timeout = 60000")
        connection.exec_driver_sql("BEGIN EXCLUSIVE")

    event.listen(engine.sync_engine, "connect", on_connect)
    event.listen(engine.sync_engine, "begin", on_begin)


def database_engine(url: str) -> AsyncEngine:
    """A short-lived engine on Langflow's database (no pool; PostgreSQL without prepared statements, as Langflow)."""
    url = async_database_url(url)
    connect_args = {"prepare_threshold": None} if url.startswith("postgresql") else {}
    return create_async_engine(url, poolclass=pool.NullPool, connect_args=connect_args)


def _migration_engine(url: str) -> AsyncEngine:
    engine = database_engine(url)
    if engine.dialect.name == "sqlite":
        _sqlite_exclusive_transactions(engine)
    return engine


async def _run_command(url: str, action, revision: str) -> None:
    engine = _migration_engine(url)
    try:

        def run(connection: Connection) -> None:
            config = alembic_config()
            config.attributes["connection"] = connection
            action(config, revision)

        async with engine.connect() as connection:
            await connection.run_sync(run)
    finally:
        await engine.dispose()


def _recorded_without_table(connection: Connection) -> bool:
    inspector = inspect(connection)
    missing = [name for name in session_memory_metadata.tables if not inspector.has_table(name)]
    return _current_revision(connection) is not None and bool(missing)


async def upgrade(url: str, revision: str = "head") -> None:
    """Upgrade; a recorded revision without one of our tables (dropped, a restored backup) is replayed from the start.

    Every revision checks what exists before it creates anything, so replaying is safe.
    """
    engine = _migration_engine(url)
    try:
        async with engine.connect() as connection:
            replay = await connection.run_sync(_recorded_without_table)
    finally:
        await engine.dispose()
    if replay:
        await _run_command(url, command.stamp, "base")
    await _run_command(url, command.upgrade, revision)


async def downgrade(url: str, revision: str = "base") -> None:
    await _run_command(url, command.downgrade, revision)


def _current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


async def current_revision(url: str) -> str | None:
    engine = _migration_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(
                lambda sync: MigrationContext.configure(
                    sync, opts={"version_table": VERSION_TABLE}
                ).get_current_revision()
            )
    finally:
        await engine.dispose()


def migrate(url: str) -> None:
    """Blocking upgrade to head at Langflow's start-up; call it from a thread when an event loop is running.

    Alembic's INFO lines (two per connection, one per revision: 33 on a new database) are held back: they came
    among Langflow's start-up output, before the address a person looks for, and the plugin logs the outcome in
    one line (``session_memory_migrated revision=``). Warnings and errors still show.
    """
    alembic = logging.getLogger("alembic")
    level = alembic.level
    alembic.setLevel(logging.WARNING)
    try:
        asyncio.run(upgrade(url))
    finally:
        alembic.setLevel(level)
