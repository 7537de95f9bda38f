"""Fixtures shared by the database, service and app tests."""

import logging
import os

import pytest
import structlog
from structlog.testing import capture_logs

from tests.databases import BACKENDS, fresh_database, langflow_schema_database

# The real-model tier runs only where a real model is served (``make test-real`` sets this).
collect_ignore = [] if os.environ.get("REAL_MODEL_URL") else ["real_model"]


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


@pytest.fixture
def captured_logs():
    """Langflow's structlog events at every level, as dicts (its default wrapper drops all but CRITICAL)."""
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=previous)
