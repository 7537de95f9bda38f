"""Starting the real Langflow app in-process, and reading its log file as an operator does.

Start-up costs 15-40 s, so callers start one app per backend and module at most.
"""

import asyncio
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine

from langflow_session_memory.bundled_server.langflow_env import import_langflow_main, langflow_environment
from langflow_session_memory.services.session_memory import log_events

# Our events that mean a part of ours failed (logged at ERROR): a test that meets one fails unless it expects it.
# What an app test must not log unless it says so: every event the catalogue writes at ERROR, and at WARNING (a fold
# that failed, a pause, a reset, an overflow, an ignored setting), which pass as quietly as an INFO line otherwise.
FAILURE_EVENTS = tuple(event.name for event in log_events.CATALOGUE if event.level in ("ERROR", "WARNING"))
MIGRATED_EVENT = f"{log_events.MIGRATED} revision="
SHOWN_CHARACTERS_PER_LINE = 2000
START_TIMEOUT_S = 240  # as for `make backend`: measured 55-75 s on two shared cores
STOP_TIMEOUT_S = 30


def database_engine(url: str) -> Engine:
    """A plain synchronous engine on Langflow's database, to read it (or seed it) with SQL."""
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


# Langflow's services are process-wide, so a process runs one app at a time: the shared app of the
# app tests (``SharedApps``, which sets this while its app runs) is stopped before any other starts.
_stop_shared_app: list = []


def one_app_at_a_time(stop_shared_app=None) -> None:
    """Stop this process's shared app, if one runs; with ``stop_shared_app``, register the one that now does."""
    while _stop_shared_app:
        _stop_shared_app.pop()()
    if stop_shared_app is not None:
        _stop_shared_app.append(stop_shared_app)


def shared_log_file(tmp_path_factory) -> Path:
    """One log file for every app of the test session: Langflow's logger binds to its first configuration."""
    return tmp_path_factory.getbasetemp() / "langflow.log"


@contextmanager
def langflow_settings(
    url: str, home: Path, *, log_file: Path, model_base_url: str | None, plays_hosted: bool = True
) -> Iterator[None]:
    """Langflow's environment set around the block (before it reads its settings), restored afterwards.

    ``plays_hosted``: the model server is the bundled one, standing in for a hosted provider.
    """
    environment = langflow_environment(
        url, home, model_base_url=model_base_url, log_file=log_file, plays_hosted=plays_hosted
    )
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        import_langflow_main()
        from lfx.services.deps import get_settings_service

        get_settings_service().settings.database_url = url  # a new app in this process reads it from here
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def running_langflow(
    url: str, home: Path, *, log_file: Path, model_base_url: str | None = None, plays_hosted: bool = True
) -> Iterator[TestClient]:
    """``TestClient(create_app())`` on the database at ``url``, started and stopped around the block.

    Langflow's services are torn down when the client closes, so the next app reads its own
    database URL.
    """
    one_app_at_a_time()
    with langflow_settings(url, home, log_file=log_file, model_base_url=model_base_url, plays_hosted=plays_hosted):
        from langflow.main import create_app

        with TestClient(create_app()) as client:
            yield client


@dataclass(frozen=True)
class ServedLangflow:
    """A Langflow served over HTTP from a thread of this process: its address, and its event loop."""

    address: str
    loop: asyncio.AbstractEventLoop

    def call(self, make: Callable[[], Awaitable]):
        """Run ``make()`` on the app's event loop (where its components and folds run) and return its result."""
        return asyncio.run_coroutine_threadsafe(make(), self.loop).result()


@contextmanager
def serving_langflow(
    url: str, home: Path, *, log_file: Path, model_base_url: str | None = None
) -> Iterator[ServedLangflow]:
    """Langflow with its UI (``setup_app``, as ``langflow run`` builds it) served over HTTP.

    A browser needs a real socket, which ``TestClient`` does not open: uvicorn serves the app
    from a thread of this process, on its own event loop, on a free port of 127.0.0.1, until the
    block ends.
    """
    one_app_at_a_time()
    with langflow_settings(url, home, log_file=log_file, model_base_url=model_base_url):
        from langflow.main import setup_app

        listening = socket.create_server(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(setup_app(), log_level="warning"))
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_until_complete, args=(server.serve(sockets=[listening]),), daemon=True, name="langflow-ui"
        )
        thread.start()
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"Langflow did not start within {START_TIMEOUT_S} s; see {log_file}")
                time.sleep(0.1)
            yield ServedLangflow(address=f"http://127.0.0.1:{listening.getsockname()[1]}", loop=loop)
        finally:
            server.should_exit = True
            thread.join(timeout=STOP_TIMEOUT_S)
            listening.close()
            if not thread.is_alive():
                loop.close()


class LangflowLog:
    """Langflow's log file (one JSON record a line): where it ends now, and what was written since."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def mark(self) -> int:
        return len(self.lines())

    def lines_since(self, mark: int) -> list[str]:
        """The lines written after ``mark``, including those the rotating handler moved to ``.1`` meanwhile."""
        current = self.lines()
        if len(current) >= mark:
            return current[mark:]
        rotated = Path(f"{self.path}.1")
        return (rotated.read_text().splitlines()[mark:] if rotated.exists() else []) + current


def failure_lines(lines: list[str], *, expected: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The lines holding one of :data:`FAILURE_EVENTS` other than the ``expected`` ones."""
    unexpected = [event for event in FAILURE_EVENTS if event not in expected]
    return [line for line in lines if any(event in line for event in unexpected)]


def shown(lines: list[str]) -> str:
    return "\n".join(
        line if len(line) <= SHOWN_CHARACTERS_PER_LINE else f"{line[:SHOWN_CHARACTERS_PER_LINE]} ..." for line in lines
    )
