"""Turns one run's measurements into ``docs/benchmarks.md``, its PNG figures and a JSON copy of the raw numbers.

Every figure shows the switch against the stock Agent measured in the same run, as a
ratio, because absolute times on a 2-core machine say little on their own. Sections are
rendered only for the parts that ran (``--parts``).
"""

import json
import os
import platform
import statistics
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from benchmarks import search, search_scale
from benchmarks.concurrency import ConcurrencyResult
from benchmarks.conversation import recalled
from benchmarks.history import GAP, HistoryTiming
from benchmarks.latency import LatencySeries
from benchmarks.tokens import TokenSeries
from langflow_session_memory.bundled_server.prompt_cache import RATES, InputTokens, billed_input

HISTORY_TARGET = 1.2
BILLED_RATES = ("gpt-4o", "gpt-4.1", "gpt-5")
SUMMARY_WORD_TARGET = 300
FIGURES = {
    "tokens": "bench_tokens.png",
    "history": "bench_history.png",
    "latency": "bench_latency.png",
    "concurrency": "bench_concurrency.png",
    "cleanup": "bench_cleanup.png",
}


@dataclass
class BenchResults:
    """Everything one ``python -m benchmarks.run`` measured; a part that did not run stays empty."""

    preset: str
    sizes: dict
    tokens: list[TokenSeries] = field(default_factory=list)
    history: list[HistoryTiming] = field(default_factory=list)
    latency: list[LatencySeries] = field(default_factory=list)
    concurrency: ConcurrencyResult | None = None
    cleanup: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _pct(new: float, old: float) -> str:
    return f"{(1 - new / old) * 100:.0f}%" if old else "n/a"


def _ms(value: float) -> str:
    return f"{value:.1f}"


def token_totals(series: TokenSeries) -> dict[str, int]:
    chat, fold = sum(series.chat_input_tokens), sum(series.fold_input_tokens)
    last = series.chat_input_tokens[-1] + series.fold_input_tokens[-1] if series.chat_input_tokens else 0
    cached = sum(series.chat_cached_tokens) + sum(series.fold_cached_tokens)
    return {
        "chat": chat,
        "fold": fold,
        "total": chat + fold,
        "last_chat": series.chat_input_tokens[-1],
        "last": last,
        "cached": cached,
        "fold_cached": sum(series.fold_cached_tokens),
    }


def billed(totals: dict[str, int], rate: str) -> float:
    """All input tokens of a session, fold calls included, billed at ``rate``'s cached-input price."""
    tokens = InputTokens(uncached=totals["total"] - totals["cached"], cache_read=totals["cached"])
    return billed_input(tokens, RATES[rate])


def headline(results: BenchResults) -> list[str]:
    """One line per part: the numbers a reader wants before the details."""
    lines = []
    if len(results.tokens) == 2:
        stock, memory = (token_totals(s) for s in results.tokens)
        lines.append(
            f"- **Input tokens** over {len(results.tokens[0].chat_input_tokens):,} turns: "
            f"{_pct(memory['total'], stock['total'])} fewer with the switch on at N=10 than the stock Agent at "
            f"N=100 (fold calls included); at the recall turn {_pct(memory['last'], stock['last'])} fewer. "
            f"Billed input at gpt-5's rate: {billed(memory, 'gpt-5') / billed(stock, 'gpt-5'):.2f}x of the stock "
            f"Agent (gpt-4o's: {billed(memory, 'gpt-4o') / billed(stock, 'gpt-4o'):.2f}x). "
            f"Longest summary: {results.tokens[1].max_summary_words} words (target <= {SUMMARY_WORD_TARGET})."
        )
    if results.history:
        ratios = ", ".join(f"{h.backend} {h.length:,}: {h.ratio:.2f}x" for h in typical_gap(results.history))
        lines.append(
            f"- **History building** with {GAP} unfolded messages sent raw, ours/stock median (target <= "
            f"{HISTORY_TARGET}x and flat): {ratios}."
        )
    if len(results.latency) == 2:
        stock, memory = results.latency
        lines.append(
            f"- **Turn latency** with a 1 s model: p50 {memory.p50 / stock.p50:.2f}x, p95 "
            f"{memory.p95 / stock.p95:.2f}x the stock Agent; {memory.background_folds} folds ran after an answer, "
            f"{sum(1 for f in memory.folds if f)} of {len(memory.folds)} turns folded inside the turn."
        )
    if results.concurrency:
        c = results.concurrency
        lines.append(
            f"- **Concurrency** ({c.workers} processes x {c.sessions} shared sessions, PostgreSQL): "
            f"{c.memory.turns_per_second / c.stock.turns_per_second:.2f}x the stock Agent's turns/s, "
            f"{c.folds_committed} folds committed, {c.memory.lost_races} lost races, "
            f"{c.memory.folds_waited} turns waited for another worker's fold, "
            f"{c.memory.errors + c.memory.problems} errors, {c.consistent_rows}/{c.state_rows} state rows consistent."
        )
    if results.cleanup:
        ratios = ", ".join(f"{backend} {r['ratio']:.2f}x" for backend, r in results.cleanup.items())
        lines.append(f"- **Cleanup listener**, session delete with/without: {ratios}.")
    return lines


