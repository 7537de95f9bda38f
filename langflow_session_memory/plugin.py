"""``langflow.plugins`` entry point: cleanup listeners, migration, starter flow, orphan sweep, folds after answers, API.

Langflow never runs ``on_event("startup")`` handlers; a router lifespan does run, after
Langflow's own migrations, once per worker. A failure is logged (its kind, never its
text: see ``reasons``) and Langflow starts anyway: the Agent then falls back to its stock
history (see ``guard``).
"""

import asyncio
import time
from contextlib import asynccontextmanager

from fastapi import APIRouter
from lfx.log.logger import logger
from sqlalchemy.exc import IntegrityError

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.storage.cleanup import install_cleanup_listeners, sweep
from langflow_session_memory.starter_flow import install_starter_flow

SWEEP_INTERVAL_SECONDS = 3600


async def prepare_database() -> bool:
    """Bring ``session_memory_state`` to head on Langflow's database; never raises, says if it worked."""
    from lfx.services.deps import get_db_service

    started = time.perf_counter()
    try:
        url = get_db_service().database_url
        await asyncio.to_thread(runner.migrate, url)
        revision = await runner.current_revision(url)
    except Exception as error:  # noqa: BLE001 - Langflow must start even if our migration cannot run
        await logger.aerror(f"{log_events.MIGRATION_FAILED} reason={describe(error)}")
        return False
    await logger.ainfo(
        f"{log_events.MIGRATED} revision={revision} latency_ms={round((time.perf_counter() - started) * 1000)}"
    )
    return True


async def add_starter_flow() -> None:
    """Put "Session Memory Chat" among Langflow's templates; never raises (Langflow starts without it)."""
    try:
        action = await install_starter_flow()
    except IntegrityError:
        action = "kept reason=created_by_another_worker"  # workers start together; the fixed id lets one insert
    except Exception as error:  # noqa: BLE001 - Langflow must start even if the template cannot be added
        await logger.aerror(f"{log_events.STARTER_FLOW_FAILED} reason={describe(error)}")
        return
    await logger.ainfo(f"{log_events.STARTER_FLOW} action={action}")


async def sweep_periodically(interval_seconds: float = SWEEP_INTERVAL_SECONDS) -> None:
    """Remove rows orphaned behind Langflow's back: now, then every ``interval_seconds``."""
    from langflow_session_memory.services.session_memory.runtime import langflow_database_session

    while True:
        try:
            removed = await sweep(langflow_database_session)
        except Exception as error:  # noqa: BLE001 - a failed sweep is retried next interval; the listeners still run
            await logger.aerror(f"{log_events.SWEEP_FAILED} reason={describe(error)}")
        else:
            await logger.ainfo(f"{log_events.SWEEP} removed={removed}")
        await asyncio.sleep(interval_seconds)


@asynccontextmanager
async def lifespan(_app):
    """Migrate, add the starter flow, sweep; run folds after answers on this server's loop, cancel them at shutdown."""
    from langflow_session_memory.services.session_memory.runtime import get_session_memory_service

    sweeper = asyncio.create_task(sweep_periodically()) if await prepare_database() else None
    await add_starter_flow()
    background = get_session_memory_service().background
    background.open()
    try:
        yield
    finally:
        await background.close()
        if sweeper is not None:
            sweeper.cancel()


def register(app) -> None:
    from langflow_session_memory.api import router

    install_cleanup_listeners()
    app.include_router(APIRouter(lifespan=lifespan))
    app.include_router(router)
