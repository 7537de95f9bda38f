"""``make bench-one-slot`` at a tiny size, so it cannot rot between runs (never timing).

Runs ``python -m benchmarks.one_slot`` in its own process: it starts Langflow's services and
its logging, which are process-wide.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import one_slot
from tests.app.langflow_client import turns_to_fold

pytestmark = pytest.mark.app

ROOT = Path(__file__).resolve().parents[2]
TURNS = turns_to_fold(one_slot.N_MESSAGES) + 1  # a turn past the first fold, short of a second: 14 at the default


def test_the_one_slot_benchmark_runs_every_option_and_writes_its_page(tmp_path):
    arguments = ["--turns", str(TURNS), "--speed-up", "200", "--docs", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "benchmarks.one_slot", *arguments], cwd=ROOT, check=True, timeout=600)

    rows = [line for line in (tmp_path / one_slot.REPORT).read_text().splitlines() if line.startswith("| ")][2:]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == [option.label for option in one_slot.OPTIONS]
    landed = [int(row.split(" | ")[7]) for row in rows]
    assert landed[0] == 0  # the stock Agent folds nothing
    assert landed[1] == 1  # one fold, which landed
