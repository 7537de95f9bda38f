"""``make eval``: does the Agent still know 40 facts planted across 285 turns? Recall, tokens and time, three ways.

Runs the real Langflow app in-process (``benchmarks/app.py``: ``TestClient(create_app())``
and ``/api/v1/run``) on a fresh SQLite database. One scripted session per configuration:
240 filler turns (six of them ~5,000-character pasted logs) with 40 distinct facts planted
at spread-out points ("The badge code of team 13 is BADGE-1000."), 5 of them changed later
("Change: team 13 has a new badge code, BADGE-5000."), then 45 questions: one per fact (a
changed fact must get its new value and not its old one) and one per change ("What is the
new badge code of team 13?"), in a fixed shuffled order.

Configurations: Langflow's stock Agent at N=100; the Session Memory Agent with Summarize
Older Messages on at N=10 with ``search_older_messages`` off (the summary alone) and on
(the Agent may call ``search_earlier_messages``), set through tweaks on one flow.

By default the model is the bundled deterministic server, so the run measures what reaches
the model: it answers only from facts in the request, and searches when it finds none. It
also reports the cached prompt tokens OpenAI's documented caching would give each request
(``langflow_session_memory/bundled_server/prompt_cache.py``), from which the input is billed at
gpt-4o's, gpt-4.1's and gpt-5's cached-input rates; every configuration starts with an empty
cache. The stock Agent and the switch on with search then run again on Langflow's Anthropic
provider, against the same server's Messages API, which caches by Anthropic's rules at the
breakpoints a request marks and reports what it read and wrote (``--no-anthropic`` leaves that
run out). ``--model NAME`` (``make eval MODEL_NAME=gpt-4o-mini``) uses a real OpenAI-compatible model
with the usual ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``; tokens are then the usage Langflow
stores, which holds no cached tokens, so nothing is billed.
"""

import argparse
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks import cache_options, conversation, sections
from benchmarks.app import LangflowApp, langflow_app
from benchmarks.demo import agent_inputs
from benchmarks.inprocess import FOLD_EVENT
from langflow_session_memory.bundled_server.fake_openai import (
    SEARCH_TOOL,
    FakeModelConfig,
    RunningServer,
    estimate_prompt_tokens,
    run_in_thread,
)
from langflow_session_memory.bundled_server.prompt_cache import RATES, InputTokens, billed_input

DOCS = Path(__file__).resolve().parent.parent / "docs"
REPORT = "eval.md"
FIGURE = "eval.png"
RECALL_TARGET = 0.95
TOKEN_TARGET = 0.5
# Issue 21: billed input with search against the stock Agent's, at two providers' cached-input rates.
BILLED_TARGETS = {"gpt-5": 0.15, "gpt-4o": 0.45}
BILLED_RATES = ("gpt-4o", "gpt-4.1", "gpt-5")
REQUEST_KINDS = ("chat requests", "search follow-ups", "fold calls")
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"  # Langflow's Anthropic list; caches prefixes from 1,024 tokens


@dataclass(frozen=True)
class Size:
    """How much conversation one configuration replays."""

    facts: int
    updates: int
    filler_turns: int
    logs: int


FULL = Size(facts=40, updates=5, filler_turns=240, logs=6)
QUICK = Size(facts=30, updates=3, filler_turns=60, logs=2)

# What a fact is about: (attribute, thing, value prefix); the owner's value is a name instead.
KINDS = (
    ("badge code", "team", "BADGE"),
    ("gateway address", "site", "GW"),
    ("pager number", "squad", "PGR"),
    ("invoice number", "customer", "INV"),
    ("owner", "service", None),
    ("license key", "tool", "LIC"),
    ("parking spot", "van", "LOT"),
    ("release tag", "module", "REL"),
)
NAMES = ("MARGOT", "IGNATZ", "BEATRIX", "CASIMIR", "DOROTHEA", "FENELLA", "GODFREY", "HORATIO", "ISOLDE", "LEOPOLD")
MAX_FACTS = len(KINDS) * len(NAMES) // 2


@dataclass(frozen=True)
class Fact:
    """One planted fact, its question, and (for a changed fact) the change and its own question."""

    statement: str
    question: str
    value: str
    change: str | None = None
    change_question: str | None = None
    new_value: str | None = None


@dataclass(frozen=True)
class Question:
    """A question asked after the planting, and the value a right answer names."""

    text: str
    expected: str
    stale: str | None  # the replaced value, which a correct answer must not name

    def answered_by(self, answer: str) -> bool:
        return _names(answer, self.expected) and not (self.stale and _names(answer, self.stale))


