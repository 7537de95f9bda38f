"""``make bench-one-slot``: turns sent back to back to a one-slot local server, the stock Agent and the switch on.

A one-slot server (llama.cpp's, llama-cpp-python's, Ollama and LM Studio with one parallel slot) serves one
request at a time and keeps one cached prompt: a request evaluates only its tokens past the prefix it shares
with the last request and answer. A fold between two turns evicts the chat's prompt, and a request that waits
cuts a streamed answer short. The bundled server's ``llama-cpp-python`` profile plays both, at the speeds
Qwen2.5-Coder 1.5B Instruct showed through Langflow on this 2-core machine (33 prompt and 8 answer tokens a
second; docs/real-model.md), ``--speed-up`` times faster so that a run takes minutes; every figure is a
ratio or a count, which the speed-up leaves as they are but for Langflow's own few milliseconds a turn.

Configurations, each a fresh session at N=6 starting from an emptied slot, in Langflow's Graph path on one
SQLite database: the stock Agent; the switch on with its default on a self-hosted server (a new turn waits
for the fold running there); the switch on with ``SESSION_MEMORY_NEW_TURN_WAITS_FOR_FOLD=never`` (the fold
runs beside the next turn: "never cancel a fold that has started"); the switch on with the Summary Model on
a second one-slot server. Results go to docs/one-slot.md.
"""

import argparse
import asyncio
import functools
import os
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from langchain_openai import ChatOpenAI
from lfx.custom.custom_component.component import Component
from lfx.io import Output, StrInput

from benchmarks.history import p95
from benchmarks.inprocess import FOLD_EVENT, PROBLEM_EVENTS, AgentConfig, GraphAgent, Runtime, run_with_langflow
from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread
from langflow_session_memory.services.session_memory.folding.background import settle_folds
from langflow_session_memory.services.session_memory.settings import WAIT_FOR_FOLDS_VARIABLE

DOCS = Path(__file__).resolve().parent.parent / "docs"
REPORT = "one-slot.md"
N_MESSAGES = 6
PROMPT_TOKENS_PER_S = 33.0  # Qwen2.5-Coder 1.5B, 2 threads, through Langflow on this machine
OUTPUT_TOKENS_PER_S = 8.0
FACTS = (
    "Our project is PRJ-123 on the EU cluster.",
    "The customer is ACME Corp and the deadline is March 3.",
    "Our on-call engineer this month is Dana Whitfield.",
)


@dataclass(frozen=True)
class Option:
    """One configuration: the stock Agent, or the switch on with a wait rule and where folds run."""

    label: str
    summarize: bool = True
    waits: str = "self-hosted"
    second_server: bool = False


OPTIONS = (
    Option("stock Agent", summarize=False),
    Option("switch on: a turn waits for the fold (default on a self-hosted server)"),
    Option("switch on: the fold runs beside the next turn (waits: never)", waits="never"),
    Option("switch on: Summary Model on a second one-slot server", second_server=True),
)


@dataclass
class Series:
    """One configuration's turns: wall time, what the slot evaluated, and how its folds ended."""

    option: Option
    turn_s: list[float] = field(default_factory=list)
    evaluated_tokens: list[int] = field(default_factory=list)
    whole_prompt_turns: int = 0
    folds_landed: int = 0
    problems: int = 0

    @property
    def p50(self) -> float:
        return statistics.median(self.turn_s)

    def slow_turns(self, stock: "Series") -> int:
        """Turns slower than twice the stock Agent's median and than its slowest turn."""
        threshold = max(2 * stock.p50, max(stock.turn_s))
        return sum(seconds > threshold for seconds in self.turn_s)


def script(turns: int) -> list[str]:
    return [*FACTS, *(f"Turn {n}: the nightly build passed again." for n in range(len(FACTS) + 1, turns + 1))][:turns]


def evict(server) -> None:
    """One short request, so the slot holds nothing of an earlier session."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello."}], "max_tokens": 1}
    httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=60).raise_for_status()


class SecondServerModel(Component):
    """A Language Model component for a model on another server, as a builder connects one to "Summary Model"."""

    inputs = [StrInput(name="base_url", display_name="Base URL")]  # noqa: RUF012 - Langflow's class-level inputs
    outputs = [Output(name="model", display_name="Language Model", method="build_model", types=["LanguageModel"])]  # noqa: RUF012

    def build_model(self) -> ChatOpenAI:
        return ChatOpenAI(model="gpt-4o-mini", base_url=self.base_url, api_key="sk-local")


async def measure(runtime: Runtime, turns: int, summary_server) -> list[Series]:
    """Each option's session in turn, its turns back to back; the folds after the last answer settle before the next."""
    return [await _session(runtime, option, turns, summary_server) for option in OPTIONS]


