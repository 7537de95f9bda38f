"""``make backend`` starts a real Langflow server with the extension and migrates our table."""

import os
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx

from langflow_session_memory.migrations import runner

ROOT = Path(__file__).parent.parent
START_TIMEOUT = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        healthy = False
        while not healthy and time.monotonic() - started < START_TIMEOUT and server.poll() is None:
            try:
                healthy = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                time.sleep(1)
        print(f"make backend answered /health after {time.monotonic() - started:.1f} s")  # noqa: T201
        assert healthy, f"no /health within {START_TIMEOUT} s (exit code {server.poll()})"
        with sqlite3.connect(database) as connection:
            revision = connection.execute("SELECT version_num FROM alembic_version_session_memory").fetchall()
        assert revision == [(runner.head_revision(),)]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
