"""Folds that run after an Agent's answer, on the event loop of the Langflow server that gave it.

Tracked (a task the garbage collector cannot drop), one per session, a bounded number per
process, each with the model server it runs on, so that a turn on that server can wait for it
(``settings.new_turn_waits_for_folds``); cancelled on Langflow's shutdown (the plugin's lifespan
opens and closes this).
Where no server loop is open (a one-shot ``lfx run``, a script) nothing runs here: the
fold after the answer is awaited by the turn instead, by the same path. A fold cancelled mid-way releases its claim on
the way out; a process that dies mid-fold leaves a claim that runs out by itself.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS
from langflow_session_memory.services.session_memory.rules.state import SessionKey

FOLD_TASK_NAME = "session-memory-fold"  # each fold's task, as tracebacks and ``asyncio.all_tasks`` name it


@dataclass
class BackgroundFolds:
    """The running background folds of this process, by session."""

    limit: int = BOUNDS.background_folds
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _running: dict[Hashable, asyncio.Task] = field(default_factory=dict, repr=False)
    _servers: dict[Hashable, str | None] = field(default_factory=dict, repr=False)
    _turns_waiting: dict[str | None, int] = field(default_factory=dict, repr=False)

    def open(self) -> None:
        """Run folds on the current event loop from now on: the server's, for its whole life."""
        self._loop = asyncio.get_running_loop()

    def available(self) -> bool:
        """Whether a fold started now would run after the answer: called on the open server loop."""
        try:
            return self._loop is not None and asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def start(self, key: SessionKey, fold: Callable[[], Awaitable[None]], server: str | None = None) -> bool:
        """Start ``fold`` for ``key`` unless one runs for it already or the process has ``limit`` running.

        ``fold`` logs its own failure (``SessionMemoryService.fold_after_turn`` never raises);
        ``server`` is where its model is served (None: the provider's default endpoint).

        A fold not started is not lost: the session's next turn asks again, and its prompt
        holds the unfolded messages meanwhile (at most two batches; beyond that the turn
        folds the excess inside itself).
        """
        if not self._run(key, fold):
            return False
        self._servers[key] = server
        return True

    def start_indexing(self, key: SessionKey, index: Callable[[], Awaitable[int]]) -> bool:
        """Start ``index`` (adding the session's older messages to the full-text index) beside its fold: no model
        server serves it, so no turn waits for it; one per session, within the same ``limit``."""
        return self._run(("index", key), index)

    def _run(self, job: Hashable, work: Callable[[], Awaitable[object]]) -> bool:
        if not self.available() or job in self._running:
            return False
        if len(self._running) >= self.limit:
            logger.info(f"{log_events.FOLD_DEFERRED} reason=busy running={len(self._running)}")
            return False
        task = asyncio.get_running_loop().create_task(work(), name=FOLD_TASK_NAME)
        self._running[job] = task
        task.add_done_callback(lambda _task: (self._running.pop(job, None), self._servers.pop(job, None)))
        return True

    async def wait_for_server(
        self, server: str | None, timeout_seconds: float, on_wait: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Wait (at most ``timeout_seconds``) for the folds running on ``server``: a turn about to use it.
        ``on_wait`` is awaited first, only when there is a fold to wait for: the turn says why it waits.

        On a server that serves one request at a time (llama.cpp, Ollama and LM Studio with one
        slot), the turn's request would queue behind the fold anyway; sent beside it, it makes
        llama.cpp's server cut the fold's stream, and the fold is lost. Waiting lets the fold
        land, and the turn then reads the summary it wrote. A fold still running at the deadline
        goes on; the turn does not wait longer.
        """
        tasks = [task for key, task in self._running.items() if key in self._servers and self._servers[key] == server]
        tasks = [task for task in tasks if not task.done()]
        if not tasks or not self.available():
            return
        if on_wait is not None:
            await on_wait()
        started = time.perf_counter()
        self._turns_waiting[server] = self._turns_waiting.get(server, 0) + 1
        try:
            _done, running = await asyncio.wait(tasks, timeout=timeout_seconds)
        finally:
            self._turns_waiting[server] -= 1
        waited_ms = round((time.perf_counter() - started) * 1000)
        await logger.ainfo(
            f"{log_events.FOLD_WAITED} waited_ms={waited_ms} folds={len(tasks)} still_running={len(running)}"
        )

    def turn_waits(self, server: str | None) -> bool:
        """Whether a turn waits for the folds on ``server``: a fold there stops after the batch under way."""
        return self._turns_waiting.get(server, 0) > 0

    async def close(self, grace_seconds: float = BOUNDS.shutdown_grace_seconds) -> None:
        """Stop taking folds and cancel the running ones; each releases its claim as it ends."""
        self._loop = None
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=grace_seconds)
            await logger.ainfo(f"{log_events.BACKGROUND_STOPPED} cancelled={len(tasks)} stuck={len(stuck)}")


def running_folds() -> list[asyncio.Task]:
    """The folds after answers still running on the current event loop."""
    return [task for task in asyncio.all_tasks() if task.get_name() == FOLD_TASK_NAME and not task.done()]


async def settle_folds() -> None:
    """Wait until no fold after an answer runs on the current event loop, including folds started meanwhile: what
    the tests, the demo and the benchmarks wait for before they read a figure or send a script's next turn."""
    while tasks := running_folds():
        await asyncio.wait(tasks)
