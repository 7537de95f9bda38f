"""Run every benchmark and write docs/benchmarks.md with its figures: ``make bench`` / ``python -m benchmarks.run``.

Parts: (a) ``tokens``, (b) ``history``, (c) ``latency``, (d) ``concurrency``, and
``cleanup`` (benchmarks/session_delete.py). Each part runs in a fresh process on a fresh
database, because Langflow's services are process-wide and read their database once.
Stages run one after another so timing parts never share the 2 cores; only the two
token sessions, which count tokens rather than time, run side by side. The ``smoke``
preset (tests/benchmarks) runs everything at once, with (a) on the Graph path and (a)-(c)
in one process: it proves the harness works, its numbers mean nothing.
"""

import argparse
import multiprocessing
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from benchmarks import concurrency, history, latency, report, session_delete, tokens
from benchmarks.databases import postgres_database
from benchmarks.inprocess import Runtime, run_with_langflow
from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig

PARTS = ("tokens", "history", "latency", "concurrency", "cleanup")
DOCS = Path(__file__).resolve().parent.parent / "docs"
JOB_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Sizes:
    """Every knob of a run; the presets below are starting points, the command line overrides them."""

    token_turns: int = 1_000
    tokens_path: str = "app"
    history_lengths: tuple[int, ...] = (1_000, 10_000, 100_000)
    history_repeats: int = 200
    latency_turns: int = 40
    model_latency_s: float = 1.0
    workers: int = 4
    sessions: int = 20
    rounds: int = 4
    cleanup_messages: int = 10_000
    cleanup_rounds: int = 5
    # Smoke only: every part at once and the SQLite parts in one process; proves the harness, not the numbers.
    smoke: bool = False


PRESETS = {
    "full": Sizes(),
    "quick": Sizes(
        token_turns=200,
        history_lengths=(1_000, 10_000),
        history_repeats=50,
        latency_turns=15,
        workers=2,
        sessions=5,
        rounds=4,
        cleanup_messages=2_000,
        cleanup_rounds=3,
    ),
    "smoke": Sizes(
        token_turns=3,
        tokens_path="graph",
        history_lengths=(200, 400),
        history_repeats=3,
        latency_turns=3,
        model_latency_s=0.0,
        workers=1,  # a second worker would wait ~15 s for the first to migrate a fresh database
        sessions=2,
        rounds=1,
        cleanup_messages=200,
        cleanup_rounds=1,
        smoke=True,
    ),
}


@dataclass(frozen=True)
class Job:
    """One function call in a fresh process; jobs of the same stage run side by side.

    A ``merged`` job returns a dict of results by name instead of one result. An
    ``in_parent`` job only starts and watches processes of its own, so it runs here.
    """

    name: str
    stage: int
    function: Callable
    arguments: tuple
    merged: bool = False
    in_parent: bool = False


def _in_fresh_process(function: Callable, arguments: tuple):
    """Runs in the child (or here, for ``in_parent`` jobs): quiet Langflow's deprecation noise, call the job, timed."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    started = time.perf_counter()
    return function(*arguments), time.perf_counter() - started


def _cleanup(messages: int, rounds: int) -> dict[str, dict[str, float]]:
    return session_delete.run(messages, rounds)


TOKEN_RUNS = {"tokens stock": tokens.STOCK, "tokens switch on": tokens.MEMORY}


def _tokens(url: str, names: tuple[str, ...], turns: int, path: str) -> dict[str, tokens.TokenSeries]:
    """(a) for the named configurations, in one process."""
    return dict(zip(names, tokens.job(url, tuple(TOKEN_RUNS[name] for name in names), turns, path), strict=True))


def _graph_parts_together(url: str, sizes: Sizes, parts: tuple[str, ...]) -> dict[str, object]:
    """Smoke only: (a) on the Graph path, (b) on SQLite and (c) in one process, sharing Langflow's start-up."""

    async def work(runtime: Runtime) -> dict[str, object]:
        found: dict[str, object] = {}
        if "tokens" in parts:
            series = await tokens.measure_graph(runtime, tuple(TOKEN_RUNS.values()), sizes.token_turns)
            found |= dict(zip(TOKEN_RUNS, series, strict=True))
        if "history" in parts:
            found["history sqlite"] = await history.measure("sqlite", sizes.history_lengths, sizes.history_repeats)
        if "latency" in parts:
            found["latency"] = await latency.measure(runtime, sizes.latency_turns)
        return found

    return run_with_langflow(url, work, model=FakeModelConfig(latency_s=sizes.model_latency_s))


