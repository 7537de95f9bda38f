"""Run by ``test_debug_logging`` in a fresh process: Langflow's logger at DEBUG, without and with per-logger levels.

Each phase configures Langflow's logger from the environment, as ``create_app`` does, with
its own log file, then runs one SQLite statement and one chat request that carry the text
``<marker>-<phase>``. Kept free of heavy imports: the process starts in a few seconds.
"""

import asyncio
import os
import sys
from pathlib import Path

from langchain_openai import ChatOpenAI
from lfx.log.logger import configure
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine


async def statement_and_request(database_url: str, model_base_url: str, said: str) -> None:
    engine = create_async_engine(database_url)
    async with engine.begin() as connection:
        await connection.execute(text("SELECT :summary"), {"summary": said})
    await engine.dispose()
    await ChatOpenAI(model="gpt-4o-mini", api_key="sk-local", base_url=model_base_url).ainvoke(said)


def main(directory: str, model_base_url: str, marker: str, quiet_levels: str) -> None:
    database_url = f"sqlite+aiosqlite:///{Path(directory) / 'probe.db'}"
    for phase, levels in (("loud", ""), ("quiet", quiet_levels)):
        os.environ |= {"LANGFLOW_LOG_FILE": str(Path(directory) / f"{phase}.log"), "LANGFLOW_LOG_LEVELS": levels}
        configure()
        asyncio.run(statement_and_request(database_url, model_base_url, f"{marker}-{phase}"))


if __name__ == "__main__":
    main(*sys.argv[1:])
