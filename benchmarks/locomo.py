"""``make eval-locomo``: what the Agent recalls of a real long conversation (LoCoMo), on a real model.

A conversation of LoCoMo (two people talking about their lives over many sittings; ``benchmarks/data/locomo``,
its source and licence in the README there) is stored in one Langflow session as Langflow stores a chat: the first
speaker's turns as the user's, the second's as the Agent's, each at its sitting's date. Then questions of the
dataset whose answering turns lie before the newest 100 messages are asked, each in other words than it was said
(the dataset's own questions), one after the other, to three configurations through the real app
(``benchmarks.app``): the stock Agent at N=10, the switch on at N=10 with its defaults, and an oracle (the stock
Agent at N=10 in a session holding only the turns that answer, the model's own ceiling).

Per question: whether the turns that answer were among the older messages quoted (the full-text index's
passages, read with the turn's own code just before it is asked: retrieval recall), and the answer's token F1
against the dataset's answer (SQuAD's normalisation). Results go into docs/eval.md's LoCoMo section.
"""

import argparse
import json
import os
import re
import statistics
import string
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks import sections
from benchmarks.app import LangflowApp, langflow_app
from benchmarks.eval import Configuration
from benchmarks.inprocess import FOLD_EVENT, PROBLEM_EVENTS
from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.state import SessionKey

DATA = Path(__file__).resolve().parent / "data" / "locomo"
DOCS = Path(__file__).resolve().parent.parent / "docs"
REPORT = "eval.md"
MARKER = "<!-- benchmarks.locomo: real model -->"
OLDER_THAN = 100
SALVAGED_EVENT = log_events.SALVAGED.name
# Single-hop (4) and multi-hop (1) questions: the answer was said; temporal (2), open-domain (3) and adversarial (5)
# ones ask for a date computed, an inference or a refusal.
CATEGORIES = (4, 1)
PROMPT = "Answer in a few words from our conversation: {question}"
DATE = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) (\w+), (\d{4})")
CONFIGURATIONS = (
    Configuration("stock Agent, N=10", 10, session_memory=False),
    Configuration("switch on, N=10, defaults", 10, session_memory=True, search=True),
)
ORACLE = Configuration("oracle: only the turns that answer, stock Agent, N=10", 10, session_memory=False)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    timestamp: datetime


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    name: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


@dataclass
class Result:
    configuration: Configuration
    answers: list[str] = field(default_factory=list)
    quoted: list[bool | None] = field(default_factory=list)
    turn_seconds: list[float] = field(default_factory=list)
    # With the switch on: messages folded after the first turn, of those older than the window; every fold and
    # salvage; each problem event (a failed fold, a pause, a fallback) by name, over the whole run.
    folded_first: tuple[int, int] | None = None
    folds: int = 0
    salvaged: int = 0
    problems: Counter = field(default_factory=Counter)

    def folding(self) -> str:
        if self.folded_first is None:
            return "-"
        folded, older = self.folded_first
        problems = ", ".join(f"{name} {count}" for name, count in sorted(self.problems.items())) or "none"
        salvaged = f"{self.folds} folds, {self.salvaged} salvaged"
        return f"{folded}/{older} folded after turn 1; {salvaged}; problems: {problems}"

    def f1(self, conversation: Conversation) -> float:
        return statistics.mean(token_f1(a, q.answer) for a, q in zip(self.answers, conversation.questions, strict=True))


def sitting_start(text: str) -> datetime:
    hour, minute, half, day, month, year = DATE.search(text).groups()
    parsed = datetime.strptime(
        f"{int(hour) % 12 + (12 if half == 'pm' else 0)}:{minute} {day} {month} {year}", "%H:%M %d %B %Y"
    )
    return parsed.replace(tzinfo=UTC)


def load(name: str, most: int) -> Conversation:
    """A conversation's turns, one minute apart from each sitting's start (an image shared is told by its caption),
    and its first ``most`` questions of :data:`CATEGORIES` answered by turns older than the newest 100."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    turns = []
    sitting = 1
    while f"session_{sitting}" in data:
        start = sitting_start(data[f"session_{sitting}_date_time"])
        for offset, said in enumerate(data[f"session_{sitting}"]):
            text = said["text"] + (f" [shares a photo: {said['blip_caption']}]" if said.get("blip_caption") else "")
            turns.append(Turn(said["dia_id"], said["speaker"], text, start + timedelta(minutes=offset)))
        sitting += 1
    older = {turn.dia_id for turn in turns[: len(turns) - OLDER_THAN]}
    questions = [
        Question(qa["question"], str(qa["answer"]), tuple(qa["evidence"]))
        for qa in data["qa"]
        if qa["category"] in CATEGORIES and qa.get("evidence") and set(qa["evidence"]) <= older
    ]
    return Conversation(name, (data["speaker_a"], data["speaker_b"]), turns, questions[:most])


def normalised_tokens(text: str) -> list[str]:
    """SQuAD's normalisation: lower case, no punctuation, no articles."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return [word for word in text.split() if word not in {"a", "an", "the"}]


