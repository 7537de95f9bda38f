"""The product's promised values where the docs restate them: each must be the code's.

docs/design.md states every value once, in tables generated from the code (``test_policy_table``).
The pages a user reads (the README, the switch, operations, context safety, privacy, known limits)
still say "20 at a time", "300 words", "10 minutes" in their sentences, because a reader needs
the number there; this finds each such sentence by its wording and fails when its number is not
the one the code folds, clips or pauses by, so a changed value cannot leave a page behind.
Dated measurement pages (benchmarks, eval, measurements, real-model) report runs, not rules.
"""

import re
from pathlib import Path

import pytest

from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY, RETRIEVAL, SUMMARY

ROOT = Path(__file__).resolve().parents[1]
RULE_PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md")],
    key=str,
)
REPORTS = {"benchmarks.md", "eval.md", "measurements.md", "real-model.md"}
PAGES = [page for page in RULE_PAGES if page.name not in REPORTS]

BATCH = DEFAULT_POLICY.batch_size
PAUSE_MINUTES = int(DEFAULT_POLICY.pause.total_seconds() // 60)
SUMMARY_SIZE = (SUMMARY.word_limit, SUMMARY.character_limit)
SEARCH_QUERY_SIZE = (RETRIEVAL.max_keywords, RETRIEVAL.max_pattern_characters)
NUMBER = r"(\d[\d,]*)"

# A wording that states a value, and the values it may state (a tuple for a wording with two numbers).
STATEMENTS = {
    rf"\b{NUMBER} at a time\b": {BATCH},
    rf"\ba batch of {NUMBER}\b": {BATCH},
    rf"\bper {NUMBER} messages\b": {BATCH},
    rf"\b{NUMBER} or more older\b": {BATCH},
    rf"\b{NUMBER}\s+words\s+and\s+{NUMBER}\s+characters\b": {SUMMARY_SIZE, SEARCH_QUERY_SIZE},
    rf"\b(?:up to|past|pass|over) {NUMBER}\s+words\b": {SUMMARY.word_limit},
    rf"\balways run to\s+{NUMBER}\s+words\b": {SUMMARY.floor_words},
    rf"\bpaus\w*[^.|]{{0,40}}?\b{NUMBER}\s+minutes\b": {PAUSE_MINUTES},
    rf"\b{NUMBER}\s+output\s+tokens\b": {SUMMARY.output_tokens, SUMMARY.reasoning_output_tokens},
    rf"\bat\s+most\s+{NUMBER}\s+estimated\s+tokens\b": {SUMMARY.message_tokens},
    rf"\bclipped\s+to\s+{NUMBER}\s+estimated\s+tokens\b": {SUMMARY.message_tokens},
    rf"\bwithin\s+{NUMBER}\s+estimated\s+tokens\b": {RETRIEVAL.passage_tokens},
    rf"\bthe\s+best\s+{NUMBER}\s+are\s+quoted\b": {RETRIEVAL.most_hits},
    rf"\bthe\s+{NUMBER}\s+rarest\b": {RETRIEVAL.most_terms},
    rf"\b{NUMBER}\s+messages\s+a\s+transaction\b": {RETRIEVAL.index_batch},
}


def number(text: str) -> int:
    return int(text.replace(",", ""))


def statements(text: str) -> list[tuple[str, int | tuple[int, ...]]]:
    """Each restated value of ``text``: the wording's pattern and the number (or numbers) it states."""
    found = []
    for pattern in STATEMENTS:
        for match in re.finditer(pattern, text, flags=re.IGNORECASE):
            numbers = tuple(number(group) for group in match.groups())
            found.append((pattern, numbers[0] if len(numbers) == 1 else numbers))
    return found


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_value_a_page_restates_is_the_code_s(page):
    wrong = [(pattern, stated) for pattern, stated in statements(page.read_text()) if stated not in STATEMENTS[pattern]]
    assert wrong == []


def test_the_pages_restate_the_promises_a_user_reads_so_this_check_reads_them():
    found = {pattern for page in PAGES for pattern, _stated in statements(page.read_text())}
    assert {
        rf"\b{NUMBER} at a time\b",
        rf"\b{NUMBER}\s+words\s+and\s+{NUMBER}\s+characters\b",
        rf"\bpaus\w*[^.|]{{0,40}}?\b{NUMBER}\s+minutes\b",
    } <= found


def test_a_stale_number_in_a_sentence_is_found():
    stale = "Messages older than those are folded, 25 at a time, and folding pauses for 15 minutes."
    assert [(stated in STATEMENTS[pattern]) for pattern, stated in statements(stale)] == [False, False]


def test_the_readme_stays_a_front_door():
    """The README says why, how to start and where to read on; measurements and history live in docs/."""
    assert len((ROOT / "README.md").read_bytes()) <= 8 * 1024
