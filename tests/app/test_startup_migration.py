"""Langflow's start-up migrates our table: the plugin's lifespan, on a database our migration never ran on.

The ``langflow`` fixture migrates its database before the app starts, so this is the one
test (with the demo smoke test) where the start-up path creates the table. One app start
per backend.
"""

import pytest
from sqlalchemy import inspect, text

from langflow_session_memory.migrations import runner
from tests.app.langflow_app import MIGRATED_EVENT, LangflowLog, database_engine, running_langflow, shared_log_file

pytestmark = pytest.mark.app


def our_schema(url: str) -> tuple[set[str], list[tuple]]:
    """Our tables in the database, and the revision our version table records."""
    engine = database_engine(url)
    try:
        with engine.connect() as connection:
            tables = {name for name in inspect(connection).get_table_names() if "session_memory" in name}
            if "alembic_version_session_memory" not in tables:
                return tables, []
            return tables, connection.execute(text("SELECT version_num FROM alembic_version_session_memory")).all()
    finally:
        engine.dispose()


def test_langflow_start_up_migrates_a_database_our_migration_never_ran_on(database_url, tmp_path, tmp_path_factory):
    assert our_schema(database_url) == (set(), [])
    log = LangflowLog(shared_log_file(tmp_path_factory))
    start = log.mark()

    with running_langflow(database_url, tmp_path, log_file=log.path) as client:
        assert client.get("/health").status_code == 200
        started = log.lines_since(start)

    tables, revision = our_schema(database_url)
    assert tables == {"alembic_version_session_memory", "session_memory_state"}
    assert revision == [(runner.head_revision(),)]
    migrated = [line for line in started if MIGRATED_EVENT in line]
    assert len(migrated) == 1, started
    assert f"{MIGRATED_EVENT}{runner.head_revision()}" in migrated[0]
