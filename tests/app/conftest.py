"""The real Langflow app in-process (``TestClient(create_app())``) against the bundled model server.

One app per backend for the whole test session (``SharedApps``): each start costs 5-25 s, over a
minute on a loaded machine, and tests make their own flows and sessions. Every app test also watches
Langflow's log: an event the catalogue writes at ERROR or WARNING during a test fails it,
unless the test declares it with ``@pytest.mark.expect_log("event", ...)``.
"""

import pytest

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread
from tests.app.langflow_app import FAILURE_EVENTS, LangflowLog, failure_lines, shared_log_file, shown
from tests.app.langflow_client import LangflowClient, SharedApps


@pytest.fixture(scope="session")
def fake_model(tmp_path_factory):
    log = tmp_path_factory.mktemp("model") / "requests.jsonl"
    with run_in_thread(FakeModelConfig(request_log=str(log))) as server:
        yield server


@pytest.fixture(scope="session")
def shared_apps(fake_model, tmp_path_factory):
    """The app tests' Langflow apps: one per backend for the whole test session, one at a time."""
    apps = SharedApps(fake_model.base_url, tmp_path_factory)
    yield apps
    apps.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def langflow(request, shared_apps) -> LangflowClient:
    """A started Langflow app on a database that already carries our table (as after an earlier start).

    Shared by every app test of its backend (tests make their own flows and session ids);
    tests run grouped by backend (``tests/conftest.py``), so each app starts once.
    """
    return shared_apps.client(request.param)


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
