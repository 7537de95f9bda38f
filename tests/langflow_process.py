"""A Langflow started as its own process (``make backend``, ``langflow run``): its port, its health, its migration."""

import os
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 240  # measured 55-75 s on two shared cores


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def healthy(server: subprocess.Popen, port: int, timeout: float = START_TIMEOUT_S) -> bool:
    """Whether the server answered ``/health`` within ``timeout`` seconds (False once it exited)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout and server.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(1)
    return False


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (started with ``start_new_session=True``), then wait for it."""
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


def session_memory_revision(database: Path) -> list[tuple[str]]:
    """Our migration's revision in a SQLite database Langflow ran on."""
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT version_num FROM alembic_version_session_memory").fetchall()