def token_f1(answer: str, expected: str) -> float:
    got, wanted = normalised_tokens(answer), normalised_tokens(expected)
    common = sum((Counter(got) & Counter(wanted)).values())
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def store(app: LangflowApp, flow_id: str, session_id: str, conversation: Conversation, turns: list[Turn]) -> dict:
    """``turns`` as Langflow stores a chat (the first speaker as the user); the message id of each turn."""
    said = [
        ("User" if turn.speaker == conversation.speakers[0] else "Machine", turn.speaker, turn.text, turn.timestamp)
        for turn in turns
    ]
    return dict(zip((turn.dia_id for turn in turns), app.store_messages(flow_id, session_id, said), strict=True))


def quoted_before_asking(app: LangflowApp, flow_id: str, session_id: str, question: str, ids: list) -> bool | None:
    """Whether the passages the turn's own code finds for ``question`` now (the window of the question's turn: the
    newest 9 stored and the question) quote one of ``ids`` (a turn that answers); None where the index cannot
    answer yet."""
    from langflow_session_memory.services.session_memory.runtime import get_session_memory_service
    from langflow_session_memory.services.session_memory.storage import messages

    key = SessionKey(flow_id=uuid.UUID(flow_id), owner_id=app.owner(flow_id), session_id=session_id)
    service = get_session_memory_service()

    async def passages():
        async with service.sessions() as session:
            before = await messages.window_start(session, key, 9, input_message_id=None)
        return await service.retrieval.passages_before(key, question, before=before, tokens=RETRIEVAL.passage_tokens)

    found = app.http.portal.call(passages)
    return None if found is None else bool(set(ids) & {line.message_id for line in found})


def timed_turn(app: LangflowApp, result: Result, flow_id: str, text: str, session_id: str, tweaks: dict) -> str:
    started = time.perf_counter()
    app.run(flow_id, text, session_id, tweaks)
    result.turn_seconds.append(time.perf_counter() - started)
    app.settle_folds()  # a user reads the answer before writing again; the fold and indexing after it land
    return app.last_answer(session_id)[0]


def run_configuration(app: LangflowApp, flow: tuple[str, str], configuration: Configuration, conversation) -> Result:
    """The whole conversation in one session, a first turn of small talk (with the switch on, it indexes the older
    messages and folds what the policy folds), then the questions one after the other."""
    flow_id, agent_id = flow
    session_id = f"locomo-{uuid.uuid4()}"
    tweaks = {agent_id: configuration.tweaks()}
    ids = store(app, flow_id, session_id, conversation, conversation.turns)
    result = Result(configuration)
    app.log.read_events()
    timed_turn(app, result, flow_id, "Hi again! I have a few questions about what we talked about.", session_id, tweaks)
    result.turn_seconds.clear()
    if configuration.session_memory:
        result.folded_first = (app.state(session_id)[0], len(ids) - configuration.n_messages)
    for question in conversation.questions:
        prompt = PROMPT.format(question=question.text)
        if configuration.session_memory:
            evidence = [ids[dia_id] for dia_id in question.evidence if dia_id in ids]
            result.quoted.append(quoted_before_asking(app, flow_id, session_id, prompt, evidence))
        result.answers.append(timed_turn(app, result, flow_id, prompt, session_id, tweaks))
    events = app.log.read_events()
    result.folds = sum(event["event"] == FOLD_EVENT for event in events)
    result.salvaged = sum(event["event"] == SALVAGED_EVENT for event in events)
    result.problems = Counter(event["event"] for event in events if event["event"] in PROBLEM_EVENTS)
    return result


def run_oracle(app: LangflowApp, flow: tuple[str, str], conversation: Conversation) -> Result:
    """Each question in a session of its own holding only the turns that answer it (the model's ceiling)."""
    flow_id, agent_id = flow
    result = Result(ORACLE)
    by_id = {turn.dia_id: turn for turn in conversation.turns}
    for question in conversation.questions:
        session_id = f"locomo-oracle-{uuid.uuid4()}"
        store(app, flow_id, session_id, conversation, [by_id[d] for d in question.evidence if d in by_id])
        prompt = PROMPT.format(question=question.text)
        result.answers.append(timed_turn(app, result, flow_id, prompt, session_id, {agent_id: ORACLE.tweaks()}))
    return result


