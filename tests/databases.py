"""Real databases for tests: a SQLite file, or a fresh PostgreSQL database per use.

PostgreSQL comes from ``SESSION_MEMORY_TEST_POSTGRES`` (default: the local server, trust
auth). Outside CI an unreachable server skips those tests with the reason; in CI
(``CI=true``) it fails them, so CI can never pass without exercising PostgreSQL.
"""

import os
import uuid
from contextlib import asynccontextmanager, contextmanager

import psycopg
import pytest
from langflow.services.database.models.message.model import MessageTable
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from langflow_session_memory.migrations import runner

POSTGRES_ADMIN_URL = os.environ.get("SESSION_MEMORY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _postgres_unreachable(error: Exception) -> None:
    reason = f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable: {error}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must exercise PostgreSQL)")
    pytest.skip(reason)


@contextmanager
def fresh_postgres_database():
    """Create an empty database on the server and drop it afterwards; yields its URL."""
    name = f"lsm_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        _postgres_unreachable(error)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(backend: str, tmp_path):
    """An empty database of the given backend, as a plain (Langflow-style) URL."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'langflow.db'}"
    else:
        with fresh_postgres_database() as url:
            yield url


@asynccontextmanager
async def langflow_schema_database(url: str):
    """Langflow's ``message`` table (from its own model) plus our migrated table; yields a session factory."""
    await runner.upgrade(url)
    engine = create_async_engine(runner.async_database_url(url))
    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: SQLModel.metadata.create_all(sync, tables=[MessageTable.__table__]))
    try:
        yield async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
    finally:
        await engine.dispose()
