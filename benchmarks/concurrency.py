"""(d) Several Langflow worker processes on one PostgreSQL database, all on the same sessions at once.

Each worker process initialises Langflow's services on the shared database (as a
multi-worker Langflow deployment does) and runs Chat Input -> Agent -> Chat Output turns.
All workers walk the same sessions in the same order, re-aligned by a barrier every
round, so turns on one session overlap and workers try to fold the same batch at the
same time: what the fold claim and the compare-and-swap are for.
The stock Agent does the same work in its own flow. The two alternate in phases ordered
stock, switch on, switch on, stock, ... (each phase a share of the rounds), so whatever
drifts during the run (a growing table, autovacuum, warming caches) hits both alike; a
barrier starts every phase in every worker together.

Reported: turns per second of each phase, errors, folds committed (from the table),
folds logged, lost races (``session_summary_lost_race`` events from Langflow's log: fold
calls whose result was discarded), turns that waited for another worker's claimed fold
instead of calling the model (``session_summary_fold_elsewhere``), and whether every state
row's ``folded_count`` still equals the messages up to its cursor.
"""

import asyncio
import multiprocessing
import time
import uuid
from dataclasses import dataclass, field

import psycopg

from benchmarks import conversation
from benchmarks.inprocess import (
    FOLD_ELSEWHERE_EVENT,
    FOLD_EVENT,
    LOST_RACE_EVENT,
    PROBLEM_EVENTS,
    AgentConfig,
    GraphAgent,
    Runtime,
    run_with_langflow,
)
from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY

START_TIMEOUT_S = 300
PHASE_TIMEOUT_S = 1200
FOLD_BATCH = DEFAULT_POLICY.batch_size


