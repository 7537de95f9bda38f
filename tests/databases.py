"""Real databases for tests: a SQLite file, or a fresh PostgreSQL database per use.

PostgreSQL comes from ``SESSION_MEMORY_TEST_POSTGRES`` (default: the local server, trust
auth). An unreachable server skips those tests with the reason, unless PostgreSQL is
required (see :func:`postgres_required`): then it fails them, so CI can never pass
without exercising PostgreSQL.
"""

import os
import uuid
from collections.abc import Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import NoReturn

import psycopg
import pytest
from langflow.services.database.models.message.model import MessageTable
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from langflow_session_memory.migrations import runner

POSTGRES_ADMIN_URL = os.environ.get("SESSION_MEMORY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
FALSE_VALUES = frozenset({"", "0", "false", "no", "off"})


def is_truthy(value: str | None) -> bool:
    """An environment flag as CI systems set it: ``1``, ``true``, ``yes`` (any case) are on.

    Unset, empty, ``0``, ``false``, ``no`` and ``off`` are off; any other value is on (some CI
    systems set ``CI`` to their own name).
    """
    return value is not None and value.strip().lower() not in FALSE_VALUES


def postgres_required(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether an unreachable PostgreSQL fails the tests instead of skipping them: in CI, or when asked to."""
    return is_truthy(environ.get("CI")) or is_truthy(environ.get("SESSION_MEMORY_REQUIRE_POSTGRES"))


def postgres_unreachable(error: Exception) -> NoReturn:
    """Skip the test with the reason, or fail it where PostgreSQL is required."""
    reason = f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable: {error}"
    if postgres_required():
        pytest.fail(f"{reason} (CI or SESSION_MEMORY_REQUIRE_POSTGRES: PostgreSQL must be exercised)")
    pytest.skip(reason)


@contextmanager
def fresh_postgres_database():
    """Create an empty database on the server and drop it afterwards; yields its URL."""
    name = f"lsm_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        postgres_unreachable(error)
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
