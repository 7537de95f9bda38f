"""``make eval-real``: does the Agent remember what a user said 200 messages ago in a long, chatty session?

A session of ``benchmarks.chatty`` (facts said in passing among small talk, one fact changed later)
is stored in Langflow's ``message`` table as Langflow stores a chat, then each configuration gets the
same few warm-up turns of small talk (a user going on chatting; with the switch on they fold the
backlog) and the same questions, through the real app (``benchmarks.app``) against a real model.
An answer is right when it holds every expected word and not the value a changed fact replaced.

Configurations: the stock Agent at N=100 (the default) and at N=10; the Session Memory Agent with
the switch on at N=10, with its defaults and with Search Older Messages off; and an oracle, the
stock Agent at N=10 in a session that holds only the messages that answer the question (the
model's own ceiling). Tokens are the model
server's count of every request, folds included (the real-model tier's request log); turn times
are what ``/api/v1/run`` took. Results go into docs/eval.md's section for a real model.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from benchmarks import sections
from benchmarks.app import LangflowApp, langflow_app
from benchmarks.chatty import ChattyFact, ChattySession, chatty_session
from benchmarks.eval import Configuration
from benchmarks.inprocess import FOLD_EVENT

DOCS = Path(__file__).resolve().parent.parent / "docs"
REPORT = "eval.md"
MARKER = "<!-- benchmarks.long_chat: real model -->"
WARM_UP = (
    "Anyway, enough about me for a second. Quiet day today, just laundry and emails.",
    "I might try that lentil curry again this week, it was good.",
    "The weather is supposed to be nice this weekend, finally.",
    "Work was fine today, nothing special to report.",
    "I should go to bed earlier, I've been tired all week.",
    "Okay, I have a few questions about things I told you before.",
)


# Search off as well: the tool's definition goes with every request whether the model calls it or not (about 210
# tokens as Qwen's chat template renders it).
CONFIGURATIONS = (
    Configuration("stock Agent, N=100", 100, session_memory=False),
    Configuration("stock Agent, N=10", 10, session_memory=False),
    Configuration("switch on, N=10, defaults", 10, session_memory=True, search=True),
    Configuration("switch on, N=10, search off", 10, session_memory=True),
)
ORACLE = Configuration("oracle: only the messages that answer, stock Agent, N=10", 10, session_memory=False)
# With --embeddings-url: the defaults plus Langflow's Embedding Model component (Ollama provider) on the Agent's
# Embedding Model, so excerpts are also found by meaning (``rules.meaning``).
EMBEDDINGS = Configuration("switch on, N=10, defaults + Embedding Model", 10, session_memory=True, search=True)


@dataclass
class Result:
    configuration: Configuration
    answers: list[tuple[ChattyFact, str]] = field(default_factory=list)
    turn_seconds: list[float] = field(default_factory=list)
    # When each turn's requests were served: (sent, answered, folds after the answer settled).
    windows: list[tuple[float, float, float]] = field(default_factory=list)
    folded: int = 0
    folds: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    excerpts: list[dict] = field(default_factory=list)

    @property
    def correct(self) -> int:
        return sum(answered(fact, text) for fact, text in self.answers)


def answered(fact: ChattyFact, text: str) -> bool:
    lowered = text.lower()
    return all(word.lower() in lowered for word in fact.expected) and not (fact.stale and fact.stale.lower() in lowered)


def store_session(app: LangflowApp, flow_id: str, session_id: str, messages) -> None:
    """The session's messages as Langflow stores a chat: the flow's owner, one second apart, an hour ago."""
    start = datetime.now(UTC) - timedelta(hours=1)
    app.store_messages(
        flow_id,
        session_id,
        [
            (sender, "User" if sender == "User" else "AI", text, start + timedelta(seconds=i))
            for i, (sender, text) in enumerate(messages)
        ],
    )


def timed_turn(app: LangflowApp, result: Result, flow_id: str, text: str, session_id: str, tweaks: dict) -> str:
    started_at, started = time.time(), time.perf_counter()
    app.run(flow_id, text, session_id, tweaks)
    result.turn_seconds.append(time.perf_counter() - started)
    answered_at = time.time()
    app.settle_folds()  # a user reads the answer before writing again; the fold after it lands
    result.windows.append((started_at, answered_at, time.time()))
    return app.last_answer(session_id)[0]


def run_configuration(app: LangflowApp, flow: tuple[str, str], configuration: Configuration, session) -> Result:
    flow_id, agent_id = flow
    session_id = f"long-chat-{uuid.uuid4()}"
    tweaks = {agent_id: configuration.tweaks()}
    result = Result(configuration)
    store_session(app, flow_id, session_id, session.messages)
    app.log.read_events()
    for text in WARM_UP:
        timed_turn(app, result, flow_id, text, session_id, tweaks)
    for fact in session.questions:
        result.answers.append((fact, timed_turn(app, result, flow_id, fact.question, session_id, tweaks)))
    events = app.log.read_events()
    result.folds = [event for event in events if event["event"] == FOLD_EVENT]
    result.problems = [event for event in events if event["event"].startswith(("session_summary_fold_failed",))]
    result.excerpts = [event for event in events if event["event"] == "session_memory_excerpts"]
    result.folded = app.state(session_id)[0]
    return result


def run_oracle(app: LangflowApp, flow: tuple[str, str], session: ChattySession) -> Result:
    """Each question in a session of its own holding only the messages that answer it (the model's ceiling)."""
    flow_id, agent_id = flow
    result = Result(ORACLE)
    for fact in session.questions:
        session_id = f"oracle-{uuid.uuid4()}"
        messages = [
            pair for said in session.relevant[fact.question] for pair in (("User", said), ("Machine", "Noted."))
        ]
        store_session(app, flow_id, session_id, messages)
        tweaks = {agent_id: ORACLE.tweaks()}
        result.answers.append((fact, timed_turn(app, result, flow_id, fact.question, session_id, tweaks)))
    return result


def server_tokens(result: Result, server_log: Path | None, *, folds_only: bool = False) -> int | None:
    """The prompt tokens the model server counted for the configuration's requests, folds included; with
    ``folds_only``, those of the requests made after an answer, while the user reads (the folds after answers)."""
    if server_log is None or not server_log.exists():
        return None
    entries = [json.loads(line) for line in server_log.read_text().splitlines() if line.strip()]
    return sum(
        entry["prompt_tokens"]
        for entry in entries
        if any(
            (answered if folds_only else sent) <= entry["started"] < settled
            for sent, answered, settled in result.windows
        )
    )


def section(results: list[Result], *, name: str, seconds: float, session, server_log: Path | None, timeout: str) -> str:
    stock = results[0]
    stock_tokens = server_tokens(stock, server_log)
    lines = [
        MARKER,
        "## A long chatty session on a real model (`make eval-real`)",
        "",
        f"{name}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min. A session of "
        f"{len(session.messages)} stored messages (`benchmarks/chatty.py`: {len(session.questions)} facts said in "
        f"passing among small talk, one changed later; the newest fact {session.newest_fact_age} messages before "
        f"the questions), then "
        f"{len(WARM_UP)} turns of small talk and {len(session.questions)} questions, each asked in other words than "
        f"the fact was said. LangChain's stream time-out raised to {timeout} s for the run "
        "(`LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S`; at its default, 120 s, a model on a CPU that evaluates the "
        "stock Agent's 100 messages for longer ends the turn). Turn time is each `/api/v1/run` call; the folds after "
        "an answer are let finish before the next turn, as while a user reads the answer (on this one-slot server a "
        "turn that comes sooner waits for the batch under way: docs/design.md), their time is the fold columns'.",
        *(
            [
                "",
                f"*{EMBEDDINGS.label}*: Langflow's Embedding Model component (Ollama provider) wired to the Agent's "
                "Embedding Model, served all-MiniLM-L6-v2 by the tier (`local_model/serve_embeddings.py`).",
            ]
            if any(result.configuration == EMBEDDINGS for result in results)
            else []
        ),
        "",
        "| configuration | right answers | prompt tokens (server) | vs stock N=100 | of them, folds after answers "
        "| turn s, median | turn s, max "
        "| messages folded | folds | fold s, median | fold s, total | failed folds "
        "| turns with excerpts (by meaning) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        tokens = server_tokens(result, server_log)
        ratio = f"{tokens / stock_tokens:.2f}x" if tokens is not None and stock_tokens else "-"
        counted = f"{tokens:,}" if tokens is not None else "-"
        fold_tokens = server_tokens(result, server_log, folds_only=True)
        folds_counted = f"{fold_tokens:,}" if fold_tokens is not None else "-"
        fold_seconds = [int(fold.get("latency_ms", 0)) / 1000 for fold in result.folds]
        lines.append(
            f"| {result.configuration.label} | {result.correct}/{len(result.answers)} | "
            f"{counted} | {ratio} | {folds_counted} | {statistics.median(result.turn_seconds):.1f} | "
            f"{max(result.turn_seconds):.1f} | {result.folded} | {len(result.folds)} | "
            f"{statistics.median(fold_seconds) if fold_seconds else 0:.1f} | {sum(fold_seconds):.0f} | "
            f"{len(result.problems)} | "
            f"{len(result.excerpts)} ({sum(int(event.get('meant', 0)) > 0 for event in result.excerpts)} by meaning) |"
        )
    lines += ["", "| question | expected | " + " | ".join(r.configuration.label for r in results) + " |"]
    lines.append("| --- | --- |" + " --- |" * len(results))
    for index, fact in enumerate(session.questions):
        cells = []
        for result in results:
            text = " ".join(result.answers[index][1].split())[:80].replace("|", "/")
            cells.append(f"{'✓' if answered(fact, result.answers[index][1]) else '✗'} {text}")
        lines.append(f"| {fact.question} | {', '.join(fact.expected)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o-mini", help="the model name the OpenAI provider sends")
    parser.add_argument("--model-name", help="the model as docs/eval.md names it")
    parser.add_argument("--server-log", type=Path, help="the model server's request log (the real-model tier's)")
    parser.add_argument("--agent-max-tokens", type=int, default=64)
    parser.add_argument("--context-window", type=int)
    parser.add_argument("--turns-before", type=int, default=40, help="exchanges the facts are spread over")
    parser.add_argument("--turns-after", type=int, default=110, help="exchanges of small talk after them")
    parser.add_argument("--only", help="run only the configurations whose label contains this")
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--embeddings-url", help="an Ollama-compatible embedding server for the Embedding Model run")
    parser.add_argument("--embeddings-model", default="all-minilm")
    arguments = parser.parse_args(argv)
    if not os.environ.get("OPENAI_API_KEY"):
        parser.error("needs OPENAI_API_KEY (any value for a local server) and OPENAI_BASE_URL")
    session = chatty_session(arguments.turns_before, arguments.turns_after)
    if arguments.embeddings_url:
        # Langflow's Embedding Model on the Ollama provider reads the server from OLLAMA_BASE_URL (the component's own
        # URL field is hidden and not used for an Ollama model picked from the list), and blocks a loopback host
        # unless the operator trusts it.
        os.environ["OLLAMA_BASE_URL"] = arguments.embeddings_url
        os.environ["LANGFLOW_SSRF_ALLOWED_HOSTS"] = urlsplit(arguments.embeddings_url).hostname or ""
    inputs = {"max_tokens": arguments.agent_max_tokens}
    if arguments.context_window:
        inputs["context_window_tokens"] = arguments.context_window
    started = time.perf_counter()
    results = []
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-long-", ignore_cleanup_errors=True)))
        app = stack.enter_context(langflow_app(f"sqlite:///{folder / 'langflow.db'}", model_base_url=None))
        flows = {
            memory: app.create_flow(arguments.model, session_memory=memory, agent_inputs=inputs)
            for memory in (False, True)
        }
        if arguments.embeddings_url:
            flows[EMBEDDINGS] = app.create_flow(arguments.model, session_memory=True, agent_inputs=inputs)
            app.connect_embedding_model(*flows[EMBEDDINGS], model=arguments.embeddings_model)
        configurations = [*CONFIGURATIONS, *([EMBEDDINGS] if arguments.embeddings_url else []), ORACLE]
        for configuration in configurations:
            if arguments.only and arguments.only not in configuration.label:
                continue
            print(f"running {configuration.label} ...", flush=True)  # noqa: T201
            flow = flows.get(configuration) or flows[configuration.session_memory]
            if configuration is ORACLE:
                result = run_oracle(app, flow, session)
            else:
                result = run_configuration(app, flow, configuration, session)
            median = statistics.median(result.turn_seconds)
            print(f"  {result.correct}/{len(result.answers)} right, median turn {median:.1f} s", flush=True)  # noqa: T201
            results.append(result)
    seconds = time.perf_counter() - started
    text = section(
        results,
        name=arguments.model_name or arguments.model,
        seconds=seconds,
        session=session,
        server_log=arguments.server_log,
        timeout=os.environ.get("LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S", "120"),
    )
    print(text)  # noqa: T201
    if arguments.only is None:  # a partial run leaves the report as it is
        sections.replace(arguments.docs / REPORT, MARKER, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