@dataclass(frozen=True)
class ConcurrencyPlan:
    """How much work: every worker runs ``rounds`` turns on each of the ``sessions`` shared sessions."""

    url: str
    workers: int = 4
    sessions: int = 20
    rounds: int = 4
    n_messages: int = 4
    model_latency_s: float = 0.05
    blocks: int = 2  # stock/switch-on phase pairs, in ABBA order

    def schedule(self) -> list[tuple[int, range]]:
        """Phases in run order: (0 = stock or 1 = switch on, the rounds it runs)."""
        blocks = max(1, min(self.blocks, self.rounds))
        bounds = [self.rounds * block // blocks for block in range(blocks + 1)]
        phases = []
        for block in range(blocks):
            rounds = range(bounds[block], bounds[block + 1])
            phases += [(0, rounds), (1, rounds)] if block % 2 == 0 else [(1, rounds), (0, rounds)]
        return phases


@dataclass(frozen=True)
class _Ids:
    user_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    stock_flow: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_flow: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass(frozen=True)
class WorkerPhase:
    """One worker's share of one phase."""

    config: int
    turns: int
    errors: int
    started: float
    ended: float
    folds_logged: int
    lost_races: int
    folds_waited: int
    problems: int


@dataclass(frozen=True)
class PhaseResult:
    """All workers of all phases of one configuration together; ``seconds`` sums each phase's wall time."""

    label: str
    turns: int
    errors: int
    seconds: float
    folds_logged: int
    lost_races: int
    folds_waited: int
    problems: int

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.seconds


@dataclass(frozen=True)
class ConcurrencyResult:
    workers: int
    sessions: int
    rounds: int
    n_messages: int
    stock: PhaseResult
    memory: PhaseResult
    folds_committed: int
    state_rows: int
    consistent_rows: int


def _configs(plan: ConcurrencyPlan) -> tuple[AgentConfig, AgentConfig]:
    return (
        AgentConfig(label=f"stock Agent, N={plan.n_messages}", n_messages=plan.n_messages),
        AgentConfig(label=f"switch on, N={plan.n_messages}", n_messages=plan.n_messages, summarize=True),
    )


async def _work(runtime: Runtime, index: int, plan: ConcurrencyPlan, ids: _Ids, barrier, ready) -> list[WorkerPhase]:
    """One worker with Langflow up: run each phase between barriers, counting our events per phase."""
    ready.set()  # the schema is in place once any worker's services are up
    agents = [
        GraphAgent(config, flow_id=flow_id, user_id=ids.user_id)
        for config, flow_id in zip(_configs(plan), (ids.stock_flow, ids.memory_flow), strict=True)
    ]
    for agent in agents:  # a process's first turn pays one-off imports; keep that out of both phases
        await agent.turn(f"warm-up-{uuid.uuid4()}", conversation.filler(0))
    await runtime.log.events()  # start-up and warm-up lines are not part of any phase
    phases = []
    for config, rounds in plan.schedule():
        agent = agents[config]
        await asyncio.to_thread(barrier.wait, PHASE_TIMEOUT_S)
        started, turns, errors = time.time(), 0, 0
        for round_ in rounds:
            if round_ != rounds[0]:  # re-align every round, or the workers drift apart onto different sessions
                await asyncio.to_thread(barrier.wait, PHASE_TIMEOUT_S)
            for session in range(plan.sessions):
                text = f"Worker {index}, round {round_}: " + conversation.filler(round_ * plan.sessions + session)
                try:
                    await agent.turn(f"concurrency-{session}", text)
                except Exception:  # noqa: BLE001 - counted and reported; the run goes on
                    errors += 1
                turns += 1
        ended = time.time()
        events = [e["event"] for e in await runtime.log.events()]
        phases.append(
            WorkerPhase(
                config=config,
                turns=turns,
                errors=errors,
                started=started,
                ended=ended,
                folds_logged=events.count(FOLD_EVENT),
                lost_races=events.count(LOST_RACE_EVENT),
                folds_waited=events.count(FOLD_ELSEWHERE_EVENT),
                problems=sum(events.count(name) for name in PROBLEM_EVENTS),
            )
        )
    await asyncio.to_thread(barrier.wait, PHASE_TIMEOUT_S)  # nobody tears down while others still run
    return phases


def _worker(index: int, plan: ConcurrencyPlan, ids: _Ids, barrier, ready, results) -> None:
    """Process entry point; reports its phases or its error, and never leaves the others waiting forever.

    Worker 0 starts first and migrates the fresh database; the others start Langflow once
    it has, as several Langflow workers would after a deploy.
    """
    try:
        if index and not ready.wait(START_TIMEOUT_S):
            raise TimeoutError("worker 0 did not prepare the database in time")
        phases = run_with_langflow(
            plan.url,
            lambda runtime: _work(runtime, index, plan, ids, barrier, ready),
            model=FakeModelConfig(latency_s=plan.model_latency_s),
            migrate=index == 0,
        )
        results.put((index, phases, None))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which raises
        barrier.abort()
        ready.set()
        results.put((index, None, f"{type(error).__name__}: {error}"))


def _phase(label: str, phases: list[list[WorkerPhase]]) -> PhaseResult:
    """One configuration's phases (each a list of every worker's share) added up."""
    shares = [share for phase in phases for share in phase]
    return PhaseResult(
        label=label,
        turns=sum(s.turns for s in shares),
        errors=sum(s.errors for s in shares),
        seconds=sum(max(s.ended for s in phase) - min(s.started for s in phase) for phase in phases),
        folds_logged=sum(s.folds_logged for s in shares),
        lost_races=sum(s.lost_races for s in shares),
        folds_waited=sum(s.folds_waited for s in shares),
        problems=sum(s.problems for s in shares),
    )


def _state_rows(url: str, flow_id: str) -> list[tuple[int, int]]:
    """Each state row's ``folded_count`` and the number of stored messages up to its cursor."""
    with psycopg.connect(url) as connection:
        return connection.execute(
            """
            SELECT s.folded_count,
                   (SELECT count(*) FROM message m
                     WHERE m.session_id = s.session_id AND m.flow_id = s.flow_id AND m.user_id = s.owner_id
                       AND NOT m.error
                       AND (m.timestamp < s.cursor_timestamp
                            OR (m.timestamp = s.cursor_timestamp AND m.id <= s.cursor_message_id)))
            FROM session_memory_state s WHERE s.flow_id = %s
            """,
            (flow_id,),
        ).fetchall()


def run(plan: ConcurrencyPlan) -> ConcurrencyResult:
    """Start the workers, wait for them (bounded), and read the outcome from the database."""
    context = multiprocessing.get_context("spawn")
    barrier, ready, results = context.Barrier(plan.workers), context.Event(), context.Queue()
    ids = _Ids()
    processes = [
        context.Process(target=_worker, args=(i, plan, ids, barrier, ready, results)) for i in range(plan.workers)
    ]
    for process in processes:
        process.start()
    try:
        reports = [results.get(timeout=START_TIMEOUT_S + 2 * PHASE_TIMEOUT_S) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    failures = [error for _, _, error in reports if error]
    if failures:
        raise RuntimeError(f"concurrency workers failed: {failures}")
    by_phase = list(zip(*(phases for _, phases, _ in reports), strict=True))  # phase -> every worker's share
    stock_config, memory_config = _configs(plan)
    rows = _state_rows(plan.url, ids.memory_flow)
    return ConcurrencyResult(
        workers=plan.workers,
        sessions=plan.sessions,
        rounds=plan.rounds,
        n_messages=plan.n_messages,
        stock=_phase(stock_config.label, [list(phase) for phase in by_phase if phase[0].config == 0]),
        memory=_phase(memory_config.label, [list(phase) for phase in by_phase if phase[0].config == 1]),
        folds_committed=sum(folded for folded, _ in rows) // FOLD_BATCH,
        state_rows=len(rows),
        consistent_rows=sum(folded == counted for folded, counted in rows),
    )
