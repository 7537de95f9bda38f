"""Fixtures shared by the database, service and app tests."""

import pytest

from tests.databases import BACKENDS, fresh_database, langflow_schema_database


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def database_url(backend, tmp_path):
    """A fresh, empty database for this test."""
    with fresh_database(backend, tmp_path) as url:
        yield url


@pytest.fixture
async def sessions(database_url):
    """A session factory on a database holding Langflow's message table and our migrated table."""
    async with langflow_schema_database(database_url) as factory:
        yield factory
