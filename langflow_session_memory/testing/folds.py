"""Waiting for the folds that run after answers, for the tests, the demo and the benchmarks.

Each runs as a task named :data:`background.FOLD_TASK_NAME` on the server's event loop; whoever
must see its result (a figure, the next turn of a script) waits for those tasks, on that loop.
"""

import asyncio

from langflow_session_memory.services.session_memory.folding.background import FOLD_TASK_NAME


def running_folds() -> list[asyncio.Task]:
    """The folds after answers still running on the current event loop."""
    return [task for task in asyncio.all_tasks() if task.get_name() == FOLD_TASK_NAME and not task.done()]


async def settle_folds() -> None:
    """Wait until no fold after an answer runs on the current event loop, including folds started meanwhile."""
    while tasks := running_folds():
        await asyncio.wait(tasks)