def plan_jobs(sizes: Sizes, parts: tuple[str, ...], folder: Path, postgres: Callable[[], str]) -> list[Job]:
    """The jobs of a run: ``folder`` holds the SQLite files, ``postgres()`` makes a PostgreSQL database.

    Every SQLite part gets its own file. (b) and (d) share one PostgreSQL database, (d)
    after (b): (d)'s workers then start on a database Langflow has already migrated, and
    its sessions sit among (b)'s other messages, as in a real deployment.
    """

    def sqlite(name: str) -> str:
        return f"sqlite:///{folder / name}.db"

    lengths, repeats = sizes.history_lengths, sizes.history_repeats
    shared_postgres = postgres() if "history" in parts or ("concurrency" in parts and not sizes.smoke) else ""
    jobs = []
    if "tokens" in parts and not sizes.smoke:
        for name in TOKEN_RUNS:
            arguments = (sqlite(name.replace(" ", "-")), (name,), sizes.token_turns, sizes.tokens_path)
            jobs.append(Job(name, 0, _tokens, arguments, merged=True))
    if sizes.smoke and {"tokens", "history", "latency"} & set(parts):
        jobs.append(Job("sqlite parts", 0, _graph_parts_together, (sqlite("graph"), sizes, parts), merged=True))
    if "history" in parts:
        if not sizes.smoke:
            jobs.append(Job("history sqlite", 1, history.job, (sqlite("history"), "sqlite", lengths, repeats)))
        arguments = (shared_postgres, "postgresql", lengths, repeats)
        jobs.append(Job("history postgresql", 0 if sizes.smoke else 2, history.job, arguments))
    if "latency" in parts and not sizes.smoke:
        jobs.append(Job("latency", 3, latency.job, (sqlite("latency"), sizes.latency_turns, sizes.model_latency_s)))
    if "cleanup" in parts:
        jobs.append(Job("cleanup", 0 if sizes.smoke else 4, _cleanup, (sizes.cleanup_messages, sizes.cleanup_rounds)))
    if "concurrency" in parts:
        url = postgres() if sizes.smoke else shared_postgres  # smoke: no waiting for (b), at the cost of a migration
        plan = concurrency.ConcurrencyPlan(url=url, workers=sizes.workers, sessions=sizes.sessions, rounds=sizes.rounds)
        jobs.append(Job("concurrency", 0 if sizes.smoke else 5, concurrency.run, (plan,), in_parent=True))
    return jobs


def run_jobs(jobs: list[Job]) -> tuple[dict[str, object], dict[str, float]]:
    """Run stage by stage, each job in a fresh spawned process; returns results and seconds by job name."""
    results, seconds = {}, {}
    context = multiprocessing.get_context("spawn")
    for stage in sorted({job.stage for job in jobs}):
        batch = [job for job in jobs if job.stage == stage]
        print(f"running: {', '.join(job.name for job in batch)}", flush=True)  # noqa: T201
        children = [job for job in batch if not job.in_parent]
        with ProcessPoolExecutor(max(len(children), 1), mp_context=context, max_tasks_per_child=1) as pool:
            futures = {job.name: pool.submit(_in_fresh_process, job.function, job.arguments) for job in children}
            outcomes = {job.name: _in_fresh_process(job.function, job.arguments) for job in batch if job.in_parent}
            outcomes |= {name: future.result(timeout=JOB_TIMEOUT_S) for name, future in futures.items()}
        for job in batch:
            result, seconds[job.name] = outcomes[job.name]
            results.update(result if job.merged else {job.name: result})
            print(f"  {job.name}: {seconds[job.name]:.0f} s", flush=True)  # noqa: T201
    return results, seconds


def run_benchmarks(preset: str, sizes: Sizes, parts: tuple[str, ...], docs: Path) -> tuple[report.BenchResults, float]:
    """Everything ``make bench`` does: databases, jobs, report. Returns the results and the total seconds."""
    started = time.perf_counter()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-bench-")))

        def postgres() -> str:
            return stack.enter_context(postgres_database())

        outcome, seconds = run_jobs(plan_jobs(sizes, parts, folder, postgres))
    results = report.BenchResults(preset=preset, sizes=asdict(sizes), seconds=seconds)
    if "tokens" in parts:
        results.tokens = [outcome["tokens stock"], outcome["tokens switch on"]]
    if "history" in parts:
        results.history = [*outcome["history sqlite"], *outcome["history postgresql"]]
    if "latency" in parts:
        results.latency = outcome["latency"]
    results.concurrency = outcome.get("concurrency")
    results.cleanup = outcome.get("cleanup", {})
    total = time.perf_counter() - started
    report.write(results, docs, total)
    return results, total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_const", const="quick", dest="preset", help="smaller sizes (~4 min)")
    parser.add_argument("--preset", choices=sorted(PRESETS))
    parser.set_defaults(preset="full")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where benchmarks.md and the figures go")
    parser.add_argument("--turns", type=int, help="(a) turns in the long session")
    parser.add_argument("--tokens-path", choices=("app", "graph"), help="(a) through the full app or as a Graph")
    parser.add_argument("--lengths", help="(b) stored session lengths, comma-separated")
    parser.add_argument("--repeats", type=int, help="(b) timed calls per length and side")
    parser.add_argument("--latency-turns", type=int, help="(c) turns per configuration")
    parser.add_argument("--workers", type=int, help="(d) worker processes")
    parser.add_argument("--sessions", type=int, help="(d) sessions shared by all workers")
    parser.add_argument("--rounds", type=int, help="(d) turns per session per worker")
    parser.add_argument("--cleanup-messages", type=int, help="cleanup: messages in the deleted session")
    arguments = parser.parse_args(argv)
    parts = tuple(part.strip() for part in arguments.parts.split(",") if part.strip())
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {sorted(unknown)}")
    overrides = {
        "token_turns": arguments.turns,
        "tokens_path": arguments.tokens_path,
        "history_lengths": tuple(int(n) for n in arguments.lengths.split(",")) if arguments.lengths else None,
        "history_repeats": arguments.repeats,
        "latency_turns": arguments.latency_turns,
        "workers": arguments.workers,
        "sessions": arguments.sessions,
        "rounds": arguments.rounds,
        "cleanup_messages": arguments.cleanup_messages,
    }
    sizes = replace(PRESETS[arguments.preset], **{k: v for k, v in overrides.items() if v is not None})
    results, total = run_benchmarks(arguments.preset, sizes, parts, arguments.docs)
    print()  # noqa: T201
    print("\n".join(report.headline(results)))  # noqa: T201
    print(f"\nwrote {arguments.docs / 'benchmarks.md'} in {total / 60:.1f} min")  # noqa: T201


if __name__ == "__main__":
    sys.exit(main())
