"""Langflow's UI in a real browser: the README's quick start, and the "Session memory" step while an answer is written.

Chromium comes from the OS packages (``/usr/bin/chromium``; ``.ci/run`` installs it), driven
by Playwright from PyPI; no browser is ever downloaded. The quick start runs ``make run`` as
the README says (on free ports and a fresh database) and follows the README's clicks from
the address it prints; the other test has Langflow serve its UI from this process
(``setup_app``, as ``langflow run`` builds it). Screenshots go to ``test-artifacts/browser/``:
each step of the quick start and the live step always, the whole page on a failure.
"""

import asyncio
import os
import re
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.agent.playground import STEP_NAME, SUMMARY_KEPT_OUT
from langflow_session_memory.summary_page import BACK_TO_THE_FLOW
from tests.app.langflow_app import serving_langflow, shared_log_file
from tests.app.langflow_client import BATCH, LangflowClient, turns_to_fold
from tests.app.test_session_memory_agent import FACT, QUESTION, switch_on_in_flow, talk
from tests.app.test_tool_results import answer_step_facts
from tests.browser import SCREENSHOTS
from tests.test_cli import ROOT, run_make

# The browser is checked first, before Langflow spends a minute starting.
pytestmark = [pytest.mark.app, pytest.mark.browser, pytest.mark.usefixtures("chromium_path")]

# Long enough to find and open the step while the model "thinks" about the answer.
MODEL_LATENCY_S = 5.0
FILLER_TURNS = turns_to_fold(2) - 1  # the fact and 10 turns at N=2 (at the default): the first batch folds after them
# The quick start's chat, as the README says: the fact and 11 more messages at N=4 fold messages 1-20 after the 12th
# answer. At another batch size the same chat folds every full batch of those 20 older messages, and every answer
# after the first fold shows the step (the question's alone at the default).
QUICK_START_MESSAGES = 11
QUICK_START_SUMMARIZED = (2 * (1 + QUICK_START_MESSAGES) - 4) // BATCH * BATCH  # the README's 20 at the default
QUICK_START_STEPS = 1 + QUICK_START_MESSAGES + 1 - turns_to_fold(4)
EDITED_SUMMARY = "Key facts:\n- the customer is GLOBEX\nConversation so far:\n- the user named the customer"
SUMMARY_BY_API = "Key facts:\n- the customer is INITECH\nConversation so far:\n- the user named the customer"
MAKE_RUN_START_TIMEOUT_S = 300  # installing is already done; Langflow's start: 60-90 s on two shared cores
MAKE_RUN_STOP_TIMEOUT_S = 60
STARTER_FLOW_LINE = re.compile(r"\[make run\] open the starter flow: (http://\S+/flow/([0-9a-f-]{36}))")
# What `make run` must not inherit from the test's machine: with a model key it would start no model server.
MODEL_SETTINGS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_API_URL")


@pytest.fixture(scope="module")
def langflow_ui(fake_model, tmp_path_factory):
    """Langflow with its UI on a fresh SQLite database; yields (address, an API client logged in as the UI is)."""
    home = tmp_path_factory.mktemp("langflow-ui")
    url = f"sqlite:///{home / 'langflow.db'}"
    asyncio.run(runner.upgrade(url))
    log_file = shared_log_file(tmp_path_factory)
    with (
        serving_langflow(url, home, log_file=log_file, model_base_url=fake_model.base_url) as served,
        httpx.Client(base_url=served.address, timeout=60) as http,
    ):
        client = LangflowClient(http, url=url, backend="sqlite", log_file=str(log_file), on_app_loop=served.call)
        yield served.address, client


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


STEP_OPEN_ATTEMPTS = 5


def opened_memory_step(page: Page, steps: int = 1):
    """Open the newest answer's step if it is collapsed, and return the region that shows its arguments and output.

    ``steps``: how many of the chat's answers show one.
    """
    toggles = memory_step(page)
    expect(toggles).to_have_count(steps)
    # The Playground renders an answer again once it is stored, which can close a step opened (or shown open)
    # while it streamed: open it until its region stays visible.
    for _ in range(STEP_OPEN_ATTEMPTS):
        toggle = toggles.last
        if toggle.get_attribute("aria-expanded") != "true":
            toggle.click()
        region = page.locator(f"[id='{toggle.get_attribute('aria-controls')}']")
        try:
            expect(region).to_be_visible(timeout=5_000)
            page.wait_for_timeout(1_000)
            expect(region).to_be_visible(timeout=1_000)
        except AssertionError:
            continue
        return region
    return region


