"""What docs/privacy.md tells an operator about DEBUG logging, checked against Langflow's own logger.

At DEBUG two of Langflow's libraries log what users wrote (a statement's parameters, a
request's body), and ``LANGFLOW_LOG_LEVELS`` keeps them quiet. The probe runs in its own
process (``tests/debug_log_probe.py``): Langflow's logger is configured per process.
"""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread

MARKER = "DEBUG-LOG-MARKER-8812"
QUIET = "aiosqlite=INFO,openai=INFO"


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> Path:
    """The probe's log files (``loud.log`` without per-logger levels, ``quiet.log`` with :data:`QUIET`)."""
    directory = tmp_path_factory.mktemp("debug-log")
    environment = {**os.environ, "LANGFLOW_LOG_LEVEL": "DEBUG", "LANGFLOW_PRETTY_LOGS": "false"}
    with run_in_thread(FakeModelConfig()) as server:
        subprocess.run(
            [sys.executable, "-m", "tests.debug_log_probe", str(directory), server.base_url, MARKER, QUIET],
            cwd=Path(__file__).parent.parent,
            env=environment,
            check=True,
            timeout=300,
        )
    return directory


def loggers_writing(log_file: Path, text: str) -> Counter:
    """Log lines holding ``text``, counted by the logger that wrote them."""
    return Counter(json.loads(line).get("logger") for line in log_file.read_text().splitlines() if text in line)


def test_at_debug_aiosqlite_and_the_openai_client_log_what_users_wrote(probed):
    assert set(loggers_writing(probed / "loud.log", f"{MARKER}-loud")) == {"aiosqlite", "openai._base_client"}


def test_langflow_log_levels_keeps_those_loggers_quiet_at_debug(probed):
    lines = [json.loads(line) for line in (probed / "quiet.log").read_text().splitlines()]
    assert any(line["level"] == "debug" for line in lines)  # other libraries still log at DEBUG
    assert loggers_writing(probed / "quiet.log", f"{MARKER}-quiet") == Counter()
