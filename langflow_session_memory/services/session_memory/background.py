"""Folds that run after an Agent's answer, on the event loop of the Langflow server that gave it.

Tracked (a task the garbage collector cannot drop), one per session, a bounded number per
process, cancelled on Langflow's shutdown (the plugin's lifespan opens and closes this).
Where no server loop is open (a one-shot ``lfx run``, a script) nothing runs here: the
fold after the answer is awaited by the turn instead, by the same path. A fold cancelled mid-way releases its claim on
the way out; a process that dies mid-fold leaves a claim that runs out by itself.
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from lfx.log.logger import logger

from langflow_session_memory.services.session_memory.model import SessionKey

MAX_BACKGROUND_FOLDS = 16
SHUTDOWN_GRACE_SECONDS = 5.0


@dataclass
class BackgroundFolds:
    """The running background folds of this process, by session."""

    limit: int = MAX_BACKGROUND_FOLDS
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _running: dict[SessionKey, asyncio.Task] = field(default_factory=dict, repr=False)

    def open(self) -> None:
        """Run folds on the current event loop from now on: the server's, for its whole life."""
        self._loop = asyncio.get_running_loop()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server loop the folds run on; None while closed."""
        return self._loop

    def available(self) -> bool:
        """Whether a fold started now would run after the answer: called on the open server loop."""
        try:
            return self._loop is not None and asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def running(self) -> int:
        return len(self._running)

    def start(self, key: SessionKey, fold: Callable[[], Awaitable[None]]) -> bool:
        """Start ``fold`` for ``key`` unless one runs for it already or the process has ``limit`` running.

        ``fold`` logs its own failure (``SessionMemoryService.fold_after_turn`` never raises).

        A fold not started is not lost: the session's next turn asks again, and its prompt
        holds the unfolded messages meanwhile (at most two batches; beyond that the turn
        folds the excess inside itself).
        """
        if not self.available() or key in self._running:
            return False
        if len(self._running) >= self.limit:
            logger.info(f"session_summary_fold_deferred reason=busy running={len(self._running)}")
            return False
        task = asyncio.get_running_loop().create_task(fold(), name="session-memory-fold")
        self._running[key] = task
        task.add_done_callback(lambda _task: self._running.pop(key, None))
        return True

    async def cancel(self, key: SessionKey, grace_seconds: float = SHUTDOWN_GRACE_SECONDS) -> bool:
        """Cancel ``key``'s fold in flight, if any, and wait (bounded) until it has given back its claim.

        A new turn of the session does this first: a model server that serves one request
        at a time (llama.cpp on a laptop) then answers the user instead of finishing a fold
        the user waits behind. The fold's stream closes, so the server stops writing it; the
        turn's answer makes the fold due again.
        """
        task = self._running.get(key)
        if task is None or task.done() or not self.available():
            return False
        task.cancel()
        await asyncio.wait([task], timeout=grace_seconds)
        await logger.ainfo(f"session_summary_fold_cancelled reason=new_turn session_id={key.session_id!r}")
        return True

    async def settled(self) -> None:
        """Wait until no fold runs: for a caller that must see every fold's result (tests, benchmarks)."""
        while self._running:
            await asyncio.wait(list(self._running.values()))

    async def close(self, grace_seconds: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop taking folds and cancel the running ones; each releases its claim as it ends."""
        self._loop = None
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=grace_seconds)
            await logger.ainfo(f"session_summary_background_stopped cancelled={len(tasks)} stuck={len(stuck)}")
