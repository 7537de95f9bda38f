"""The benchmark harness at tiny sizes, so ``make bench`` cannot rot between runs.

Runs every part of ``benchmarks.run`` once with the ``smoke`` preset (real Langflow, real
SQLite and PostgreSQL, the bundled model server) and checks the shape of what comes
back and what is written: rows produced, ratios positive. Never timing: 2 lengths of
200 and 400 messages and 3 turns say nothing about speed.
"""

import json
import math

import psycopg
import pytest

from benchmarks import history, report
from benchmarks.databases import POSTGRES_ADMIN_URL
from benchmarks.run import PARTS, PRESETS, run_benchmarks
from tests.app.langflow_app import one_app_at_a_time
from tests.databases import postgres_unreachable

# One group: its tests share one run of the benchmark, which each worker would otherwise make again (make test).
pytestmark = [pytest.mark.postgres, pytest.mark.app, pytest.mark.xdist_group("bench-smoke")]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One smoke run for the whole module: (results, docs folder)."""
    try:
        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=5).close()
    except psycopg.OperationalError as error:
        postgres_unreachable(error)
    docs = tmp_path_factory.mktemp("docs")
    one_app_at_a_time()  # the benchmarks start Langflow's services in this process
    results, _ = run_benchmarks("smoke", PRESETS["smoke"], PARTS, docs)
    return results, docs


def positive(value: float) -> bool:
    return isinstance(value, float | int) and math.isfinite(value) and value > 0


def test_token_series_have_one_row_per_turn(smoke):
    results, _ = smoke
    turns = PRESETS["smoke"].token_turns
    assert [series.label for series in results.tokens] == ["stock Agent, N=100", "switch on, N=10"]
    for series in results.tokens:
        assert len(series.chat_input_tokens) == len(series.fold_input_tokens) == len(series.folds) == turns
        assert all(tokens > 0 for tokens in series.chat_input_tokens)
        assert len(series.chat_cached_tokens) == len(series.fold_cached_tokens) == turns
        pairs = zip(series.chat_cached_tokens, series.chat_input_tokens, strict=True)
        assert all(0 <= cached <= tokens for cached, tokens in pairs)
        assert series.last_answer


def test_history_has_a_row_per_backend_and_length_and_a_gap_sweep_at_the_largest(smoke):
    results, _ = smoke
    lengths = PRESETS["smoke"].history_lengths
    expected = [(length, history.GAP) for length in lengths]
    expected += [(max(lengths), gap) for gap in history.SWEPT_GAPS if gap != history.GAP]
    assert sorted((h.backend, h.length, h.gap) for h in results.history) == sorted(
        (backend, length, gap) for backend in ("postgresql", "sqlite") for length, gap in expected
    )
    for timing in results.history:
        assert positive(timing.ratio)
        assert positive(timing.stock_p95_ms)
        assert positive(timing.ours_p95_ms)
        assert timing.messages_sent > 10  # the window plus the summary (and the raw gap)


def test_latency_has_both_configurations_turn_by_turn(smoke):
    results, _ = smoke
    assert len(results.latency) == 2
    for series in results.latency:
        assert len(series.turn_ms) == len(series.folds) == PRESETS["smoke"].latency_turns
        assert positive(series.p50)
        assert positive(series.p95)


def test_concurrency_runs_every_turn_of_both_phases_without_errors(smoke):
    results, _ = smoke
    sizes, outcome = PRESETS["smoke"], results.concurrency
    expected_turns = sizes.workers * sizes.sessions * sizes.rounds
    for phase in (outcome.stock, outcome.memory):
        assert phase.turns == expected_turns
        assert phase.errors == 0
        assert positive(phase.turns_per_second)
    assert outcome.consistent_rows == outcome.state_rows


def test_cleanup_reports_a_ratio_per_backend(smoke):
    results, _ = smoke
    assert set(results.cleanup) == {"sqlite", "postgresql"}
    assert all(positive(result["ratio"]) for result in results.cleanup.values())


def test_report_and_figures_are_written(smoke):
    results, docs = smoke
    markdown = (docs / "benchmarks.md").read_text()
    for heading in ("## (a)", "## (b)", "## (c)", "## (d)", "## Cleanup listener cost", "## Headline"):
        assert heading in markdown
    assert "| configuration | all input tokens | served from cache | fold calls, from cache | billed input" in markdown
    for figure in report.FIGURES.values():
        assert (docs / figure).stat().st_size > 0
    raw = json.loads((docs / "benchmarks.json").read_text())
    assert raw["preset"] == "smoke"
    assert len(raw["history"]) == len(results.history)
