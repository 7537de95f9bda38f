"""``make eval`` at a tiny size, so the recall eval cannot rot between runs.

Runs ``python -m benchmarks.eval`` in its own process (the real Langflow app's services are
process-wide) with 4 facts, 1 change and 12 filler turns: every configuration replays its
session and the report is written. Checks the shape and the one ordering the eval exists
to show, not the figures of a full run.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.app

ROOT = Path(__file__).resolve().parents[2]
STOCK, SEARCH_ON, SUMMARY_ONLY = "stock Agent, N=100", "switch on, N=10, search on", "switch on, N=10, search off"


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    arguments = ["--facts", "4", "--updates", "1", "--filler-turns", "12", "--logs", "1", "--docs", str(folder)]
    subprocess.run([sys.executable, "-m", "benchmarks.eval", *arguments], cwd=ROOT, check=True, timeout=600)
    return folder


def rows(markdown: str) -> dict[str, dict[str, str]]:
    """The results table: configuration -> its cells by column header."""
    table = "| configuration | recall |" + markdown.split("\n\n| configuration | recall |", 1)[1].split("\n\n", 1)[0]
    header, _, *lines = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    return {cells[0]: dict(zip(header, cells, strict=True)) for cells in lines}


def answered(cell: str) -> int:
    return int(cell.split("/", 1)[0])


def test_report_and_plot_are_written_for_every_configuration(docs):
    markdown = (docs / "eval.md").read_text()
    assert set(rows(markdown)) == {STOCK, SUMMARY_ONLY, SEARCH_ON}
    assert "what reaches the model" in markdown
    assert (docs / "eval.png").stat().st_size > 0


def test_search_recalls_at_least_as_much_as_the_summary_alone(docs):
    table = rows((docs / "eval.md").read_text())
    assert answered(table[SEARCH_ON]["recall"]) >= answered(table[SUMMARY_ONLY]["recall"])
    assert all(answered(cells["recall"]) <= 5 for cells in table.values())  # 4 facts and 1 change asked


def test_billed_input_is_reported_against_the_stock_agent_at_each_rate(docs):
    markdown = (docs / "eval.md").read_text()
    table = rows(markdown)
    for rate in ("gpt-4o", "gpt-4.1", "gpt-5"):
        assert table[STOCK][f"billed input vs stock, {rate}"] == "1.00x"
        assert all(float(cells[f"billed input vs stock, {rate}"].removesuffix("x")) > 0 for cells in table.values())
    assert all(0 <= int(cells["served from cache"].removesuffix("%")) <= 100 for cells in table.values())
    assert "Billed input at gpt-5's rate: " in markdown
    assert "fold calls: from cache" in markdown  # folds' cache hits apart from the chat's


def test_other_request_shapes_are_simulated_against_today_s_stock_agent(docs):
    markdown = (docs / "eval.md").read_text()
    options = {
        (cells[0], cells[1]): cells[2:]
        for line in markdown.split("## Past the ceiling", 1)[1].splitlines()
        if line.startswith("| ") and not line.startswith(("| option", "| ---"))
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert set(options) == {
        ("as sent (OpenAI)", "gpt-4o"),
        ("as sent (OpenAI)", "gpt-5"),
        ("folds reuse the chat prefix (OpenAI)", "gpt-4o"),
        ("folds reuse the chat prefix (OpenAI)", "gpt-5"),
        ("Anthropic, no breakpoints", "anthropic"),
        ("Anthropic, breakpoints", "anthropic"),
    }
    assert options[("as sent (OpenAI)", "gpt-5")][0] == options[("Anthropic, no breakpoints", "anthropic")][0]
    assert options[("as sent (OpenAI)", "gpt-5")][0] == "1.000x"  # the stock Agent against itself
    # the replay of the requests as sent gives the figure the server's own cached tokens gave
    search_on = float(rows(markdown)[SEARCH_ON]["billed input vs stock, gpt-5"].removesuffix("x"))
    assert abs(float(options[("as sent (OpenAI)", "gpt-5")][2].removesuffix("x")) - search_on) < 0.01
