"""The plugin's lifespan: start-up migrates our table, shutdown cancels the folds in flight.

The ``langflow`` fixture migrates its database before the app starts, so this is the one
test (with the demo smoke test) where the start-up path creates the table, and the one
that stops an app during a fold. One app start per backend.
"""

import time

import pytest
from sqlalchemy import inspect, text

from langflow_session_memory.migrations import runner
from tests.app.langflow_app import MIGRATED_EVENT, LangflowLog, database_engine, running_langflow, shared_log_file
from tests.app.langflow_client import (
    BACKLOG_SESSION_TURNS,
    FOLDED_MESSAGES,
    SEEDED_SUMMARY,
    LangflowClient,
    slow_folds,
)

# Longer than the test: the fold is still waiting for its summary when the app stops.
STUCK_FOLD_SECONDS = 60

pytestmark = pytest.mark.app


# SQLite's full-text engine keeps the index in a virtual table and its shadow tables.
FTS5_TABLES = {
    "session_memory_search_fts",
    *(f"session_memory_search_fts_{part}" for part in ("data", "idx", "docsize", "config")),
}


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


def test_start_up_migrates_a_new_database_and_shutdown_cancels_a_fold_in_flight(
    database_url, backend, fake_model, tmp_path, tmp_path_factory
):
    assert our_schema(database_url) == (set(), [])
    log = LangflowLog(shared_log_file(tmp_path_factory))
    start = log.mark()

    with (
        slow_folds(fake_model, STUCK_FOLD_SECONDS),
        running_langflow(database_url, tmp_path, log_file=log.path, model_base_url=fake_model.base_url) as client,
    ):
        assert client.get("/health").status_code == 200
        started = log.lines_since(start)
        langflow = LangflowClient(client, url=database_url, backend=backend, log_file=str(log.path))
        flow_id, agent_id = langflow.seeded_folded_session("stopping", turns=BACKLOG_SESSION_TURNS)
        tweaks = {agent_id: {"summarize_older_messages": True}}
        langflow.run(flow_id, "One more turn.", session_id="stopping", tweaks=tweaks, settle=False)
        langflow.wait_for_fold_claim("stopping")
        stopping = time.monotonic()
    stopped_in = time.monotonic() - stopping

    stopped = log.lines_since(start)
    assert any("session_summary_background_stopped cancelled=1 stuck=0" in line for line in stopped), stopped
    assert not [line for line in stopped if "Traceback" in line]
    assert stopped_in < 10, f"shutdown took {stopped_in:.1f} s"
    with database_engine(database_url).connect() as connection:
        row = connection.execute(
            text("SELECT summary, folded_count, fold_claimed_until FROM session_memory_state WHERE session_id = :s"),
            {"s": "stopping"},
        ).one()
    assert tuple(row) == (SEEDED_SUMMARY, FOLDED_MESSAGES, None)  # the claim given back, the summary untouched

    tables, revision = our_schema(database_url)
    assert tables - FTS5_TABLES == {
        "alembic_version_session_memory",
        "session_memory_state",
        "session_memory_search_entry",
    }
    assert revision == [(runner.head_revision(),)]
    migrated = [line for line in started if MIGRATED_EVENT in line]
    assert len(migrated) == 1, started
    assert f"{MIGRATED_EVENT}{runner.head_revision()}" in migrated[0]
