"""The real Langflow app in-process (``TestClient(create_app())``) against the bundled model server.

One app per backend and test module: start-up costs 15-40 s. Every app test also watches
Langflow's log: a ``session_memory_*`` failure event written during a test fails it,
unless the test declares it with ``@pytest.mark.expect_log("event", ...)``.
"""

import asyncio

import pytest

from langflow_session_memory.migrations import runner
from langflow_session_memory.testing.fake_openai import FakeModelConfig, run_in_thread
from tests.app.langflow_app import (
    FAILURE_EVENTS,
    MIGRATED_EVENT,
    LangflowLog,
    failure_lines,
    running_langflow,
    shared_log_file,
    shown,
)
from tests.app.langflow_client import LangflowClient
from tests.databases import fresh_database


@pytest.fixture(scope="module")
def fake_model(tmp_path_factory):
    log = tmp_path_factory.mktemp("model") / "requests.jsonl"
    with run_in_thread(FakeModelConfig(request_log=str(log))) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def langflow(request, fake_model, tmp_path_factory):
    """A started Langflow app on a database that already carries our table (as after an earlier start)."""
    home = tmp_path_factory.mktemp(f"langflow-{request.param}")
    log = LangflowLog(shared_log_file(tmp_path_factory))
    with fresh_database(request.param, home) as url:
        asyncio.run(runner.upgrade(url))
        start = log.mark()
        with running_langflow(url, home, log_file=log.path, model_base_url=fake_model.base_url) as client:
            started = log.lines_since(start)
            if not any(MIGRATED_EVENT in line for line in started):
                pytest.fail(f"{log.path} did not get the plugin's start-up line {MIGRATED_EVENT!r}: wrong log file?")
            if failed := failure_lines(started):
                pytest.fail(f"Langflow logged session memory failures while starting:\n{shown(failed)}")
            yield LangflowClient(client, url=url, backend=request.param, log_file=str(log.path))


@pytest.fixture(autouse=True)
def no_unexpected_failure_events(request, tmp_path_factory):
    """Fail the test if Langflow's log gained a failure event it did not declare with ``expect_log``."""
    expected = {event for marker in request.node.iter_markers("expect_log") for event in marker.args}
    if unknown := expected - set(FAILURE_EVENTS):
        pytest.fail(f"expect_log names events that are not watched: {sorted(unknown)}; watched: {FAILURE_EVENTS}")
    log = LangflowLog(shared_log_file(tmp_path_factory))
    start = log.mark()
    yield
    if failed := failure_lines(log.lines_since(start), expected=expected):
        pytest.fail(
            "Langflow logged session memory failures during this test"
            " (mark it @pytest.mark.expect_log(...) if they are what it tests):\n" + shown(failed)
        )
