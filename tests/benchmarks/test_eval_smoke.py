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

# One group: its tests share one run of the eval, which each worker would otherwise make again (make test).
pytestmark = [pytest.mark.app, pytest.mark.xdist_group("eval-smoke")]

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


def section_rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of every table row in the section under ``heading``, header and rule rows left out."""
    section = markdown.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith(("| option", "| configuration", "| ---"))
    ]


def test_other_request_shapes_are_simulated_against_the_stock_agent_as_sent(docs):
    markdown = (docs / "eval.md").read_text()
    options = {(cells[0], cells[1]): cells[2:] for cells in section_rows(markdown, "Past the ceiling")}
    assert set(options) == {
        ("as sent", "gpt-4o"),
        ("as sent", "gpt-5"),
        ("folds reuse the chat prefix", "gpt-4o"),
        ("folds reuse the chat prefix", "gpt-5"),
    }
    assert options[("as sent", "gpt-5")][0] == "1.000x"  # the stock Agent against itself
    # the replay of the requests as sent gives the figure the server's own cached tokens gave
    search_on = float(rows(markdown)[SEARCH_ON]["billed input vs stock, gpt-5"].removesuffix("x"))
    assert abs(float(options[("as sent", "gpt-5")][2].removesuffix("x")) - search_on) < 0.01


def test_on_anthropic_the_stock_agent_caches_nothing_and_the_switch_s_breakpoints_are_read(docs):
    markdown = (docs / "eval.md").read_text()
    cells = section_rows(markdown, "On Anthropic")
    (stock, search_on), options = cells[:2], cells[2:]
    assert (stock[0], search_on[0]) == (STOCK, SEARCH_ON)
    assert stock[3:6] == ["0 (0%)", "0 (0%)", "1.00x"]  # nothing read, nothing written, the baseline
    assert int(search_on[3].split(" ", 1)[0].replace(",", "")) > 0
    replayed = {cells[0]: cells[2:] for cells in options}
    assert set(replayed) == {
        "no breakpoints",
        "last block only",
        "LangChain's middleware",
        "LangChain's middleware + summary",
    }
    assert replayed["no breakpoints"][0] == "1.000x"
    # the replay with the switch's own breakpoints gives the figure the server reported
    assert (
        abs(
            float(replayed["LangChain's middleware + summary"][1].removesuffix("x"))
            - float(search_on[5].removesuffix("x"))
        )
        < 0.01
    )