async def _session(runtime: Runtime, option: Option, turns: int, summary_server) -> Series:
    """One option's session, its wait rule set for the session only (the process's own is put back after)."""
    saved = os.environ.get(WAIT_FOR_FOLDS_VARIABLE)
    os.environ[WAIT_FOR_FOLDS_VARIABLE] = option.waits
    try:
        config = AgentConfig(option.label, N_MESSAGES, summarize=True if option.summarize else None)
        second = functools.partial(SecondServerModel, base_url=summary_server.base_url)
        agent = GraphAgent(config, summary_model=second if option.second_server else None)
        await asyncio.to_thread(evict, runtime.server)
        session_id, before = f"one-slot-{uuid.uuid4()}", len(runtime.server.requests())
        await runtime.log.events()
        series = Series(option)
        for text in script(turns):
            started = time.perf_counter()
            await agent.turn(session_id, text)
            series.turn_s.append(time.perf_counter() - started)
        await settle_folds()
    finally:
        if saved is None:
            os.environ.pop(WAIT_FOR_FOLDS_VARIABLE, None)
        else:
            os.environ[WAIT_FOR_FOLDS_VARIABLE] = saved
    chats = [r for r in runtime.server.requests()[before:] if r["kind"] == "chat" and r["status"] == 200]
    series.evaluated_tokens = [r["evaluated_tokens"] for r in chats]
    series.whole_prompt_turns = sum(r["evaluated_tokens"] == r["prompt_tokens"] for r in chats)
    events = await runtime.log.events()
    series.folds_landed = sum(e["event"] == FOLD_EVENT for e in events)
    series.problems = sum(e["event"] in PROBLEM_EVENTS for e in events)
    return series


def job(url: str, turns: int, speed_up: float) -> list[Series]:
    """Langflow on ``url``; the bundled server, and a second one for the Summary Model, both one-slot."""
    speeds = {
        "prompt_tokens_per_s": PROMPT_TOKENS_PER_S * speed_up,
        "output_tokens_per_s": OUTPUT_TOKENS_PER_S * speed_up,
    }
    with run_in_thread(FakeModelConfig(profile="llama-cpp-python", **speeds)) as summary_server:
        work = lambda runtime: measure(runtime, turns, summary_server)  # noqa: E731
        return run_with_langflow(url, work, model=FakeModelConfig(profile="llama-cpp-python", **speeds))


def render(results: list[Series], *, turns: int, speed_up: float, seconds: float) -> str:
    stock = results[0]
    lines = [
        "# Back-to-back turns on a one-slot local server",
        "",
        f"`make bench-one-slot` (benchmarks/one_slot.py), {time.strftime('%Y-%m-%d')}, {seconds / 60:.1f} min: "
        f"{turns} turns at N={N_MESSAGES}, each sent as soon as the previous answer came, on the bundled server's "
        f"`llama-cpp-python` profile at Qwen2.5-Coder 1.5B's speed through Langflow on this machine "
        f"({PROMPT_TOKENS_PER_S:.0f} prompt and {OUTPUT_TOKENS_PER_S:.0f} answer tokens a second) x{speed_up:g}. "
        "Ratios against the stock Agent in the same run. The same session on the real model: docs/real-model.md.",
        "",
        "| configuration | median turn | p95 | slowest | slow turns | whole prompt evaluated | "
        "tokens evaluated | folds landed | failures |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for series in results:
        lines.append(
            f"| {series.option.label} | {series.p50 / stock.p50:.2f}x | {p95(series.turn_s) / p95(stock.turn_s):.2f}x "
            f"| {max(series.turn_s) / stock.p50:.1f}x | {series.slow_turns(stock)} | {series.whole_prompt_turns} "
            f"| {sum(series.evaluated_tokens) / sum(stock.evaluated_tokens):.2f}x | {series.folds_landed} "
            f"| {series.problems} |"
        )
    lines += [
        "",
        "- *slowest*: against the stock Agent's median turn; *slow turns*: slower than twice the stock Agent's median "
        "and than its slowest turn; *whole prompt evaluated*: chat requests the slot's cached prompt did not serve at "
        "all; *tokens evaluated*: prompt tokens past the cached prefix, chat requests only (a fold's are its own); "
        "*failures*: our failure events (a fold cut short by the next turn's request is one).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=24, help="turns per configuration (folds after 13 and 23)")
    parser.add_argument("--speed-up", type=float, default=4.0, help="the simulated model this many times faster")
    parser.add_argument("--docs", type=Path, default=DOCS)
    arguments = parser.parse_args(argv)
    started = time.perf_counter()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-one-slot-")))
        results = job(f"sqlite:///{folder / 'one-slot.db'}", arguments.turns, arguments.speed_up)
    text = render(results, turns=arguments.turns, speed_up=arguments.speed_up, seconds=time.perf_counter() - started)
    (arguments.docs / REPORT).write_text(text)
    print(text)  # noqa: T201


if __name__ == "__main__":
    main()
