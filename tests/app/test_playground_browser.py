"""The Playground in a real browser: the "Session memory" step shows the notes while the answer is written.

Chromium comes from the OS packages (``/usr/bin/chromium``; ``.ci/run`` installs it), driven
by Playwright from PyPI; no browser is ever downloaded. Langflow serves its UI from this
process (``setup_app``, as ``langflow run`` builds it). Screenshots go to
``test-artifacts/browser/``: the step always, the whole page on a failure.
"""

import asyncio
import os
import re
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.playground import NOTES_KEPT_OUT, STEP_NAME
from tests.app.langflow_app import serving_langflow, shared_log_file
from tests.app.langflow_client import LangflowClient
from tests.app.test_session_memory_agent import FACT, QUESTION, switch_on_in_flow, talk
from tests.databases import is_truthy

# The browser is checked first, before Langflow spends a minute starting.
pytestmark = [pytest.mark.app, pytest.mark.browser, pytest.mark.usefixtures("chromium_path")]

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).parent.parent.parent / "test-artifacts" / "browser"
# Long enough to find and open the step while the model "thinks" about the answer.
MODEL_LATENCY_S = 5.0
UI_TIMEOUT_MS = 30_000
FILLER_TURNS = 10  # the fact and 10 turns at N=2: messages 1-20 are folded after the last of them


@pytest.fixture(scope="module")
def chromium_path() -> str:
    """The OS package's Chromium; skipped where it is missing, except in CI, where the test must run."""
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium)"
        if is_truthy(os.environ.get("CI")):
            pytest.fail(f"{reason}: CI must run the browser test (.ci/run installs it)")
        pytest.skip(reason)
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def langflow_ui(fake_model, tmp_path_factory):
    """Langflow with its UI on a fresh SQLite database; yields (address, an API client logged in as the UI is)."""
    home = tmp_path_factory.mktemp("langflow-ui")
    url = f"sqlite:///{home / 'langflow.db'}"
    asyncio.run(runner.upgrade(url))
    log_file = shared_log_file(tmp_path_factory)
    with (
        serving_langflow(url, home, log_file=log_file, model_base_url=fake_model.base_url) as address,
        httpx.Client(base_url=address, timeout=60) as http,
    ):
        yield address, LangflowClient(http, url=url, backend="sqlite", log_file=str(log_file))


@pytest.fixture
def page(chromium_path):
    """A headless Chromium page (as root, Chromium's sandbox cannot start)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(UI_TIMEOUT_MS)
        expect.set_options(timeout=UI_TIMEOUT_MS)
        yield page
        browser.close()


@contextmanager
def whole_page_saved_on_failure(page: Page, name: str):
    """On any failure inside the block, save the whole page as the user saw it and say where."""
    try:
        yield
    except BaseException:
        path = SCREENSHOTS / f"{name}-failure.png"
        page.screenshot(path=path, full_page=True)
        print(f"browser test failed; screenshots in {SCREENSHOTS} (this failure: {path.name})")  # noqa: T201
        raise


def open_playground(page: Page, address: str, flow_id: str):
    """The flow's Playground, as a builder opens it from the canvas; returns its chat log."""
    page.goto(f"{address}/flow/{flow_id}")
    page.get_by_role("button", name="Playground").click()
    return page.get_by_role("log", name="Chat messages")


@contextmanager
def slow_model(fake_model, latency_s: float):
    """Every model call waits ``latency_s`` inside the block, so a live view stays on screen long enough."""
    fake_model.config.latency_s = latency_s
    try:
        yield
    finally:
        fake_model.config.latency_s = 0.0


def memory_step(page: Page):
    """The step's toggle: a button controlling its region (the sidebar's "Session Memory" category is not one)."""
    return page.locator("button[aria-controls]", has_text=re.compile(STEP_NAME, re.IGNORECASE))


def opened_memory_step(page: Page):
    """Open the step if it is collapsed, and return the region that shows its arguments and output."""
    toggle = memory_step(page)
    expect(toggle).to_have_count(1)
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    return page.locator(f"[id='{toggle.get_attribute('aria-controls')}']")


def test_the_playground_shows_the_planted_fact_in_the_session_memory_step(langflow_ui, fake_model, page):
    address, langflow = langflow_ui
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    switch_on_in_flow(langflow, flow_id, agent_id)
    playground_session = flow_id  # the Playground's "Default Session"
    langflow.run(flow_id, FACT, session_id=playground_session)
    talk(langflow, flow_id, playground_session, FILLER_TURNS)

    with whole_page_saved_on_failure(page, "playground"):
        chat_log = open_playground(page, address, flow_id)
        expect(chat_log).to_contain_text(f"Filler turn {FILLER_TURNS - 1}")  # the session's history has loaded
        with slow_model(fake_model, MODEL_LATENCY_S):
            chat = page.get_by_placeholder("Send a message...")
            chat.fill(QUESTION)
            chat.press("Enter")
            live = opened_memory_step(page)
            expect(live).to_contain_text("PRJ-123")  # the notes, while the answer is being written
            expect(live).to_contain_text("earlier_messages_summarized")
            page.screenshot(path=SCREENSHOTS / "session-memory-step-live.png")
        expect(chat_log).to_contain_text("From our conversation:")

        open_playground(page, address, flow_id)  # again: now the Playground shows the stored message
        stored = opened_memory_step(page)
        expect(stored).to_contain_text(NOTES_KEPT_OUT)
        expect(stored).not_to_contain_text("PRJ-123")
        page.screenshot(path=SCREENSHOTS / "session-memory-step-stored.png")
