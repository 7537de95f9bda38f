"""``langflow.plugins`` entry point: migrate our table when Langflow starts.

Langflow never runs ``on_event("startup")`` handlers; a router lifespan does run, after
Langflow's own migrations, once per worker. A failure is logged and Langflow starts
anyway: the Agent then falls back to its stock history (see ``agent_history``).
"""

import asyncio
import time
from contextlib import asynccontextmanager

from fastapi import APIRouter
from lfx.log.logger import logger

from langflow_session_memory.migrations import runner


async def prepare_database() -> None:
    """Bring ``session_memory_state`` to head on Langflow's database; never raises."""
    from lfx.services.deps import get_db_service

    started = time.perf_counter()
    try:
        url = get_db_service().database_url
        await asyncio.to_thread(runner.migrate, url)
        revision = await runner.current_revision(url)
    except Exception as error:  # noqa: BLE001 - Langflow must start even if our migration cannot run
        await logger.aexception(f"session_memory_migration_failed reason={type(error).__name__}: {error}")
        return
    await logger.ainfo(
        f"session_memory_migrated revision={revision} latency_ms={round((time.perf_counter() - started) * 1000)}"
    )


@asynccontextmanager
async def lifespan(_app):
    await prepare_database()
    yield


def register(app) -> None:
    app.include_router(APIRouter(lifespan=lifespan))
