"""``benchmarks.long_chat`` (``make eval-real``'s session) at a small size on the bundled server, so it cannot rot.

The bundled server only shows what reaches a model; the recall of this eval is judged on a real
model (docs/eval.md). Here: every configuration runs, the report is written, the switch folds the
stored backlog with no failed fold, and the stock Agent at N=100 sees more than the one at N=10.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread

pytestmark = [pytest.mark.app, pytest.mark.xdist_group("long-chat-smoke")]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("docs")
    arguments = ["--turns-before", "20", "--turns-after", "40", "--docs", str(folder)]
    with run_in_thread(FakeModelConfig()) as server:
        arguments += ["--embeddings-url", server.base_url.removesuffix("/v1")]  # its Ollama route
        environment = {**os.environ, "OPENAI_API_KEY": "sk-local", "OPENAI_BASE_URL": server.base_url}
        command = [sys.executable, "-m", "benchmarks.long_chat", *arguments]
        subprocess.run(command, cwd=ROOT, env=environment, check=True, timeout=900)
    return (folder / "eval.md").read_text()


def rows(markdown: str) -> dict[str, list[str]]:
    table = markdown.split("| configuration | right answers |", 1)[1].split("\n\n", 1)[0]
    return {
        cells[0]: cells
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:])
    }


def test_every_configuration_is_reported_and_the_switch_folds_without_a_failure(report):
    table = rows(report)
    assert set(table) == {
        "stock Agent, N=100",
        "stock Agent, N=10",
        "switch on, N=10, defaults",
        "switch on, N=10, search off",
        "switch on, N=10, defaults + Embedding Model",
        "oracle: only the messages that answer, stock Agent, N=10",
    }
    switch = table["switch on, N=10, defaults"]
    assert int(switch[7]) > 100  # messages folded: the stored backlog
    assert switch[11] == "0"  # failed folds
    assert table["switch on, N=10, defaults + Embedding Model"][11] == "0"