def _names(answer: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", answer) is not None


def facts(size: Size) -> list[Fact]:
    """``size.facts`` distinct facts; ``size.updates`` of them, spread over the list and its kinds, change later."""
    changed = {i * size.facts // size.updates + i for i in range(size.updates)}
    planted = []
    for i in range(size.facts):
        attribute, thing, prefix = KINDS[i % len(KINDS)]
        number = 13 + 3 * i
        rank = i // len(KINDS)
        value, new_value = (
            (NAMES[rank], NAMES[-1 - rank])
            if prefix is None
            else (f"{prefix}-{1000 + 7 * i}", f"{prefix}-{5000 + 7 * i}")
        )
        fact = Fact(
            statement=f"The {attribute} of {thing} {number} is {value}.",
            question=f"What is the {attribute} of {thing} {number}?",
            value=value,
        )
        if i in changed:
            fact = replace(
                fact,
                change=f"Change: {thing} {number} has a new {attribute}, {new_value}.",
                change_question=f"What is the new {attribute} of {thing} {number}?",
                new_value=new_value,
            )
        planted.append(fact)
    return planted


def script(size: Size) -> tuple[list[str], list[Question]]:
    """The user messages of one session (fillers, logs, facts, changes, then questions) and what each question
    expects. Facts go in at evenly spread filler positions; each change comes halfway between its fact and the
    end of the filler."""
    planted = facts(size)
    log = conversation.pasted_log()
    logs_at = {round((k + 0.5) * size.filler_turns / size.logs) for k in range(size.logs)}
    at: dict[int, list[str]] = {}
    for i, fact in enumerate(planted):
        position = i * size.filler_turns // size.facts
        at.setdefault(position, []).append(fact.statement)
        if fact.change:
            at.setdefault((position + size.filler_turns) // 2, []).append(fact.change)
    turns = []
    for position in range(size.filler_turns):
        turns.append(log if position in logs_at else conversation.filler(position))
        turns += at.get(position, [])
    questions = [Question(f.question, f.new_value or f.value, f.value if f.new_value else None) for f in planted]
    questions += [Question(f.change_question, f.new_value, f.value) for f in planted if f.change]
    random.Random(14).shuffle(questions)
    return turns, questions


@dataclass(frozen=True)
class Configuration:
    """An Agent under test: the stock one, or ours with the switch on, searching or not."""

    label: str
    n_messages: int
    session_memory: bool
    search: bool = False

    def tweaks(self) -> dict:
        if not self.session_memory:
            return {"n_messages": self.n_messages}
        return {"n_messages": self.n_messages, "summarize_older_messages": True, "search_older_messages": self.search}


CONFIGURATIONS = (
    Configuration("stock Agent, N=100", 100, session_memory=False),
    Configuration("switch on, N=10, search off", 10, session_memory=True),
    Configuration("switch on, N=10, search on", 10, session_memory=True, search=True),
)
# On Anthropic, only the cost differs (the server answers alike): the stock Agent and the switch on with search.
ANTHROPIC_CONFIGURATIONS = (CONFIGURATIONS[0], CONFIGURATIONS[2])
# On a real model: the stock Agent with the whole session in view and with the same N as ours. Search off: a small
# local model (Qwen2.5-Coder 1.5B) calls a tool for nearly every message once one is offered, and calls it again
# after its result, so every turn would run to Max Iterations (docs/real-model.md).
REAL_MODEL_CONFIGURATIONS = (
    CONFIGURATIONS[0],
    Configuration("stock Agent, N=10", 10, session_memory=False),
    CONFIGURATIONS[1],
)
REAL_MODEL_MARKER = "<!-- benchmarks.eval: real model -->"


@dataclass
class Result:
    """One configuration's session: per turn its seconds, input and cached tokens, per question its answer."""

    configuration: Configuration
    turn_seconds: list[float] = field(default_factory=list)
    turn_input_tokens: list[int] = field(default_factory=list)
    turn_cached_tokens: list[int] = field(default_factory=list)  # bundled server only
    question_input_tokens: int = 0
    answers: list[tuple[Question, str]] = field(default_factory=list)
    folds: int = 0
    searches: int = 0
    token_parts: Counter = field(default_factory=Counter)  # bundled server only: see ``TOKEN_PARTS``
    request_tokens: Counter = field(default_factory=Counter)  # bundled server only: input per ``REQUEST_KINDS``
    cached_tokens: Counter = field(default_factory=Counter)  # bundled server only: cached per ``REQUEST_KINDS``
    written_tokens: Counter = field(default_factory=Counter)  # Anthropic route only: written per ``REQUEST_KINDS``
    requests: list[dict] = field(default_factory=list)  # bundled server only: every request served, in order
    served_between: tuple[float, float] = (0.0, 0.0)  # wall-clock start and end of the session, for a server's log

    @property
    def correct(self) -> int:
        return sum(question.answered_by(answer) for question, answer in self.answers)

    @property
    def accuracy(self) -> float:
        return self.correct / len(self.answers) if self.answers else 0.0

    @property
    def changed_correct(self) -> tuple[int, int]:
        changed = [(q, a) for q, a in self.answers if q.stale]
        return sum(q.answered_by(a) for q, a in changed), len(changed)

    @property
    def input_tokens(self) -> int:
        return sum(self.turn_input_tokens)

    @property
    def cached_share(self) -> float:
        return self.cached_tokens.total() / self.input_tokens if self.input_tokens else 0.0

    @property
    def served(self) -> InputTokens:
        """The session's input by how it was served: read from the cache, written to it, neither."""
        read, written = self.cached_tokens.total(), self.written_tokens.total()
        return InputTokens(uncached=self.input_tokens - read - written, cache_read=read, cache_write=written)

    def billed(self, rate: str) -> float:
        """The session's input billed at ``rate`` (``RATES``), in uncached-token equivalents."""
        return billed_input(self.served, RATES[rate])


TOKEN_PARTS = ("system prompt", "history and question", "tool definitions", "search follow-ups", "fold calls")


def request_token_parts(record: dict) -> Counter:
    """Where a request's input tokens went: the bundled server's estimate of its messages, split by what they are,
    plus ``ceil(chars/4)`` of the tool definitions sent (the server's own estimate counts messages only)."""
    messages, tools = record["body"]["messages"], record["body"].get("tools")
    parts = Counter({"tool definitions": math.ceil(len(json.dumps(tools)) / 4) if tools else 0})
    if record["kind"] == "summary":
        parts["fold calls"] = record["prompt_tokens"]
    elif messages and messages[-1].get("role") == "tool":
        parts["search follow-ups"] = record["prompt_tokens"]
    else:
        system = estimate_prompt_tokens([m for m in messages if m.get("role") == "system"])
        parts.update({"system prompt": system, "history and question": record["prompt_tokens"] - system})
    return parts


def request_kind(record: dict) -> str:
    if record["kind"] == "summary":
        return "fold calls"
    messages = record["body"]["messages"]
    return "search follow-ups" if messages and messages[-1].get("role") == "tool" else "chat requests"


def request_cache(record: dict) -> InputTokens:
    """A request's input tokens by how they were served. On the OpenAI route: ``request_token_parts`` and, read
    from the cache, the server's ``cached_tokens`` plus the tool definitions when there is a hit, since they come
    first in the prefix and the server counts no tokens for them. On the Anthropic route: as the server reported
    them (tools included, read and written apart)."""
    if record["api"] == "anthropic":
        read, written = record["cached_tokens"], record["cache_write_tokens"]
        return InputTokens(uncached=record["prompt_tokens"] - read - written, cache_read=read, cache_write=written)
    tools = request_token_parts(record)["tool definitions"]
    cached = record["cached_tokens"]
    read = cached + tools if cached else 0
    return InputTokens(uncached=record["prompt_tokens"] + tools - read, cache_read=read)


def run_configuration(
    app: LangflowApp, server: RunningServer | None, flow: tuple[str, str], configuration: Configuration, size: Size
) -> Result:
    """Replay the script in a new session; with the bundled server, tokens and calls come from its request log,
    and its prompt cache starts empty, as for a session with nothing cached before it."""
    flow_id, agent_id = flow
    session_id = f"eval-{uuid.uuid4()}"
    tweaks = {agent_id: configuration.tweaks()}
    turns, questions = script(size)
    result = Result(configuration)
    started_at = time.time()
    app.log.read_events()
    if server:
        server.clear_prompt_cache()
    seen = len(server.requests()) if server else 0
    for index, text in enumerate([*turns, *(q.text for q in questions)]):
        started = time.perf_counter()
        app.run(flow_id, text, session_id, tweaks)
        result.turn_seconds.append(time.perf_counter() - started)
        app.settle_folds()  # a user reads the answer before the next message; the fold after it lands
        asked = questions[index - len(turns)] if index >= len(turns) else None
        answer, usage = app.last_answer(session_id) if asked or not server else ("", {})
        if server:
            records = server.requests()[seen:]
            seen += len(records)
            served = [r for r in records if r["status"] == 200]
            result.requests += served
            result.token_parts.update(sum((request_token_parts(r) for r in served), Counter()))
            caches = [(request_kind(r), request_cache(r)) for r in served]
            for kind, tokens_served in caches:
                result.request_tokens[kind] += tokens_served.total
                result.cached_tokens[kind] += tokens_served.cache_read
                result.written_tokens[kind] += tokens_served.cache_write
            tokens = sum(tokens_served.total for _, tokens_served in caches)
            result.turn_cached_tokens.append(sum(tokens_served.cache_read for _, tokens_served in caches))
            result.searches += sum(r["tool_query"] is not None for r in records)
        else:
            tokens = int(usage.get("input_tokens") or 0)
        result.turn_input_tokens.append(tokens)
        if asked:
            result.question_input_tokens += tokens
            result.answers.append((asked, answer))
    result.folds = len(app.log.read_events(FOLD_EVENT))
    result.served_between = (started_at, time.time())
    if not server:
        result.searches = searches_stored(app, session_id)
    return result


def searches_stored(app: LangflowApp, session_id: str) -> int:
    """Calls of the search tool among the Agent steps Langflow stored with the session's answers."""
    rows = app.sql("SELECT content_blocks FROM message WHERE session_id = :s AND sender = 'Machine'", s=session_id)
    blocks = [json.loads(row[0]) if isinstance(row[0], str) else row[0] or [] for row in rows]
    return sum(
        1
        for message in blocks
        for block in message
        for content in block.get("contents", [])
        if content.get("type") == "tool_use" and content.get("name") == SEARCH_TOOL
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


def billed_ratio(result: Result, stock: Result, rate: str) -> float:
    return result.billed(rate) / stock.billed(rate)


def cache_cells(result: Result, stock: Result) -> list[str]:
    """Served from cache and billed input against the stock Agent at each rate."""
    return [f"{result.cached_share:.0%}", *(f"{billed_ratio(result, stock, rate):.2f}x" for rate in BILLED_RATES)]


def table(results: list[Result]) -> str:
    stock = results[0]
    billed_headers = " | ".join(f"billed input vs stock, {rate}" for rate in BILLED_RATES)
    lines = [
        "| configuration | recall | changed facts (new value, not the old) | input tokens, session | vs stock | "
        f"served from cache | {billed_headers} | input tokens, questions | fold calls | search calls | "
        "turn s, median | turn s, p95 |",
        "| --- |" + " ---: |" * (10 + len(BILLED_RATES)),
    ]
    for r in results:
        changed, asked = r.changed_correct
        lines.append(
            f"| {r.configuration.label} | {r.correct}/{len(r.answers)} ({r.accuracy:.0%}) | {changed}/{asked} | "
            f"{r.input_tokens:,} | {r.input_tokens / stock.input_tokens:.2f}x | "
            f"{' | '.join(cache_cells(r, stock))} | {r.question_input_tokens:,} | {r.folds} | "
            f"{r.searches} | {statistics.median(r.turn_seconds):.2f} | {percentile(r.turn_seconds, 0.95):.2f} |"
        )
    return "\n".join(lines)


def token_table(results: list[Result]) -> str:
    """Where each configuration's input tokens went (bundled server only)."""
    lines = [f"| configuration | {' | '.join(TOKEN_PARTS)} | total |", "| --- |" + " ---: |" * (len(TOKEN_PARTS) + 1)]
    for r in results:
        cells = " | ".join(f"{r.token_parts[part]:,}" for part in TOKEN_PARTS)
        lines.append(f"| {r.configuration.label} | {cells} | {r.input_tokens:,} |")
    return "\n".join(lines)


def token_notes(results: list[Result]) -> str:
    stock, _, search = results
    searching = search.token_parts["tool definitions"] + search.token_parts["search follow-ups"]
    return (
        f"The Agent's system prompt goes unchanged with every chat request in every configuration: "
        f"{stock.token_parts['system prompt']:,} of the stock Agent's {stock.input_tokens:,} tokens here "
        f"({stock.token_parts['system prompt'] / stock.input_tokens:.0%}), which no summary can shrink. Searching "
        f"cost {searching:,} tokens ({searching / stock.input_tokens:.0%} of the stock Agent's total): the tool's "
        f"definition in every request ({search.token_parts['tool definitions']:,}) and the {search.searches} "
        f"follow-up requests carrying its results ({search.token_parts['search follow-ups']:,})."
    )


def cache_table(results: list[Result]) -> str:
    """Input and cached tokens by request kind, so folds' cache hits show apart from the chat's (bundled server)."""
    headers = " | ".join(f"{kind}: input | {kind}: from cache" for kind in REQUEST_KINDS)
    lines = [
        f"| configuration | {headers} | all: from cache |",
        "| --- |" + " ---: |" * (2 * len(REQUEST_KINDS) + 1),
    ]
    for r in results:
        cells = " | ".join(
            f"{r.request_tokens[kind]:,} | {r.cached_tokens[kind]:,} ({share(r, kind)})" for kind in REQUEST_KINDS
        )
        lines.append(f"| {r.configuration.label} | {cells} | {r.cached_share:.0%} |")
    return "\n".join(lines)


def share(result: Result, kind: str) -> str:
    whole = result.request_tokens[kind]
    return f"{result.cached_tokens[kind] / whole:.0%}" if whole else "-"


def cached_share_of_turns(result: Result, turns: slice) -> float:
    return sum(result.turn_cached_tokens[turns]) / max(sum(result.turn_input_tokens[turns]), 1)


def cache_notes(results: list[Result]) -> str:
    stock, summary_only, search = results
    ratios = {rate: billed_ratio(search, stock, rate) for rate in BILLED_RATES}
    filled = stock.configuration.n_messages // 2  # turns until the stock Agent's window is full and slides
    return (
        "Cached tokens are the bundled server's `usage.prompt_tokens_details.cached_tokens`, which follows OpenAI's "
        "documented automatic caching (`langflow_session_memory/bundled_server/prompt_cache.py`, sources in its "
        "docstring): the longest prefix shared with an earlier request used within the last 5 minutes, from 1,024 "
        "tokens in 128-token steps, the model and the tool definitions first. Tool definitions count as served "
        "from cache when their request had a hit (they come first in its prefix). Each configuration starts with "
        "an empty cache; its turns follow one another within a second, so no prefix expires between them (a user "
        "who pauses longer than the cache keeps a prefix loses it in every configuration alike). Billed input is "
        "in uncached-token equivalents: uncached tokens + rate x cached tokens, the rate being the cached-input "
        "price over the input price: gpt-4o 0.5 ($1.25 / $2.50 per 1M), gpt-4.1 0.25 ($0.50 / $2.00), gpt-5 0.1 "
        "($0.125 / $1.25); none of them bills cache writes. "
        f"The stock Agent had {stock.cached_share:.0%} of its request tokens served from cache: "
        f"{cached_share_of_turns(stock, slice(None, filled)):.0%} in its first {filled} turns, while its window of "
        f"the newest {stock.configuration.n_messages} messages still grew, and "
        f"{cached_share_of_turns(stock, slice(filled, None)):.0%} after, once it slid every turn. The switch on "
        f"had {summary_only.cached_share:.0%} with the summary alone and {search.cached_share:.0%} with search; with "
        f"search its input is billed {ratios['gpt-5']:.2f}x the stock Agent's at gpt-5's rate, "
        f"{ratios['gpt-4.1']:.2f}x at gpt-4.1's and {ratios['gpt-4o']:.2f}x at gpt-4o's, against "
        f"{search.input_tokens / stock.input_tokens:.2f}x in tokens."
    )


def headline(results: list[Result], *, anthropic: list[Result] | None = None) -> str:
    stock, summary_only, search = results
    billed = (
        f" Billed input at gpt-5's rate: {billed_ratio(search, stock, 'gpt-5'):.2f}x of the stock Agent "
        f"(gpt-4o's: {billed_ratio(search, stock, 'gpt-4o'):.2f}x), {search.cached_share:.0%} of its request "
        f"tokens served from cache against {stock.cached_share:.0%}."
    )
    return (
        f"With search on, the Session Memory Agent (switch on, N=10) answered {search.correct} of "
        f"{len(search.answers)} recall questions ({search.accuracy:.0%}, changed facts included) against "
        f"{stock.correct} for the stock Agent at N=100 and {summary_only.correct} with the summary alone, sending "
        f"{search.input_tokens / stock.input_tokens:.0%} of the stock Agent's input tokens over the session "
        f"({search.folds} fold and {search.searches} search calls included).{billed}"
        f"{anthropic_headline(anthropic) if anthropic else ''}"
    )


def anthropic_headline(results: list[Result]) -> str:
    stock, search = results
    return (
        f" On Anthropic, where the switch marks cache breakpoints and Langflow's stock Agent marks none: "
        f"{billed_ratio(search, stock, 'anthropic'):.2f}x its billed input."
    )


def targets(results: list[Result]) -> list[str]:
    stock, _, search = results
    ratio = search.input_tokens / stock.input_tokens
    lines = [
        f"- Recall with search >= {RECALL_TARGET:.0%}: {search.accuracy:.0%}, "
        f"{'met' if search.accuracy >= RECALL_TARGET else 'missed'}.",
        f"- Input tokens with search <= {TOKEN_TARGET:.0%} of the stock Agent at N=100: {ratio:.0%}, "
        f"{'met' if ratio <= TOKEN_TARGET else 'missed'}.",
    ]
    for rate, target in BILLED_TARGETS.items():
        measured = (
            f"{billed_ratio(search, stock, rate):.2f}x, "
            f"{'met' if billed_ratio(search, stock, rate) <= target else 'missed'}"
        )
        lines.append(f"- Billed input with search <= {target:.2f}x the stock Agent's at {rate}'s rate: {measured}.")
    return lines


STALE_NOTE = (
    "An answer naming the replaced value comes from a summary that kept it: the bundled server answers from the "
    "request when a sentence there holds the question's key words, and searches only when none does; its fold keeps "
    "the earliest facts once the summary reaches 300 words, so a change folded after that never reaches them (a real "
    "model is asked to correct what a change makes outdated)."
)


def stale_answers(result: Result) -> int:
    return sum(1 for q, a in result.answers if q.stale and _names(a, q.stale))


def misses(result: Result, limit: int = 10) -> list[str]:
    """The questions a configuration got wrong, with its answers: the first place to look when a target is missed."""
    wrong = [(q, a) for q, a in result.answers if not q.answered_by(a)]
    if not wrong:
        return []
    lines = ["| question | expected | answer | names the replaced value |", "| --- | --- | --- | --- |"]
    for question, answer in wrong[:limit]:
        shown = " ".join(answer.split()).replace("|", "/")
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        stale = "yes" if question.stale and _names(answer, question.stale) else "no"
        lines.append(f"| {question.text} | {question.expected} | {shown} | {stale} |")
    if len(wrong) > limit:
        lines.append(f"| ... {len(wrong) - limit} more | | | |")
    return lines


def document(results: list[Result], *, size: Size, seconds: float, anthropic: list[Result] | None = None) -> str:
    """docs/eval.md for a run on the bundled server (a real model's run writes only its own section)."""
    turns, questions = script(size)
    source = (
        "the bundled deterministic server (`langflow_session_memory/bundled_server/fake_openai.py`), so this run "
        "measures **what reaches the model**, not how well a model reasons: a recall question is answered with the "
        "facts of the newest sentence in the request that holds all its key words; when there is none and the "
        "request offers `search_earlier_messages`, it searches with the key words and answers from the result. "
        "Tokens are its estimate of every request of a turn (`ceil(chars/4) + 4` per message, plus `ceil(chars/4)` "
        "of the tool definitions sent), chat, fold and search follow-up requests alike; search calls are its "
        "tool-call replies; cached tokens are those it reported by OpenAI's caching rules (see "
        "[Served from cache](#served-from-cache-and-billed-input))"
    )
    return "\n".join(
        [
            "# Recall eval: 40 facts across 285 turns" if size == FULL else "# Recall eval (reduced size)",
            "",
            f"**{headline(results, anthropic=anthropic)}**",
            "",
            "Produced by `make eval` (`python -m benchmarks.eval`); `make eval QUICK=1` runs a reduced version in a "
            "few minutes; `make eval MODEL_NAME=gpt-4o-mini` (with `OPENAI_API_KEY`, and `OPENAI_BASE_URL` for another "
            "OpenAI-compatible server) runs it against a real model, and `make eval-real` against Qwen2.5-Coder 1.5B "
            "Instruct served on this machine, each into its own section "
            "([On a real model](#on-a-real-model-qwen25-coder-15b-instruct)); `EVAL_ARGS=--no-anthropic` leaves "
            "out the run on Anthropic's API ([On Anthropic](#on-anthropic-cache-breakpoints-marked-by-the-switch)).",
            "",
            "The real Langflow app runs in-process (`TestClient(create_app())`, `/api/v1/run`) on a fresh SQLite "
            f"database, one session per configuration. Each session: {size.filler_turns} filler turns ({size.logs} "
            f"of them ~5,000-character pasted logs) with {size.facts} distinct facts planted at evenly spread points "
            '("The badge code of team 13 is BADGE-1000."), '
            f'{size.updates} of them changed later ("Change: team 13 has a new badge code, BADGE-5000."): '
            f"{len(turns)} turns; then {len(questions)} questions, one per fact (a changed fact must get its new "
            'value and not its old one) and one per change ("What is the new badge code of team 13?"), in a fixed '
            "shuffled order. An answer is right when it names the expected value (and, for a changed fact, not the "
            "old one). "
            f"Model: {source}. Fold calls are `session_summary_fold` lines in Langflow's log. Turn times are "
            "`/api/v1/run` round trips through the app, folds and searches included.",
            "",
            "Configurations: Langflow's stock Agent (its own node, not ours with the switch off) at N=100; the "
            "Session Memory Agent with Summarize Older Messages on at N=10, with Search Older Messages "
            "(`search_older_messages`) off and on, set through tweaks.",
            "",
            table(results),
            "",
            "## Targets",
            "",
            *targets(results),
            "",
            f"![recall, input tokens and billed input per configuration]({FIGURE})",
            "",
            "## Where the input tokens go",
            "",
            token_table(results),
            "",
            token_notes(results),
            "",
            "## Served from cache and billed input",
            "",
            cache_table(results),
            "",
            cache_notes(results),
            "",
            "## Past the ceiling: other request shapes, simulated",
            "",
            options_table(results, cache_options.OPENAI_OPTIONS),
            "",
            OPTIONS_NOTE,
            "",
            *(anthropic_section(anthropic) if anthropic else []),
            *(["## Wrong answers with search on", "", *misses(results[-1]), ""] if misses(results[-1]) else []),
            *([STALE_NOTE, ""] if stale_answers(results[-1]) else []),
            f"The whole run took {seconds:.0f} s.",
            "",
        ]
    )


OPTIONS_NOTE = (
    "Each session's requests replayed through the same simulator in other shapes (`benchmarks/cache_options.py`), "
    "against the stock Agent's requests as sent at the same rate. *Folds reuse the chat prefix*: a fold request is "
    "the session's previous chat request, the answer after it and the fold instructions at the end, so it reads "
    "the chat's cached prefix, but it is larger (the Agent's system prompt and tools come with it)."
)
ANTHROPIC_NOTE = (
    f"The stock Agent and the switch on with search, on Langflow's Anthropic provider (`{ANTHROPIC_MODEL}`), "
    "against the bundled server's Messages API (`langflow_session_memory/bundled_server/fake_anthropic.py`): it "
    "answers by the same rules, caches by Anthropic's documented rules (only at the breakpoints a request marks with "
    "`cache_control`, at most 4; prefixes from the model's 1,024-token minimum; a 20-block lookback; 5 minutes "
    "after the last use) and reports `cache_read_input_tokens` and `cache_creation_input_tokens` as Anthropic does. "
    "Langflow's stock Agent marks no breakpoint, so nothing is cached and every token is billed in full; with the "
    "switch on, the Agent marks the last tool definition, the system prompt, the summary and (top-level "
    "`cache_control`) the request's last block (`services/session_memory/agent/prompt_caching.py`). Billed input is "
    "uncached tokens + 0.1 x tokens read + 1.25 x tokens written (Anthropic's 5-minute cache, every model). "
    "Tokens here count the tool definitions as the server does, so they differ slightly from the table above."
)
ANTHROPIC_OPTIONS_NOTE = (
    "The same Anthropic sessions replayed with other breakpoints (`benchmarks/cache_options.py`): fold requests "
    "never carry one. *Last block only*: the top-level `cache_control` (Anthropic's automatic caching) alone. "
    "*LangChain's middleware*: what `AnthropicPromptCachingMiddleware` marks (the last tool, the system prompt, the "
    "last block). *+ summary*: and the summary's message, what the switch sends; its replay gives the figures the "
    "server reported. A breakpoint on a prefix that the next request no longer shares is written at 1.25x and never "
    "read."
)


def anthropic_section(results: list[Result]) -> list[str]:
    stock = results[0]
    lines = [
        "| configuration | recall | input tokens, session | read from cache | written to cache | "
        "billed input vs stock | fold calls | search calls | turn s, median | turn s, p95 |",
        "| --- |" + " ---: |" * 9,
    ]
    for r in results:
        served = r.served
        lines.append(
            f"| {r.configuration.label} | {r.correct}/{len(r.answers)} ({r.accuracy:.0%}) | {r.input_tokens:,} | "
            f"{served.cache_read:,} ({served.cache_read / r.input_tokens:.0%}) | "
            f"{served.cache_write:,} ({served.cache_write / r.input_tokens:.0%}) | "
            f"{billed_ratio(r, stock, 'anthropic'):.2f}x | {r.folds} | {r.searches} | "
            f"{statistics.median(r.turn_seconds):.2f} | {percentile(r.turn_seconds, 0.95):.2f} |"
        )
    return [
        "## On Anthropic: cache breakpoints marked by the switch",
        "",
        *lines,
        "",
        ANTHROPIC_NOTE,
        "",
        options_table(results, cache_options.ANTHROPIC_OPTIONS),
        "",
        ANTHROPIC_OPTIONS_NOTE,
        "",
    ]


def options_table(results: list[Result], options: dict) -> str:
    """Billed input against the stock Agent's requests as sent, per option and rate (``benchmarks.cache_options``)."""
    ratios = cache_options.option_ratios(
        options, {r.configuration.label: r.requests for r in results}, results[0].configuration.label
    )
    header = "| option | rate | " + " | ".join(r.configuration.label for r in results) + " |"
    lines = [header, "| --- | --- |" + " ---: |" * len(results)]
    for (option, rate), by_configuration in ratios.items():
        cells = " | ".join(f"{by_configuration[r.configuration.label]:.3f}x" for r in results)
        lines.append(f"| {option} | {rate} | {cells} |")
    return "\n".join(lines)


def server_tokens(result: Result, server_log: Path) -> tuple[int, int]:
    """A session's prompt tokens and those the server's slot evaluated, from the real-model tier's request log."""
    started, ended = result.served_between
    entries = [json.loads(line) for line in server_log.read_text().splitlines() if line.strip()]
    served = [entry for entry in entries if started <= entry["started"] < ended]
    return sum(entry["prompt_tokens"] for entry in served), sum(entry["evaluated_tokens"] for entry in served)


def real_model_section(
    results: list[Result], *, name: str, size: Size, seconds: float, settings: dict, server_log: Path | None = None
) -> str:
    """docs/eval.md's section for a run against a real model: recall, tokens and turn time, by configuration.

    Tokens are those the server logged (``server_log``, the real-model tier's: every request, folds included,
    and what its one slot evaluated past its cached prefix), else the usage Langflow stored with each answer.
    """
    turns, questions = script(size)
    tokens = {
        id(result): server_tokens(result, server_log) if server_log else (result.input_tokens, None)
        for result in results
    }
    stock_prompt, stock_evaluated = tokens[id(results[0])]
    source = (
        "the server's own count of every request (folds included), and of what its one slot evaluated past the "
        "prefix it had cached (`local_model/serve_llama_cpp.py --request-log`)"
        if server_log
        else "the usage Langflow stored with each answer (fold calls included)"
    )
    lines = [
        REAL_MODEL_MARKER,
        f"## On a real model: {name}",
        "",
        f"`make eval-real` (`python -m benchmarks.eval --model ...`), {time.strftime('%Y-%m-%d')}, {seconds / 60:.0f} "
        f"min: {size.facts} facts ({size.updates} changed later) planted across {len(turns)} turns "
        f"({size.filler_turns} filler, {size.logs} pasted logs), then {len(questions)} questions, through the real app "
        f"to {name} behind Langflow's OpenAI provider; Agent settings {settings or 'as Langflow sets them'}. Tokens "
        f"are {source}; turn time is each `/api/v1/run` call, the fold after an answer settled before the next turn.",
        "",
        "| configuration | recall | changed facts | prompt tokens | vs stock N=100 | evaluated by the server "
        "| vs stock N=100 | median turn | p95 turn | folds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        changed, of = result.changed_correct
        prompt, evaluated = tokens[id(result)]
        lines.append(
            f"| {result.configuration.label} | {result.correct}/{len(result.answers)} ({result.accuracy:.0%}) "
            f"| {changed}/{of} | {prompt:,} | {_ratio(prompt, stock_prompt)} "
            f"| {'n/a' if evaluated is None else f'{evaluated:,}'} | {_ratio(evaluated, stock_evaluated)} "
            f"| {statistics.median(result.turn_seconds):.1f} s | {percentile(result.turn_seconds, 0.95):.1f} s "
            f"| {result.folds} |"
        )
    for result in results[1:]:
        wrong = misses(result)
        if wrong:
            lines += ["", f"Missed by {result.configuration.label}:", "", *wrong]
    return "\n".join([*lines, ""])


def _ratio(value: int | None, stock: int | None) -> str:
    return f"{value / stock:.2f}x" if value is not None and stock else "n/a"


def with_section(markdown: Path, kept_from: Path, marker: str) -> None:
    """``markdown`` with the section of ``kept_from`` that starts at ``marker`` (to the end) put back, if any."""
    if not kept_from.exists() or marker not in (saved := kept_from.read_text(encoding="utf-8")):
        return
    own = markdown.read_text(encoding="utf-8").split(marker)[0].rstrip("\n")
    markdown.write_text(f"{own}\n\n{marker}{saved.split(marker, 1)[1]}", encoding="utf-8")


def cumulative(values: list[float]) -> list[float]:
    totals, total = [], 0.0
    for value in values:
        total += value
        totals.append(total)
    return totals


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 2]})
    labels = [r.configuration.label.replace(", ", "\n", 1) for r in results]
    colors = ["tab:gray", "tab:orange", "tab:blue"]
    left.bar(labels, [100 * r.accuracy for r in results], color=colors)
    left.axhline(100 * RECALL_TARGET, color="red", linewidth=0.8, linestyle=":", label="target with search")
    for index, r in enumerate(results):
        left.annotate(f"{r.correct}/{len(r.answers)}", (index, 100 * r.accuracy), ha="center", va="bottom")
    left.set_ylabel("questions answered right (%)")
    left.set_ylim(0, 110)
    left.legend(fontsize=8, loc="upper left")
    left.tick_params(axis="x", labelsize=8)
    rate = RATES["gpt-5"]
    for r, color in zip(results, colors, strict=True):
        turns = range(1, len(r.turn_input_tokens) + 1)
        right.plot(turns, cumulative(r.turn_input_tokens), color=color, label=f"{r.configuration.label}: input tokens")
        billed = [
            billed_input(InputTokens(uncached=tokens - hit, cache_read=hit), rate)
            for tokens, hit in zip(r.turn_input_tokens, r.turn_cached_tokens, strict=True)
        ]
        right.plot(turns, cumulative(billed), color=color, linestyle="--", label="billed at gpt-5's rate")
    right.axvline(len(results[0].turn_input_tokens) - len(results[0].answers) + 0.5, color="black", linewidth=0.5)
    right.set_xlabel("turn (questions after the vertical line)")
    right.set_ylabel("tokens, cumulative (folds and searches included)")
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real model (OPENAI_API_KEY, OPENAI_BASE_URL); default: the bundled server")
    parser.add_argument("--quick", action="store_true", help=f"the reduced size: {QUICK}")
    parser.add_argument("--facts", type=int, help=f"facts planted (at most {MAX_FACTS})")
    parser.add_argument("--updates", type=int, help="facts changed later")
    parser.add_argument("--filler-turns", type=int, help="filler turns the facts are spread over")
    parser.add_argument("--logs", type=int, help="filler turns that paste a ~5,000-character log")
    parser.add_argument("--agent-max-tokens", type=int, help="the Agent's Max Tokens (a slow local model: e.g. 64)")
    parser.add_argument("--context-window", type=int, help="the model's context window, declared on the Agent")
    parser.add_argument("--model-name", help="with --model: the model as docs/eval.md names it")
    parser.add_argument("--server-log", type=Path, help="with --model: the server's request log to count tokens from")
    parser.add_argument("--docs", type=Path, default=DOCS, help=f"where {REPORT} and {FIGURE} go")
    parser.add_argument(
        "--no-anthropic", action="store_true", help="skip the run on Anthropic's API (always skipped with --model)"
    )
    arguments = parser.parse_args(argv)
    base = QUICK if arguments.quick else FULL
    size = Size(
        **{
            name: getattr(arguments, name) if getattr(arguments, name) is not None else getattr(base, name)
            for name in ("facts", "updates", "filler_turns", "logs")
        }
    )
    if not (1 <= size.updates**2 <= size.facts <= min(MAX_FACTS, size.filler_turns) and size.logs < size.filler_turns):
        parser.error(f"need 1 <= updates^2 <= facts <= {MAX_FACTS}, facts <= filler turns and logs < filler turns")
    if arguments.model and not os.environ.get("OPENAI_API_KEY"):
        parser.error(
            "--model (make eval MODEL_NAME=...) talks to a real model: it needs OPENAI_API_KEY (any value locally)"
        )
    started = time.perf_counter()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lsm-eval-", ignore_cleanup_errors=True)))
        server = None if arguments.model else stack.enter_context(run_in_thread(FakeModelConfig()))
        app = stack.enter_context(
            langflow_app(f"sqlite:///{folder / 'langflow.db'}", model_base_url=server.base_url if server else None)
        )
        runs = [
            (
                arguments.model or "gpt-4o-mini",
                "OpenAI",
                REAL_MODEL_CONFIGURATIONS if arguments.model else CONFIGURATIONS,
            )
        ]
        if server and not arguments.no_anthropic:
            runs.append((ANTHROPIC_MODEL, "Anthropic", ANTHROPIC_CONFIGURATIONS))
        results, anthropic = [], []
        for model, provider, configurations in runs:
            flows = {
                memory: app.create_flow(
                    model, session_memory=memory, agent_inputs=agent_inputs(arguments), provider=provider
                )
                for memory in (False, True)
            }
            for configuration in configurations:
                print(f"running {configuration.label} on {provider} ...", flush=True)  # noqa: T201
                result = run_configuration(app, server, flows[configuration.session_memory], configuration, size)
                (anthropic if provider == "Anthropic" else results).append(result)
    seconds = time.perf_counter() - started
    arguments.docs.mkdir(parents=True, exist_ok=True)
    target = arguments.docs / REPORT
    if arguments.model:
        name = arguments.model_name or arguments.model
        section = real_model_section(
            results,
            name=name,
            size=size,
            seconds=seconds,
            settings=agent_inputs(arguments),
            server_log=arguments.server_log,
        )
        sections.replace(target, REAL_MODEL_MARKER, section)
        print(f"{section}\nwrote its section of {target} in {seconds:.0f} s")  # noqa: T201
        return
    print(table(results))  # noqa: T201
    plot(results, arguments.docs / FIGURE)
    previous = target.with_suffix(".previous")
    if target.exists():
        target.replace(previous)
    target.write_text(document(results, size=size, seconds=seconds, anthropic=anthropic), encoding="utf-8")
    with_section(target, previous, REAL_MODEL_MARKER)  # the real model's run, written by make eval-real
    previous.unlink(missing_ok=True)
    print(f"\n{headline(results, anthropic=anthropic)}\nwrote {target} in {seconds:.0f} s")  # noqa: T201


if __name__ == "__main__":
    sys.exit(main())
