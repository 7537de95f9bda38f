"""Starting the real Langflow app in-process, and reading its log file as an operator does.

Start-up costs 15-40 s, so callers start one app per backend and module at most.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine

from langflow_session_memory.testing.langflow_env import langflow_environment

# Our events that mean the memory path did not do its job: the Agent fell back to the stock
# history, the start-up migration failed, a cleanup statement was rolled back, or the
# last model call's size could not be kept, or a search of older messages failed.
FAILURE_EVENTS = (
    "session_memory_fallback",
    "session_memory_migration_failed",
    "session_memory_cleanup_failed",
    "session_memory_call_size_failed",
    "session_memory_search_failed",
)
MIGRATED_EVENT = "session_memory_migrated revision="
SHOWN_CHARACTERS_PER_LINE = 2000


def database_engine(url: str) -> Engine:
    """A plain synchronous engine on Langflow's database, to read it (or seed it) with SQL."""
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def shared_log_file(tmp_path_factory) -> Path:
    """One log file for every app of the test session: Langflow's logger binds to its first configuration."""
    return tmp_path_factory.getbasetemp() / "langflow.log"


@contextmanager
def running_langflow(
    url: str, home: Path, *, log_file: Path, model_base_url: str | None = None
) -> Iterator[TestClient]:
    """``TestClient(create_app())`` on the database at ``url``, started and stopped around the block.

    The environment is set before Langflow reads its settings and restored afterwards;
    Langflow's services are torn down when the client closes, so the next app reads its own
    database URL.
    """
    environment = langflow_environment(url, home, model_base_url=model_base_url, log_file=log_file)
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        import langflow.__main__  # noqa: F401  (its signal handlers must be set up in the main thread)
        from langflow.main import create_app
        from lfx.services.deps import get_settings_service

        get_settings_service().settings.database_url = url  # a new app in this process reads it from here
        with TestClient(create_app()) as client:
            yield client
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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
