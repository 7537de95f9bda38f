"""This process's session memory: Langflow's database sessions and the one service instance.

The REST API, the start-up plugin and the Agent's adapter all reach the database and the
service through here, so each exists once per process.
"""

from contextlib import asynccontextmanager
from functools import cache

from langflow_session_memory.services.session_memory.service import SessionMemoryService
from langflow_session_memory.services.session_memory.storage.cleanup import install_cleanup_listeners


@asynccontextmanager
async def langflow_database_session():
    """A session from Langflow's own session maker; the caller commits what it writes.

    Not ``session_scope``: that logs any error with its traceback, and SQLAlchemy's error
    text quotes the statement's parameters, such as the summary being written. Our
    failures are logged by the caller, without text (see ``reasons``).
    """
    from lfx.services.deps import get_db_service

    async with get_db_service().async_session_maker() as session:
        yield session


@cache
def get_session_memory_service() -> SessionMemoryService:
    """The process-wide service, on Langflow's own database.

    Also installs the cleanup listeners, for processes that run flows without building
    Langflow's app (and so without our plugin), such as a worker.
    """
    install_cleanup_listeners()
    return SessionMemoryService(sessions=langflow_database_session)
