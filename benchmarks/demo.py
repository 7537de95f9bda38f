"""``make demo``: does the first message survive 60 turns? Three Agent configurations, one session each.

Runs the real Langflow app in-process (``TestClient(create_app())``, ``/api/v1/run``, with
this extension's plugin and component as a user installs them) on a fresh SQLite
database. Every session says "Our project is PRJ-123 on the EU cluster.", then 60 filler
turns (one of them a ~5,000-character pasted log), then asks "Which cluster and project
were we on?". Configurations: the switch off at N=10, off at N=100, on at N=10, set per
run through tweaks on one flow.

By default the model is the bundled deterministic server, which answers a recall question
only with facts present in the request: the answer shows whether the facts reached the
model. ``--model NAME`` (``make demo MODEL_NAME=gpt-4o-mini``) with ``OPENAI_API_KEY`` set uses
a real model instead, OpenAI's or, with ``OPENAI_BASE_URL`` set, any OpenAI-compatible
server (llama.cpp, Ollama, vLLM, LM Studio; any key); token counts then come from the usage
Langflow stores on the Agent's message. A slow local model wants a smaller run
(``--filler-turns``), a small Agent Max Tokens (``--agent-max-tokens``) and its context
window declared (``--context-window``).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from benchmarks import conversation
from benchmarks.app import LangflowApp, langflow_app
from benchmarks.inprocess import FOLD_EVENT
from langflow_session_memory.bundled_server.fake_openai import (
    FakeModelConfig,
    RunningServer,
    estimate_prompt_tokens,
    run_in_thread,
)
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY

FILLER_TURNS = 60
FOLD_BATCH = DEFAULT_POLICY.batch_size
CONFIGURATIONS = (("switch off, N=10", False, 10), ("switch off, N=100", False, 100), ("switch on, N=10", True, 10))
DOCS = Path(__file__).resolve().parent.parent / "docs"


@dataclass(frozen=True)
class DemoRow:
    configuration: str
    last_turn_input_tokens: int
    last_turn_history_tokens: int | None  # the chat history alone: no system prompt, no question
    last_turn_folded: bool
    answer: str
    folds: int
    fold_latency_ms: float | None
    seconds_per_turn: float

    @property
    def recalled(self) -> bool:
        return conversation.recalled(self.answer)


def run_configuration(
    app: LangflowApp, server: RunningServer | None, flow: tuple[str, str], configuration, filler_turns: int
) -> DemoRow:
    """One session through one configuration; measures only its last turn, counts its folds."""
    (flow_id, agent_id), (label, summarize, n_messages) = flow, configuration
    session_id = f"demo-{uuid.uuid4()}"
    tweaks = {agent_id: {"summarize_older_messages": summarize, "n_messages": n_messages}}
    script = conversation.script(filler_turns, log_at=(filler_turns // 3,))
    app.log.read_events()
    started = time.perf_counter()
    for text in script[:-1]:
        app.run(flow_id, text, session_id, tweaks)
        app.settle_folds()
    before_requests, (before_folded, _) = len(server.requests()) if server else 0, app.state(session_id)
    app.run(flow_id, script[-1], session_id, tweaks)
    folded_in_turn = app.state(session_id)[0] != before_folded  # inside the turn: in its stored usage
    app.settle_folds()
    seconds_per_turn = (time.perf_counter() - started) / len(script)
    answer, usage = app.last_answer(session_id)
    history_tokens = None
    if server is not None:  # the model server's own count of the chat request(s), fold calls excluded
        chat = [r for r in server.requests()[before_requests:] if r["kind"] == "chat"]
        tokens = sum(r["prompt_tokens"] for r in chat)
        history_tokens = estimate_prompt_tokens(history_part(chat[0]["body"]["messages"]))
    else:  # a real model: what Langflow stored, which includes a fold made in this turn
        tokens = int(usage.get("input_tokens") or 0)
    latencies = [int(event["latency_ms"]) for event in app.log.read_events(FOLD_EVENT)]
    folded, _ = app.state(session_id)
    return DemoRow(
        configuration=label,
        last_turn_input_tokens=tokens,
        last_turn_history_tokens=history_tokens,
        last_turn_folded=folded_in_turn,
        answer=answer,
        folds=folded // FOLD_BATCH,
        fold_latency_ms=statistics.median(latencies) if latencies else None,
        seconds_per_turn=seconds_per_turn,
    )


def history_part(messages: list[dict]) -> list[dict]:
    """A chat request without its system prompt and its last message (the question): the history the Agent sent."""
    return [m for m in messages[:-1] if m.get("role") != "system"]


def table(rows: list[DemoRow], *, real_model: bool) -> str:
    tokens = "input tokens, last turn (stored usage)" if real_model else "input tokens, last turn's chat request"
    lines = [
        f"| configuration | {tokens} | of which chat history | answer | names PRJ-123 and EU | folds | "
        "fold latency ms, median |",
        "| --- | ---: | ---: | --- | --- | ---: | ---: |",
    ]
    for row in rows:
        marker = " (incl. a fold)" if real_model and row.last_turn_folded else ""
        latency = f"{row.fold_latency_ms:.0f}" if row.fold_latency_ms is not None else "-"
        answer = " ".join(row.answer.split()).replace("|", "/")
        answer = answer if len(answer) <= 160 else answer[:157] + "..."
        history = f"{row.last_turn_history_tokens:,}" if row.last_turn_history_tokens is not None else "-"
        lines.append(
            f"| {row.configuration} | {row.last_turn_input_tokens:,}{marker} | {history} | {answer} | "
            f"{'yes' if row.recalled else 'no'} | {row.folds} | {latency} |"
        )
    return "\n".join(lines)


def document(rows: list[DemoRow], *, model: str, real_model: bool, seconds: float, turns: int) -> str:
    by_label = {row.configuration: row for row in rows}
    stock, memory = by_label["switch off, N=100"], by_label["switch on, N=10"]
    saving = 1 - memory.last_turn_input_tokens / stock.last_turn_input_tokens if stock.last_turn_input_tokens else 0
    history_saving = ""
    if memory.last_turn_history_tokens is not None and stock.last_turn_history_tokens:
        fixed = memory.last_turn_input_tokens - memory.last_turn_history_tokens
        history_saving = (
            f" The chat history alone (the request without the Agent's system prompt and the question) was "
            f"{1 - memory.last_turn_history_tokens / stock.last_turn_history_tokens:.0%} smaller. The system prompt "
            f"and the question, {fixed:,} tokens, are sent unchanged in every request by both, so they bound the "
            f"saving on the whole request: at most {1 - fixed / stock.last_turn_input_tokens:.0%} here even with an "
            "empty history."
        )
    source = (
        f"the real OpenAI model `{model}`; tokens are the usage Langflow stored on the Agent's last message "
        "(`message.properties.usage`), which includes a fold made in that turn"
        if real_model
        else "the bundled deterministic model server (`langflow_session_memory/bundled_server/fake_openai.py`), which "
        "answers a recall question only with facts present in the request; tokens are its count of the last "
        "turn's chat request (`ceil(chars/4) + 4` per message), fold calls excluded"
    )
    return "\n".join(
        [
            f"# Demo: does the first message survive {turns} turns?",
            "",
            "Produced by `make demo` (`python -m benchmarks.demo`); `make demo MODEL_NAME=gpt-4o-mini` with "
            "`OPENAI_API_KEY` set runs the same against the real model.",
            "",
            "The real Langflow app runs in-process (`TestClient(create_app())`, this extension installed as a user "
            "installs it) on a fresh SQLite database. One flow (Chat Input -> Session Memory Agent -> Chat Output); "
            "one session per configuration, set per run through tweaks (`summarize_older_messages`, `n_messages`) "
            'on `/api/v1/run`. Each session: "Our project is PRJ-123 on the EU cluster.", then '
            f"{turns} filler turns (turn {turns // 3 + 2} pastes a ~5,000-character log), then "
            f'"Which cluster and project were we on?". Model: {source}. Folds are '
            "`session_memory_state.folded_count / 20`; fold latency is the median `latency_ms` of the "
            "`session_summary_fold` lines in Langflow's log. Folding happens inside "
            "the turn, on the Agent's own model.",
            "",
            table(rows, real_model=real_model),
            "",
            *(
                []
                if real_model
                else [
                    "When one sentence of the request holds the question's key words (cluster, project), the "
                    "bundled server answers with that sentence's fact tokens (IDs, upper-case words); otherwise with "
                    "those of the sentences sharing the most of them, and `I don't know.` when none shares one "
                    "(docs/model-server.md). PRJ-123 and EU are said in the first message only.",
                    "",
                ]
            ),
            f"At the recall turn the switch on at N=10 sent {saving:.0%} fewer input tokens than the switch off "
            f"at N=100{', and still named both facts' if memory.recalled else ''}.{history_saving} Through the full "
            "app a turn "
            f"took {statistics.mean(row.seconds_per_turn for row in rows):.2f} s on average here; the whole demo "
            f"took {seconds:.0f} s.",
            "",
        ]
    )


def agent_inputs(arguments) -> dict:
    """The Agent settings given on the command line (``--agent-max-tokens``, ``--context-window``)."""
    given = {"max_tokens": arguments.agent_max_tokens, "context_window_tokens": arguments.context_window}
    return {name: value for name, value in given.items() if value is not None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        help="a real model (needs OPENAI_API_KEY; OPENAI_BASE_URL points at any OpenAI-compatible server such as "
        "llama.cpp or Ollama); default: the bundled server",
    )
    parser.add_argument("--filler-turns", type=int, default=FILLER_TURNS, help="filler turns between fact and question")
    parser.add_argument("--agent-max-tokens", type=int, help="the Agent's Max Tokens (a slow local model: e.g. 64)")
    parser.add_argument("--context-window", type=int, help="the model's context window, declared on the Agent")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where demo.md goes")
    arguments = parser.parse_args(argv)
    real_model = bool(arguments.model)
    if real_model and not os.environ.get("OPENAI_API_KEY"):
        parser.error(
            "--model (make demo MODEL_NAME=...) talks to a real model: it needs OPENAI_API_KEY (any value locally)"
        )
    started = time.perf_counter()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-demo-", ignore_cleanup_errors=True)))
        server = None if real_model else stack.enter_context(run_in_thread(FakeModelConfig()))
        url = f"sqlite:///{folder / 'langflow.db'}"
        app = stack.enter_context(langflow_app(url, model_base_url=server.base_url if server else None))
        flow = app.create_flow(arguments.model or "gpt-4o-mini", agent_inputs=agent_inputs(arguments))
        rows = []
        for configuration in CONFIGURATIONS:
            print(f"running {configuration[0]} ...", flush=True)  # noqa: T201
            rows.append(run_configuration(app, server, flow, configuration, arguments.filler_turns))
    seconds = time.perf_counter() - started
    print(table(rows, real_model=real_model))  # noqa: T201
    arguments.docs.mkdir(parents=True, exist_ok=True)
    target = arguments.docs / "demo.md"
    text = document(
        rows, model=arguments.model or "", real_model=real_model, seconds=seconds, turns=arguments.filler_turns
    )
    target.write_text(text, encoding="utf-8")
    print(f"\nwrote {target} in {seconds:.0f} s")  # noqa: T201


if __name__ == "__main__":
    sys.exit(main())