def tokens_section(results: BenchResults) -> list[str]:
    stock_series, memory_series = results.tokens
    stock, memory = token_totals(stock_series), token_totals(memory_series)
    turns = len(stock_series.chat_input_tokens)
    rows = [
        "| configuration | chat input tokens, total | fold input tokens, total | all input tokens | "
        "last turn, chat | last turn, all | folds | recall answer names PRJ-123 and EU |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for series, totals in ((stock_series, stock), (memory_series, memory)):
        rows.append(
            f"| {series.label} | {totals['chat']:,} | {totals['fold']:,} | {totals['total']:,} | "
            f"{totals['last_chat']:,} | {totals['last']:,} | {sum(series.folds)} | "
            f"{'yes' if recalled(series.last_answer) else 'no'} |"
        )
    rows.append(
        f"| **switch on / stock** | {memory['chat'] / stock['chat']:.2f} | | "
        f"**{memory['total'] / stock['total']:.2f}** | {memory['last_chat'] / stock['last_chat']:.2f} | "
        f"**{memory['last'] / stock['last']:.2f}** | | |"
    )
    billed_headers = " | ".join(f"billed input, {rate}" for rate in BILLED_RATES)
    cache_rows = [
        f"| configuration | all input tokens | served from cache | fold calls, from cache | {billed_headers} |",
        "| --- |" + " ---: |" * (3 + len(BILLED_RATES)),
    ]
    for series, totals in ((stock_series, stock), (memory_series, memory)):
        cells = " | ".join(f"{billed(totals, rate):,.0f}" for rate in BILLED_RATES)
        cache_rows.append(
            f"| {series.label} | {totals['total']:,} | {totals['cached'] / totals['total']:.0%} | "
            f"{totals['fold_cached']:,} of {totals['fold']:,} | {cells} |"
        )
    ratios = " | ".join(f"**{billed(memory, rate) / billed(stock, rate):.2f}x**" for rate in BILLED_RATES)
    cache_rows.append(f"| **switch on / stock** | {memory['total'] / stock['total']:.2f}x | | | {ratios} |")
    return [
        "## (a) Input tokens per turn over a long session",
        "",
        f'One session of {turns:,} turns per configuration: the fact "Our project is PRJ-123 on the EU cluster.", '
        "filler turns with a ~5,000-character pasted log every 250 turns (from turn 20), and the recall question "
        '"Which cluster and project were we on?" as the last turn. Tokens are the bundled model server\'s count '
        'of each request (`ceil(chars/4) + 4` per message); "fold" is the switch\'s extra summary calls.',
        "",
        *rows,
        "",
        f"Longest summary over the run: **{memory_series.max_summary_words} words** (target <= {SUMMARY_WORD_TARGET}). "
        f"Recall answers: stock `{_short(stock_series.last_answer)}`; switch on `{_short(memory_series.last_answer)}`. "
        f"Path: {_path_name(stock_series.path)}; seconds per turn {stock_series.seconds_per_turn:.2f} (stock) and "
        f"{memory_series.seconds_per_turn:.2f} (switch on), the two sessions running side by side.",
        "",
        "Billed input, from the tokens the bundled server reported served from its prompt cache (OpenAI's "
        "documented caching, `langflow_session_memory/bundled_server/prompt_cache.py`: the longest prefix of an "
        "earlier request used within 5 minutes, from 1,024 tokens in 128-token steps; each session starts with an "
        "empty cache), in uncached-token equivalents: uncached tokens + rate x cached tokens, the rate being the "
        "cached-input price over the input price (gpt-4o 0.5, gpt-4.1 0.25, gpt-5 0.1).",
        "",
        *cache_rows,
        "",
        f"![input tokens per turn]({FIGURES['tokens']})",
        "",
    ]


def typical_gap(history: list[HistoryTiming]) -> list[HistoryTiming]:
    """The rows timed with the typical gap: one per backend and length."""
    return [h for h in history if h.gap == GAP]


def history_section(results: BenchResults) -> list[str]:
    rows = [
        "| backend | stored messages | stock median ms | stock p95 ms | ours median ms | ours p95 ms | "
        "ours/stock (median) | ours/stock (p95) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for h in typical_gap(results.history):
        rows.append(
            f"| {h.backend} | {h.length:,} | {_ms(h.stock_median_ms)} | {_ms(h.stock_p95_ms)} | "
            f"{_ms(h.ours_median_ms)} | {_ms(h.ours_p95_ms)} | **{h.ratio:.2f}** | "
            f"{h.ours_p95_ms / h.stock_p95_ms:.2f} |"
        )
    gaps = [
        "| backend | stored messages | unfolded messages sent raw | messages sent (ours) | stock median ms | "
        "ours median ms | ours/stock (median) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    largest = max(h.length for h in results.history)
    for h in sorted((h for h in results.history if h.length == largest), key=lambda h: (h.backend, h.gap)):
        gaps.append(
            f"| {h.backend} | {h.length:,} | {h.gap} | {h.messages_sent} | {_ms(h.stock_median_ms)} | "
            f"{_ms(h.ours_median_ms)} | **{h.ratio:.2f}** |"
        )
    sent = typical_gap(results.history)[0].messages_sent
    return [
        "## (b) History-building time per turn against stored session length",
        "",
        "Stock: Langflow's `aget_agent_chat_history` (what the Agent's `get_memory_data` awaits) on Langflow's "
        "database service. Ours: `SessionMemoryService.build_history` on the same service's sessions, for a turn "
        f"without a fold (the state row's cursor leaves {GAP} unfolded messages before the window, fewer than a batch "
        "of 20; between folds this gap cycles through 0..19). Both make one SELECT: ours reads the window, the gap "
        f"and the state row together. N=10. Ours sends {sent} messages (summary, acknowledgement, {GAP} raw gap "
        f"messages, window) where stock sends 10. Sessions seeded with bulk inserts; calls alternate; "
        f"{results.sizes['history_repeats']} timed calls each after 5 warm-up calls; PostgreSQL analysed after "
        f"seeding. Target: ratio <= {HISTORY_TARGET}x and flat in the session length.",
        "",
        *rows,
        "",
        f"![history building ratio]({FIGURES['history']})",
        "",
        "Where the remaining time goes: every message sent is converted with Langflow's own `Message.create` (the "
        "stock path does the same for its 10), so the ratio follows the number of gap messages sent raw. Same run, "
        "largest session:",
        "",
        *gaps,
        "",
    ]


def latency_section(results: BenchResults) -> list[str]:
    stock, memory = results.latency
    fold_turns = [t for t, f in zip(memory.turn_ms, memory.folds, strict=True) if f]
    plain_turns = [t for t, f in zip(memory.turn_ms, memory.folds, strict=True) if not f]
    rows = [
        "| configuration | turns | p50 ms | p95 ms | turns with a fold inside | folds after an answer "
        "| median fold latency ms (log) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for series in (stock, memory):
        fold_latency = _ms(statistics.median(series.fold_latency_ms)) if series.fold_latency_ms else "-"
        rows.append(
            f"| {series.label} | {len(series.turn_ms)} | {series.p50:.0f} | {series.p95:.0f} | "
            f"{sum(1 for f in series.folds if f)} | {series.background_folds} | {fold_latency} |"
        )
    rows.append(
        f"| **switch on / stock** | | **{memory.p50 / stock.p50:.2f}** | **{memory.p95 / stock.p95:.2f}** | | | |"
    )
    extra = ""
    if fold_turns and plain_turns:
        extra = (
            f"A turn that folds took {statistics.median(fold_turns):.0f} ms (median) against "
            f"{statistics.median(plain_turns):.0f} ms for one that does not: a fold adds about one model call. "
        )
    stalls = [series.stalls(results.sizes["model_latency_s"] * 1000) for series in (stock, memory)]
    if any(stalls):
        extra += (
            "Turns slower than the median by half a model call or more while making a single model call "
            f"(Langflow-side stalls, not folds): {stalls[0]} stock, {stalls[1]} switch on."
        )
    return [
        "## (c) Turn latency with a model that answers in 1 s",
        "",
        f"Bundled model server with `FakeModelConfig(latency_s={results.sizes['model_latency_s']})` for chat and "
        "fold calls alike. Both sessions start empty, advance turn by turn alternately, and get one warm-up turn "
        "first. Routine folds run after the answer, while the next turns run (no pause between turns). "
        f"{extra}",
        "",
        *rows,
        "",
        f"![turn latency]({FIGURES['latency']})",
        "",
    ]


def concurrency_section(results: BenchResults) -> list[str]:
    c = results.concurrency
    rows = [
        "| configuration | turns | seconds | turns/s | errors | folds logged | lost races | "
        "waited for another worker's fold | problem events |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for phase in (c.stock, c.memory):
        rows.append(
            f"| {phase.label} | {phase.turns} | {phase.seconds:.1f} | {phase.turns_per_second:.2f} | {phase.errors} | "
            f"{phase.folds_logged} | {phase.lost_races} | {phase.folds_waited} | {phase.problems} |"
        )
    rows.append(
        f"| **switch on / stock** | | | **{c.memory.turns_per_second / c.stock.turns_per_second:.2f}** | | | | | |"
    )
    fold_calls = c.memory.folds_logged + c.memory.lost_races
    return [
        "## (d) Concurrency on PostgreSQL",
        "",
        f"{c.workers} worker processes, each with Langflow's services on the same PostgreSQL database, run "
        f"Chat Input -> Agent -> Chat Output turns on the same {c.sessions} sessions in the same order, "
        "re-aligned by a barrier every round "
        f"({c.rounds} rounds, so {c.rounds * c.workers} turns per session per configuration), N={c.n_messages}, "
        "model latency 50 ms: turns on one session overlap and workers race to fold the same batch. The stock "
        "Agent does the same work in its own flow; phases ran in the order stock, switch on, switch on, stock "
        "(each half of the rounds), so drift during the run hits both. A worker claims a session's fold in its "
        "row before calling the model; routine folds run after the answer, and a turn that finds a fold "
        "claimed sends the unfolded messages raw; only a fold inside a turn waits for another worker's "
        "(`session_summary_fold_elsewhere`). Lost races are `session_summary_lost_race` lines in Langflow's log "
        "(a fold call whose compare-and-swap lost, possible only once a claim ran out); problem events are "
        "`session_memory_fallback`, `session_summary_fold_failed`, `session_summary_paused` and "
        "`session_summary_reset`.",
        "",
        *rows,
        "",
        f"Folds committed (sum of `folded_count` / 20): **{c.folds_committed}**, from {fold_calls} fold calls to "
        f"the model: {c.memory.lost_races} lost the compare-and-swap to another worker folding the same batch, and "
        f"their summaries were discarded; {c.memory.folds_waited} turns found the fold claimed by another worker "
        "and used its result without a model call. State rows whose `folded_count` equals the stored messages up "
        "to their "
        f"cursor (nothing folded twice or skipped): **{c.consistent_rows}/{c.state_rows}**.",
        "",
        f"![concurrency]({FIGURES['concurrency']})",
        "",
    ]


def cleanup_section(results: BenchResults) -> list[str]:
    rows = ["| backend | without listener ms | with listener ms | with/without |", "| --- | ---: | ---: | ---: |"]
    for backend, r in results.cleanup.items():
        rows.append(f"| {backend} | {_ms(r['without_ms'])} | {_ms(r['with_ms'])} | **{r['ratio']:.2f}** |")
    return [
        "## Cleanup listener cost",
        "",
        "`benchmarks/session_delete.py`: Langflow's own session delete (select the ids, one bulk delete by ids) of a "
        f"{results.sizes['cleanup_messages']:,}-message session, with and without our `do_orm_execute` listener, "
        f"alternating, median of {results.sizes['cleanup_rounds']} rounds.",
        "",
        *rows,
        "",
        f"![cleanup]({FIGURES['cleanup']})",
        "",
    ]


def findings(results: BenchResults) -> list[str]:
    """Where this run missed a target or saw something wrong; empty when nothing did."""
    found = []
    typical = typical_gap(results.history)
    over = [h for h in typical if h.ratio > HISTORY_TARGET]
    if over:
        worst = max(over, key=lambda h: h.ratio)
        found.append(
            f"- History building misses the {HISTORY_TARGET}x target in {len(over)} of {len(typical)} "
            f"cases; worst {worst.ratio:.2f}x ({worst.backend}, {worst.length:,} messages)."
        )
    for backend in sorted({h.backend for h in typical}):
        rows = sorted((h for h in typical if h.backend == backend), key=lambda h: h.length)
        if len(rows) > 1 and rows[-1].ours_median_ms > 2 * rows[0].ours_median_ms:
            found.append(
                f"- Ours is not flat on {backend}: {_ms(rows[0].ours_median_ms)} ms at {rows[0].length:,} messages, "
                f"{_ms(rows[-1].ours_median_ms)} ms at {rows[-1].length:,} (stock {_ms(rows[0].stock_median_ms)} -> "
                f"{_ms(rows[-1].stock_median_ms)} ms): a turn without a fold reads in proportion to the session. "
                "Check the query plan of `messages.newest_unfolded` on this backend: it must seek the index from "
                "the cursor."
            )
    if len(results.tokens) == 2:
        if results.tokens[1].max_summary_words > SUMMARY_WORD_TARGET:
            found.append(f"- A summary reached {results.tokens[1].max_summary_words} words.")
        if not recalled(results.tokens[1].last_answer):
            found.append("- The switch-on session did not recall the first message's facts.")
        events = results.tokens[1].problem_events
        if events:
            counts = ", ".join(f"{name} x{events.count(name)}" for name in sorted(set(events)))
            found.append(f"- The long switch-on session logged problem events: {counts}.")
    c = results.concurrency
    if c and c.memory.lost_races:
        calls = c.memory.folds_logged + c.memory.lost_races
        found.append(
            f"- With {c.workers} workers on the same sessions, {c.memory.lost_races} of {calls} fold calls lost the "
            "race: correct (the winner's summary is used), but each is a model call whose tokens are spent and "
            "thrown away; nothing keeps several workers from folding the same batch at once."
        )
    if c and (c.memory.errors or c.memory.problems or c.consistent_rows != c.state_rows):
        found.append(
            f"- Concurrency: {c.memory.errors} errors, {c.memory.problems} problem events, "
            f"{c.state_rows - c.consistent_rows} inconsistent state rows."
        )
    return found


def render(results: BenchResults, total_seconds: float) -> str:
    sections = [
        "# Benchmarks",
        "",
        "Regenerate with `make bench` (`python -m benchmarks.run`; `--quick` for smaller sizes, `--help` for every "
        "knob). Every number below comes from one run of that command on "
        f"{platform.node() or 'this machine'} ({os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Langflow {_version('langflow')}), on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, preset `{results.preset}`, "
        f"in {total_seconds / 60:.1f} minutes. Figures show the switch as a ratio against the stock Agent "
        "measured in the same run.",
        "",
        "**Path.** Real Langflow and the real component throughout, against the bundled deterministic model "
        "server (`langflow_session_memory/bundled_server/fake_openai.py`). "
        f"(a) runs {_path_name(results.tokens[0].path) if results.tokens else 'through the full app'}: one app turn "
        "measured about 0.25 s against about 0.2 s as a `Graph`, so the two 1,000-turn sessions fit the budget "
        "when they run side by side, one app per process. (c) and (d) run Chat Input -> Agent -> Chat Output as a "
        "Langflow `Graph` on Langflow's initialised services (`initialize_services()` + `Graph.arun`, "
        "langflow-integration.md section 10): (c) times the turn itself, without the app's HTTP layer, and (d) "
        "starts 4 Langflow processes, which as full apps would spend ~30 s each starting on 2 cores. Messages are "
        "stored in Langflow's `message` table on every path. The stock Agent is lfx's own `AgentComponent` (in "
        "(a) the starter flow's Agent node unchanged); with the switch off our component sends byte-for-byte the "
        "same requests (tests/app). Each part runs in a fresh process on a fresh database (SQLite file or "
        "PostgreSQL database on the local server).",
        "",
        "## Headline",
        "",
        *headline(results),
        "",
    ]
    if len(results.tokens) == 2:
        sections += tokens_section(results)
    if results.history:
        sections += history_section(results)
    if len(results.latency) == 2:
        sections += latency_section(results)
    if results.concurrency:
        sections += concurrency_section(results)
    if results.cleanup:
        sections += cleanup_section(results)
    problems = findings(results)
    sections += [
        "## What looked wrong",
        "",
        *(problems or ["- Nothing in this run missed a target."]),
        "",
        "## Stage times",
        "",
        "| stage | seconds |",
        "| --- | ---: |",
        *(f"| {name} | {seconds:.0f} |" for name, seconds in results.seconds.items()),
        "",
    ]
    return "\n".join(sections)


def _path_name(path: str) -> str:
    if path == "app":
        return "through the full app (`TestClient(create_app())` + `/api/v1/run`)"
    return "as a Langflow `Graph` on initialised services (`Graph.arun`)"


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def plot(results: BenchResults, docs: Path) -> list[Path]:
    """Write one PNG per part that ran; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    written = []

    def save(figure, part: str) -> None:
        path = docs / FIGURES[part]
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        pyplot.close(figure)
        written.append(path)

    if len(results.tokens) == 2:
        stock, memory = results.tokens
        turns = range(1, len(stock.chat_input_tokens) + 1)
        memory_all = [c + f for c, f in zip(memory.chat_input_tokens, memory.fold_input_tokens, strict=True)]
        figure, (top, bottom) = pyplot.subplots(2, 1, figsize=(10, 7), sharex=True)
        top.plot(turns, stock.chat_input_tokens, label=stock.label, color="tab:gray")
        top.plot(turns, memory.chat_input_tokens, label=f"{memory.label}: chat request", color="tab:blue")
        fold_turns = [t for t, f in zip(turns, memory.folds, strict=True) if f]
        top.scatter(
            fold_turns,
            [memory_all[t - 1] for t in fold_turns],
            s=8,
            color="tab:orange",
            label=f"{memory.label}: chat + fold calls",
        )
        top.set_ylabel("input tokens per turn")
        top.legend()
        ratio = [m / s for m, s in zip(memory_all, stock.chat_input_tokens, strict=True)]
        running = _running_ratio(memory_all, stock.chat_input_tokens)
        bottom.plot(turns, ratio, color="tab:blue", linewidth=0.7, label="per turn (fold calls included)")
        bottom.plot(turns, running, color="tab:red", label="cumulative")
        bottom.axhline(1.0, color="black", linewidth=0.5)
        bottom.set_ylabel("switch on / stock")
        bottom.set_xlabel("turn")
        bottom.legend()
        save(figure, "tokens")

    if results.history:
        figure, (left, right) = pyplot.subplots(1, 2, figsize=(11, 4.5))
        for backend in sorted({h.backend for h in typical_gap(results.history)}):
            rows = sorted((h for h in typical_gap(results.history) if h.backend == backend), key=lambda h: h.length)
            lengths = [h.length for h in rows]
            left.plot(lengths, [h.ratio for h in rows], marker="o", label=f"{backend}, median")
            left.plot(lengths, [h.ours_p95_ms / h.stock_p95_ms for h in rows], marker="x", linestyle="--",
                      label=f"{backend}, p95")  # fmt: skip
            right.plot(lengths, [h.stock_median_ms for h in rows], marker="o", label=f"{backend}, stock")
            right.plot(lengths, [h.ours_median_ms for h in rows], marker="s", label=f"{backend}, ours")
        left.axhline(HISTORY_TARGET, color="red", linewidth=0.8, linestyle=":", label=f"target {HISTORY_TARGET}x")
        for axis, label in ((left, "ours / stock"), (right, "median ms per turn")):
            axis.set_xscale("log")
            axis.set_xlabel("stored messages in the session")
            axis.set_ylabel(label)
            axis.legend(fontsize=8)
        save(figure, "history")

    if len(results.latency) == 2:
        stock, memory = results.latency
        figure, (left, right) = pyplot.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [2, 1]})
        turns = range(1, len(stock.turn_ms) + 1)
        left.plot(turns, stock.turn_ms, label=stock.label, color="tab:gray")
        left.plot(turns, memory.turn_ms, label=memory.label, color="tab:blue")
        folds = [t for t, f in zip(turns, memory.folds, strict=True) if f]
        left.scatter(folds, [memory.turn_ms[t - 1] for t in folds], color="tab:orange", zorder=3, label="fold turn")
        left.set_xlabel("turn")
        left.set_ylabel("turn latency ms")
        left.legend(fontsize=8)
        _ratio_bars(right, ["p50", "p95"], [memory.p50 / stock.p50, memory.p95 / stock.p95], "switch on / stock")
        save(figure, "latency")

    if results.concurrency:
        c = results.concurrency
        figure, axis = pyplot.subplots(figsize=(6, 4))
        values = [c.stock.turns_per_second, c.memory.turns_per_second]
        axis.bar([c.stock.label, c.memory.label], values, color=["tab:gray", "tab:blue"])
        axis.set_ylabel("turns per second (all workers)")
        axis.set_title(
            f"{c.workers} processes x {c.sessions} sessions: {values[1] / values[0]:.2f}x stock; "
            f"{c.folds_committed} folds, {c.memory.lost_races} lost races",
            fontsize=9,
        )
        save(figure, "concurrency")

    if results.cleanup:
        figure, axis = pyplot.subplots(figsize=(6, 4))
        backends = list(results.cleanup)
        ratios = [results.cleanup[b]["ratio"] for b in backends]
        _ratio_bars(axis, backends, ratios, "session delete, with / without listener")
        save(figure, "cleanup")
    return written


def _ratio_bars(axis, labels: list[str], ratios: list[float], ylabel: str) -> None:
    """Bars of ratios against the stock Agent, a line at 1.0, each bar labelled."""
    axis.bar(labels, ratios, color="tab:blue")
    axis.axhline(1.0, color="black", linewidth=0.5)
    axis.set_ylabel(ylabel)
    for index, value in enumerate(ratios):
        axis.annotate(f"{value:.2f}x", (index, value), ha="center", va="bottom")


def _running_ratio(numerator: list[int], denominator: list[int]) -> list[float]:
    ratios, top, bottom = [], 0, 0
    for n, d in zip(numerator, denominator, strict=True):
        top, bottom = top + n, bottom + d
        ratios.append(top / bottom if bottom else 0.0)
    return ratios


def write(results: BenchResults, docs: Path, total_seconds: float) -> list[Path]:
    """``benchmarks.md``, the figures, and ``benchmarks.json`` (raw numbers) under ``docs``."""
    docs.mkdir(parents=True, exist_ok=True)
    figures = plot(results, docs)
    markdown = docs / "benchmarks.md"
    # Written by `python -m benchmarks.search` and `... search_scale`, kept across runs.
    search_section, scale_section = search.saved_section(markdown), search_scale.saved_section(markdown)
    markdown.write_text(render(results, total_seconds), encoding="utf-8")
    if search_section:
        search.write_section(markdown, search_section)
    if scale_section:
        search_scale.write_section(markdown, scale_section)
    raw = docs / "benchmarks.json"
    raw.write_text(json.dumps(asdict(results), indent=1, default=str), encoding="utf-8")
    return [markdown, raw, *figures]
