"""``make backend`` starts a real Langflow server with the extension and migrates our table."""

import os
import subprocess
import time
from pathlib import Path

from langflow_session_memory.migrations import runner
from tests.langflow_process import START_TIMEOUT_S, free_port, healthy, session_memory_revision, stop

ROOT = Path(__file__).parent.parent


def test_make_backend_answers_health_and_migrates(tmp_path):
    port, database = free_port(), tmp_path / "langflow.db"
    environment = {
        **os.environ,
        "LANGFLOW_DATABASE_URL": f"sqlite:///{database}",
        "DO_NOT_TRACK": "true",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    started = time.monotonic()
    server = subprocess.Popen(
        ["make", "-s", "backend", f"PORT={port}"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        answered = healthy(server, port)
        print(f"make backend answered /health after {time.monotonic() - started:.1f} s")  # noqa: T201
        assert answered, f"no /health within {START_TIMEOUT_S} s (exit code {server.poll()})"
        assert session_memory_revision(database) == [(runner.head_revision(),)]
    finally:
        stop(server)
