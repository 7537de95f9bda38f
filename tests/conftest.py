"""Fixtures shared by the database, service, app and browser tests."""

import logging
import os
from pathlib import Path

import pytest
import structlog
from hypothesis import settings
from structlog.testing import capture_logs

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread
from tests.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, UI_TIMEOUT_MS
from tests.databases import BACKENDS, fresh_database, is_truthy, langflow_schema_database
from tests.trust_store import use_one_certificate

# Property tests check rules, not speed: Hypothesis's per-example deadline (200 ms) failed them on a loaded machine.
settings.register_profile("rules_not_speed", deadline=None)
settings.load_profile("rules_not_speed")
use_one_certificate()  # Langflow's model clients load one CA certificate, not the machine's (tests/trust_store.py)
# The real-model tier runs only where a real model is served (``make test-real`` sets this).
collect_ignore = [] if os.environ.get("REAL_MODEL_URL") else ["real_model"]
# The README's install commands, from fresh virtual environments: ``make test-install`` (after ``make dist``).
if not os.environ.get("SESSION_MEMORY_INSTALL_TESTS"):
    collect_ignore.append("install")
# Tests that start Langflow (in this process, or ``make backend``): ``make test-fast`` leaves them out.
APP_TEST_PATHS = ("app", "real_model", "test_make_backend.py")  # benchmarks/ marks its own
SHARED_APP_BACKENDS = ("sqlite", "postgresql")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its hook would otherwise run first)
def pytest_collection_modifyitems(config, items):
    """Mark every test that starts Langflow ``app``, and run the tests of the shared apps last, by backend.

    Tests that start an app of their own run first; then every test of the shared SQLite
    app, then of the shared PostgreSQL app (see ``tests/app/conftest.py``), so each shared
    app starts once. Under pytest-xdist (``make test``: ``-n auto --dist loadgroup``) each
    backend's tests are one group, run by one worker; a test that starts an app of its own
    stops its worker's shared app first (``langflow_app.one_app_at_a_time``).
    """
    tests = Path(__file__).parent
    for item in items:
        relative = Path(item.path).relative_to(tests).parts
        if relative and relative[0] in APP_TEST_PATHS:
            item.add_marker(pytest.mark.app)

    def group(item) -> int:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("langflow") if callspec is not None else None
        return 0 if backend is None else 1 + SHARED_APP_BACKENDS.index(backend)

    items.sort(key=group)  # stable: each group keeps the collection order
    for item in items:
        if group(item):
            item.add_marker(pytest.mark.xdist_group(f"langflow-{SHARED_APP_BACKENDS[group(item) - 1]}"))


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
def claude_server():
    """The bundled model server for one test: langchain-anthropic keeps one HTTP client per address, bound to the
    test's event loop, so a server shared by tests would see a client whose loop is gone."""
    with run_in_thread(FakeModelConfig()) as running:
        yield running


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


@pytest.fixture(scope="module")
def chromium_path() -> str:
    """The OS package's Chromium; skipped where it is missing, except in CI, where the test must run."""
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium)"
        if is_truthy(os.environ.get("CI")):
            pytest.fail(f"{reason}: CI must run the browser test (.ci/run installs it)")
        pytest.skip(reason)
    return str(CHROMIUM)


@pytest.fixture
def page(chromium_path):
    """A headless Chromium page."""
    from playwright.sync_api import expect, sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(UI_TIMEOUT_MS)
        expect.set_options(timeout=UI_TIMEOUT_MS)
        yield page
        browser.close()
