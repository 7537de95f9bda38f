"""``make demo`` at a small size, so the demo cannot rot between runs.

Runs ``python -m benchmarks.demo`` in its own process (it starts the real Langflow app,
whose services are process-wide) with 25 filler turns: enough for the switch on at N=10
to fold twice. Checks what the demo claims, not how fast it is.
"""

import subprocess
import sys
from pathlib import Path

import pytest

# One group: its tests share one run of the demo, which each worker would otherwise make again (make test).
pytestmark = [pytest.mark.app, pytest.mark.xdist_group("demo-smoke")]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> str:
    docs = tmp_path_factory.mktemp("docs")
    subprocess.run(
        [sys.executable, "-m", "benchmarks.demo", "--filler-turns", "25", "--docs", str(docs)],
        cwd=ROOT,
        check=True,
        timeout=600,
    )
    return (docs / "demo.md").read_text()


def rows(markdown: str) -> dict[str, list[str]]:
    """The demo table: configuration -> its cells."""
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines() if line.startswith("|")]
    return {row[0]: row for row in cells[2:]}


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def test_only_the_switch_on_recalls_the_first_message(demo):
    table = rows(demo)
    assert [table[c][4] for c in ("switch off, N=10", "switch off, N=100", "switch on, N=10")] == ["no", "yes", "yes"]
    assert number(table["switch on, N=10"][5]) == 2


def test_the_history_part_is_smaller_than_the_request_and_the_saving_is_reported(demo):
    table = rows(demo)
    for cells in table.values():
        assert 0 < number(cells[2]) < number(cells[1])
    assert "fewer input tokens than the switch off at N=100" in demo
    assert "The chat history alone" in demo
