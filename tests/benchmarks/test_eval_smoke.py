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
SEARCH_ON, SUMMARY_ONLY = "switch on, N=10, search on", "switch on, N=10, search off"


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    arguments = ["--facts", "4", "--updates", "1", "--filler-turns", "12", "--logs", "1", "--docs", str(folder)]
    subprocess.run([sys.executable, "-m", "benchmarks.eval", *arguments], cwd=ROOT, check=True, timeout=600)
    return folder


def rows(markdown: str) -> dict[str, list[str]]:
    """The results table: configuration -> its cells."""
    table = markdown.split("\n\n| configuration | recall |", 1)[1].split("\n\n", 1)[0]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    return {row[0]: row for row in cells}


def answered(cell: str) -> int:
    return int(cell.split("/", 1)[0])


def test_report_and_plot_are_written_for_every_configuration(docs):
    markdown = (docs / "eval.md").read_text()
    assert set(rows(markdown)) == {"stock Agent, N=100", SUMMARY_ONLY, SEARCH_ON}
    assert "what reaches the model" in markdown
    assert (docs / "eval.png").stat().st_size > 0


def test_search_recalls_at_least_as_much_as_the_summary_alone(docs):
    table = rows((docs / "eval.md").read_text())
    assert answered(table[SEARCH_ON][1]) >= answered(table[SUMMARY_ONLY][1])
    assert all(answered(cells[1]) <= 5 for cells in table.values())  # 4 facts and 1 change asked