def agent_on_canvas(page: Page):
    return page.locator(".react-flow__node", has_text="Session Memory Agent")


def chat(page: Page, chat_log, message: str, answer: str) -> None:
    """Send ``message`` in the Playground and wait for the answer to hold ``answer``."""
    box = page.get_by_placeholder("Send a message...")
    box.fill(message)
    box.press("Enter")
    expect(chat_log).to_contain_text(answer)


def new_api_key(page: Page, address: str) -> str:
    """Settings -> Langflow API Keys -> Add New, as the quick start says; returns the key shown once."""
    page.goto(f"{address}/settings/api-keys")
    page.get_by_role("button", name="Add New").click()
    page.get_by_placeholder("My API Key").fill("quick start")
    page.get_by_role("button", name="Generate API Key").click()
    shown = page.get_by_role("dialog").locator("input[value^='sk-']")
    expect(shown).to_have_count(1)
    return shown.input_value()


def memory(target: str, flow_id: str, url: str) -> str:
    """``make <target> FLOW=...`` as the quick start runs it, on this test's database; returns its stdout."""
    result = run_make(target, f"FLOW={flow_id}", f"LOCAL_DB={url}")
    assert result.returncode == 0, result.stderr
    return result.stdout


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def answers(host: str, port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((host, port)) == 0


@dataclass
class MakeRun:
    """``make run`` started as a user starts it, in its own process group (the terminal's Ctrl-C reaches all of it)."""

    process: subprocess.Popen
    output: Path
    database_url: str
    model_port: int

    def printed(self) -> str:
        return self.output.read_text(errors="replace")

    def starter_flow(self) -> tuple[str, str]:
        """The address `make run` printed for the starter flow, and the flow's id."""
        deadline = time.monotonic() + MAKE_RUN_START_TIMEOUT_S
        while not (found := STARTER_FLOW_LINE.search(self.printed())):
            assert self.process.poll() is None, f"make run ended ({self.process.returncode}):\n{self.printed()[-3000:]}"
            assert time.monotonic() < deadline, f"no starter flow within {MAKE_RUN_START_TIMEOUT_S} s: {self.output}"
            time.sleep(1)
        return found.group(1), found.group(2)

    def ctrl_c(self, *addresses: tuple[str, int]) -> list[tuple[str, int]]:
        """SIGINT to the whole group, as a terminal sends it; returns the ``addresses`` still answering after it."""
        os.killpg(self.process.pid, signal.SIGINT)
        self.process.wait(timeout=MAKE_RUN_STOP_TIMEOUT_S)
        deadline = time.monotonic() + MAKE_RUN_STOP_TIMEOUT_S  # make may end before the launcher has stopped all
        while (left := [a for a in addresses if answers(*a)]) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left


@contextmanager
def started_make_run(tmp_path: Path, *arguments: str, environment: dict[str, str] | None = None):
    """``make run`` with no model key, on free ports and a fresh SQLite file; stopped afterwards if still up."""
    port, model_port = free_port("127.0.0.1"), free_port("127.0.0.2")
    database_url = f"sqlite:///{tmp_path / 'langflow.db'}"
    inherited = {name: value for name, value in os.environ.items() if name not in MODEL_SETTINGS}
    inherited |= {
        "LANGFLOW_DATABASE_URL": database_url,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TMPDIR": str(tmp_path),
        **(environment or {}),
    }
    output = tmp_path / "make-run.log"
    command = ["make", "-s", "run", f"PORT={port}", f"MODEL_PORT={model_port}", f"CONFIG_DIR={tmp_path / 'config'}"]
    with output.open("w") as printed:
        process = subprocess.Popen(
            [*command, *arguments],
            cwd=ROOT,
            env=inherited,
            stdout=printed,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield MakeRun(process, output, database_url, model_port)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=MAKE_RUN_STOP_TIMEOUT_S)


@pytest.fixture
def make_run(tmp_path):
    """``make run`` as the quick start runs it."""
    with started_make_run(tmp_path) as running:
        yield running


def test_the_readme_quick_start(make_run, page):
    """`make run`, its address, the chat, the step and its link to the summary; the summary from a terminal; Ctrl-C."""
    address, flow_id = make_run.starter_flow()
    assert f"the bundled model server answers on http://127.0.0.2:{make_run.model_port}/v1" in make_run.printed()
    ours = [line for line in make_run.printed().splitlines() if line.startswith("[make run]")]
    assert len(ours) == 3  # the model server, its providers, and the one address (issue 40, item 5)
    assert ours[-1].startswith(f"[make run] open the starter flow: {address} (Langflow started in ")
    with whole_page_saved_on_failure(page, "quick-start"):
        page.goto(address)  # "Open that address."
        agent = agent_on_canvas(page)
        expect(agent.get_by_role("switch")).to_have_attribute("aria-checked", "true")
        expect(agent.get_by_role("spinbutton")).to_have_value("4")
        expect(agent).to_contain_text("gpt-5.4-mini")
        page.screenshot(path=SCREENSHOTS / "quick-start-1-starter-flow.png")

        page.get_by_role("button", name="Playground").click()  # "Click Playground."
        chat_log = page.get_by_role("log", name="Chat messages")
        chat(page, chat_log, FACT, "OK: Our project")
        for i in range(1, QUICK_START_MESSAGES + 1):
            chat(page, chat_log, f"hello {i}", f"OK: hello {i}")
        chat(page, chat_log, QUESTION, "From our conversation: PRJ-123, EU")  # the turn waits for the fold
        step = opened_memory_step(page, QUICK_START_STEPS)  # "open it to read ..."
        expect(step).to_contain_text(f"The summary covers the first {QUICK_START_SUMMARIZED} messages")  # "read ..."
        expect(step).not_to_contain_text("PRJ-123")  # the stored answer: counts and a link, never the summary
        page.screenshot(path=SCREENSHOTS / "quick-start-2-session-memory-step.png")

        link = step.get_by_role("link", name="read it")  # "the step's read it link opens it in the browser"
        expect(link).to_have_attribute("href", f"/api/v1/session_memory/{flow_id}/summary?session_id={flow_id}")
        link.click()
        expect(page.locator("body")).to_contain_text("Key facts:")
        expect(page.locator("body")).to_contain_text("PRJ-123 on the EU cluster")
        expect(page.locator("body")).to_contain_text(f"Earlier messages summarized{QUICK_START_SUMMARIZED}")
        page.get_by_role("textbox", name="Summary").fill(EDITED_SUMMARY)  # "correct and save it"
        page.get_by_role("button", name="Save summary").click()
        expect(page.get_by_role("status")).to_contain_text("Saved.")
        expect(page.get_by_role("textbox", name="Summary")).to_have_value(EDITED_SUMMARY)
        page.screenshot(path=SCREENSHOTS / "quick-start-3-summary.png")
        page.get_by_role("link", name=BACK_TO_THE_FLOW).click()  # the page replaced the Playground: back to it
        expect(page).to_have_url(address)
        expect(agent_on_canvas(page)).to_be_visible()
        key = new_api_key(page, address.split("/flow/")[0])

    assert "the customer is GLOBEX" in memory("memory-show", flow_id, make_run.database_url)  # saved on the page
    row = f"{address.split('/flow/')[0]}/api/v1/session_memory/{flow_id}/sessions/{flow_id}"
    with httpx.Client(headers={"x-api-key": key}, timeout=30) as api:
        read = api.get(row).json()
        assert read["summary"] == EDITED_SUMMARY  # saved from the page
        api.put(row, json={"summary": SUMMARY_BY_API, "version": read["version"]}).raise_for_status()
        assert "INITECH" in api.get(row).json()["summary"]
        assert "reset 1 row(s)" in memory("memory-reset", flow_id, make_run.database_url)
        assert api.get(row).status_code == 404

    langflow_port = int(address.split("/flow/")[0].rsplit(":", 1)[1])
    # "Ctrl-C stops Langflow and the model server."
    assert make_run.ctrl_c(("127.0.0.1", langflow_port), ("127.0.0.2", make_run.model_port)) == []


def test_make_run_on_a_running_ollama_keeps_its_model_in_the_editor_and_the_playground(tmp_path, fake_model, page):
    """``make run MODEL=ollama``: the bundled server's Ollama routes stand in for Ollama. Langflow's editor replaces
    a model of a provider the user has no variables for: the copy's Agent must still show Ollama's model when opened,
    and the Playground's turn go to ``/api/chat``."""
    ollama = {
        "OLLAMA_BASE_URL": fake_model.base_url.removesuffix("/v1"),
        "LANGFLOW_SSRF_ALLOWED_HOSTS": "127.0.0.2",  # the operator's choice: make run never widens it
    }
    with started_make_run(tmp_path, "MODEL=ollama", environment=ollama) as running:
        address, _ = running.starter_flow()
        assert "its Agent on Ollama qwen2.5:1.5b" in running.printed()
        before = len(fake_model.requests())
        with whole_page_saved_on_failure(page, "make-run-ollama"):
            page.goto(address)
            expect(agent_on_canvas(page)).to_contain_text("qwen2.5:1.5b")
            page.screenshot(path=SCREENSHOTS / "make-run-ollama-flow.png")
            page.get_by_role("button", name="Playground").click()
            chat(page, page.get_by_role("log", name="Chat messages"), FACT, "OK: Our project")
            expect(agent_on_canvas(page)).to_contain_text("qwen2.5:1.5b")  # not replaced by the editor meanwhile

    turns = [(r["api"], r["body"]["model"]) for r in fake_model.requests()[before:] if r["kind"] == "chat"]
    assert turns == [("ollama", "qwen2.5:1.5b")]


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
            expect(live).to_contain_text("PRJ-123")  # the summary, while the answer is being written
            expect(live).to_contain_text("The summary covers the first")  # what the summary covers, in words
            expect(live).not_to_contain_text("earlier_messages_summarized")  # its counts on the Metadata tab
            page.screenshot(path=SCREENSHOTS / "session-memory-step-live.png")
        expect(chat_log).to_contain_text("From our conversation:")

        open_playground(page, address, flow_id)  # again: now the Playground shows the stored message
        stored = opened_memory_step(page)
        expect(stored).to_contain_text(SUMMARY_KEPT_OUT)
        expect(stored).not_to_contain_text("PRJ-123")
        page.screenshot(path=SCREENSHOTS / "session-memory-step-stored.png")


@pytest.mark.parametrize("session_id", [".", "..", "a/b"], ids=["dot", "dot-dot", "slash"])
def test_the_steps_link_opens_a_session_whose_id_a_path_cannot_carry(langflow_ui, page, session_id):
    """The browser resolves "." and ".." in a path away (the page of "." opened the flow's other sessions' address),
    and the router splits at "/": the link names the session in its query, which the browser leaves as it is."""
    address, langflow = langflow_ui
    flow_id, agent_id = langflow.seeded_folded_session(session_id)
    answer = langflow.run(
        flow_id, "What was the code?", session_id=session_id, tweaks={agent_id: {"summarize_older_messages": True}}
    )
    link = answer_step_facts(answer)["summary_page"]

    with whole_page_saved_on_failure(page, f"odd-session-{session_id.replace('/', '-')}"):
        page.goto(f"{address}/flow/{flow_id}")  # logged in as Langflow's editor logs in
        expect(agent_on_canvas(page)).to_be_visible()
        page.goto(f"{address}{link}")
        expect(page.get_by_role("heading", name="Session memory")).to_be_visible()
        expect(page.locator("dd").first).to_have_text(session_id)
        expect(page.get_by_role("textbox", name="Summary")).to_have_value(re.compile("CODE-0"))
        page.get_by_role("link", name=BACK_TO_THE_FLOW).click()
        expect(page).to_have_url(f"{address}/flow/{flow_id}")
