"""Langflow's own tools returning huge results (issue 39): what reaches the model, stock Agent and ours.

The starter's URL tool (``fetch_content``, wired as the "Simple Agent" starter wires it) reading a 200 KB page,
and Langflow's SQL Database tool (``run_sql_query``) on PostgreSQL returning a table with one long note, both
handed to the Agent as LangChain's ToolNode hands a DataFrame: ``str(df)``, every column padded to its widest
value. At a 16,000-token window (the bundled server counts a padding run as OpenAI's tokenizers do, and refuses in
OpenAI's words) the stock Agent fails and ours answers, the result's content at the head of what it keeps; at
128,000 both answer and ours sends the result as the stock Agent does.
"""

import random
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import create_engine, text

from tests.app.test_real_server_behaviour import behaving
from tests.app.test_tool_results import answer_of, answer_step_facts, tool_results_sent
from tests.databases import POSTGRES_ADMIN_URL
from tests.services.token_samples import page_text

SMALL_WINDOW = 16_000
LARGE_WINDOW = 128_000
PAGE_START = "Release 7.2 ships on 3 March"
PAGE = page_text(random.Random(5), 200_000)
NOTE_START = "Invoice 1000 was disputed"


class PageHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"<html><head><title>Release notes</title></head><body><p>{PAGE}</p></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


@pytest.fixture(scope="module")
def page_url():
    server = ThreadingHTTPServer(("127.0.0.2", 0), PageHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.2:{server.server_address[1]}/release-notes"
    server.shutdown()


@pytest.fixture(scope="module")
def invoices_table():
    """40 invoices on PostgreSQL, one with a 60,000-character note: pandas pads every row's note to its width."""
    name = f"invoices_{uuid.uuid4().hex[:8]}"
    engine = create_engine(POSTGRES_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as connection:
        connection.execute(text(f"CREATE TABLE {name} (id integer PRIMARY KEY, customer text, note text)"))
        rows = [{"id": 1000 + i, "customer": f"Customer {i}", "note": f"Paid on day {i}."} for i in range(1, 40)]
        rows.insert(0, {"id": 1000, "customer": "Northwind", "note": f"{NOTE_START} in March. " + PAGE[:60_000]})
        connection.execute(text(f"INSERT INTO {name} VALUES (:id, :customer, :note)"), rows)
    yield name
    with engine.begin() as connection:
        connection.execute(text(f"DROP TABLE {name}"))
    engine.dispose()


def run(langflow, fake_model, *, memory: bool, question: str, window: int, declared: bool, **tool_nodes):
    """One turn on a fresh flow with the tool, after the seeded turns (a summary of the first 20 messages, N=2)."""
    session_id = f"langflow-tools-{uuid.uuid4()}"
    flow_id, agent_id = langflow.seeded_folded_session(session_id, **tool_nodes)
    tweaks = {agent_id: {"summarize_older_messages": memory}}
    if declared:
        tweaks[agent_id]["context_window_tokens"] = window
    before = len(fake_model.requests())
    with behaving(fake_model, context_limit_tokens=window):
        response = langflow.run(flow_id, question, session_id=session_id, tweaks=tweaks, check=False)
    return response, [r for r in fake_model.requests()[before:] if r["kind"] == "chat"]


def url_tool(page_url: str) -> dict:
    return {"starter_tools": ("URLComponent",), "question": f"Use fetch_content on {page_url}: when does 7.2 ship?"}


def sql_tool(table: str) -> dict:
    database = POSTGRES_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://")
    return {
        "langflow_tools": {"SQLComponent": {"database_url": database}},
        "question": f"Use run_sql_query with `SELECT id, customer, note FROM {table} ORDER BY id`: why the dispute?",
    }


@pytest.fixture(params=["url", "sql"])
def tool_case(request, page_url, invoices_table, monkeypatch) -> tuple[dict, str]:
    """The tool's flow options and question, and the start of the content a clipped result must keep."""
    monkeypatch.setenv(
        "LANGFLOW_SSRF_ALLOWED_HOSTS", "127.0.0.1,127.0.0.2"
    )  # the page server and PostgreSQL: this machine
    if request.param == "url":
        return url_tool(page_url), PAGE_START
    return sql_tool(invoices_table), NOTE_START


def result_of(requests) -> str:
    [result] = tool_results_sent(requests[-1])
    return result


@pytest.mark.parametrize("declared", [False, True], ids=["refused-then-retried", "window-declared"])
@pytest.mark.expect_log("session_context_overflow")
def test_at_a_16k_window_the_stock_agent_fails_and_ours_keeps_the_result_s_content(
    langflow, fake_model, tool_case, declared
):
    options, content_start = tool_case
    stock, stock_requests = run(langflow, fake_model, memory=False, window=SMALL_WINDOW, declared=declared, **options)
    ours, requests = run(langflow, fake_model, memory=True, window=SMALL_WINDOW, declared=declared, **options)

    assert stock.status_code == 500
    assert [r["status"] for r in stock_requests] == [200, 400]
    padded = result_of(stock_requests)
    assert padded.index(content_start) > 50_000  # pandas' padding first
    assert ours.status_code == 200, ours.text
    assert answer_of(ours).startswith("From the tools:")
    assert all(r["prompt_tokens"] <= SMALL_WINDOW for r in requests if r["status"] == 200)
    assert [r["status"] for r in requests] == ([200, 200] if declared else [200, 400, 200])
    kept = result_of(requests)
    assert content_start in kept[:400]  # the content survives clipping, at the head of what is kept
    assert "characters of this tool result were cut here" in kept
    assert answer_step_facts(ours)["tool_results_clipped"] == 1


def test_at_a_128k_window_both_answer_and_ours_sends_the_result_whole(langflow, fake_model, tool_case):
    options, _content_start = tool_case
    stock, stock_requests = run(langflow, fake_model, memory=False, window=LARGE_WINDOW, declared=False, **options)
    log_start = len(langflow.log_lines())
    ours, requests = run(langflow, fake_model, memory=True, window=LARGE_WINDOW, declared=False, **options)

    assert stock.status_code == ours.status_code == 200
    assert answer_of(ours) == answer_of(stock)
    assert [r["status"] for r in requests] == [200, 200]
    assert result_of(requests) == result_of(stock_requests)  # nothing clipped
    sent = requests[-1]["body"]["messages"]
    assert len([m for m in sent if m["role"] in ("user", "assistant")]) >= 5  # summary, its answer, the window...
    assert "session_context_reduced" not in "\n".join(langflow.log_lines()[log_start:])