def section(results: list[Result], conversations: list[Conversation], *, name: str, seconds: float) -> str:
    lines = [
        MARKER,
        "## A real long conversation: LoCoMo on a real model (`make eval-locomo`)",
        "",
        f"{name}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min. Conversations of LoCoMo "
        "(Maharana et al., 2024; `benchmarks/data/locomo`, CC BY-NC 4.0) stored in one session each, the first "
        f"speaker as the user; their first single- and multi-hop questions whose answering turns are older than the "
        f"newest {OLDER_THAN} messages, asked as `{PROMPT}` after one turn of small talk. *Quoted*: a turn that "
        "answers was among the older messages the turn quoted (the full-text index's passages, read with the "
        "turn's code just before it is asked). F1: SQuAD's token F1 against the dataset's answer.",
        "",
        "| conversation | messages | questions | configuration | token F1 | of the oracle's | quoted "
        "| turn s, median |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    per = len(results) // len(conversations)
    for index, conversation in enumerate(conversations):
        chunk = results[index * per : (index + 1) * per]
        oracle = chunk[-1].f1(conversation)
        for result in chunk:
            f1 = result.f1(conversation)
            known = [q for q in result.quoted if q is not None]
            quoted = f"{sum(known)}/{len(result.quoted)}" if known else "-"
            share = f"{f1 / oracle:.0%}" if oracle else "-"
            lines.append(
                f"| {conversation.name} | {len(conversation.turns)} | {len(conversation.questions)} | "
                f"{result.configuration.label} | {f1:.2f} | {share} | {quoted} | "
                f"{statistics.median(result.turn_seconds):.1f} |"
            )
    lines += ["", "Folding with the switch on (Langflow's log over the configuration's run):", ""]
    for index, conversation in enumerate(conversations):
        for result in results[index * per : (index + 1) * per]:
            if result.folded_first is not None:
                lines.append(f"- conversation {conversation.name}: {result.folding()}")
    for index, conversation in enumerate(conversations):
        chunk = results[index * per : (index + 1) * per]
        lines += [
            "",
            f"Conversation {conversation.name}, question by question (answer, F1; ✓ quoted):",
            "",
            "| question | expected | " + " | ".join(r.configuration.label for r in chunk) + " |",
            "| --- | --- |" + " --- |" * len(chunk),
        ]
        for row, question in enumerate(conversation.questions):
            cells = []
            for result in chunk:
                mark = {True: " ✓", False: " ✗", None: ""}[result.quoted[row] if result.quoted else None]
                text = " ".join(result.answers[row].split())[:60].replace("|", "/")
                cells.append(f"{text} ({token_f1(result.answers[row], question.answer):.2f}){mark}")
            lines.append(f"| {question.text} | {question.answer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o-mini", help="the model name the OpenAI provider sends")
    parser.add_argument("--model-name", help="the model as docs/eval.md names it")
    parser.add_argument("--server-log", type=Path, help="given by the real-model tier to every benchmark; unread")
    parser.add_argument("--agent-max-tokens", type=int, default=64)
    parser.add_argument("--context-window", type=int)
    parser.add_argument("--conversation", action="append", help="26, 30 (default: 26)")
    parser.add_argument("--questions", type=int, default=15)
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    arguments = parser.parse_args(argv)
    if not os.environ.get("OPENAI_API_KEY"):
        parser.error("needs OPENAI_API_KEY (any value for a local server) and OPENAI_BASE_URL")
    conversations = [load(name, arguments.questions) for name in arguments.conversation or ["26"]]
    inputs = {"max_tokens": arguments.agent_max_tokens}
    if arguments.context_window:
        inputs["context_window_tokens"] = arguments.context_window
    started = time.perf_counter()
    results = []
    with ExitStack() as stack:
        folder = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-locomo-", ignore_cleanup_errors=True))
        )
        app = stack.enter_context(langflow_app(f"sqlite:///{folder / 'langflow.db'}", model_base_url=None))
        flows = {
            memory: app.create_flow(arguments.model, session_memory=memory, agent_inputs=inputs)
            for memory in (False, True)
        }
        for conversation in conversations:
            for configuration in (*CONFIGURATIONS, ORACLE):
                print(f"conversation {conversation.name}: {configuration.label} ...", flush=True)  # noqa: T201
                flow = flows[configuration.session_memory]
                if configuration is ORACLE:
                    result = run_oracle(app, flow, conversation)
                else:
                    result = run_configuration(app, flow, configuration, conversation)
                print(  # noqa: T201
                    f"  F1 {result.f1(conversation):.2f}, quoted {result.quoted}, "
                    f"median turn {statistics.median(result.turn_seconds):.1f} s; folding: {result.folding()}",
                    flush=True,
                )
                results.append(result)
    text = section(
        results, conversations, name=arguments.model_name or arguments.model, seconds=time.perf_counter() - started
    )
    print(text)  # noqa: T201
    if not arguments.no_write:
        sections.replace(arguments.docs / REPORT, MARKER, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
