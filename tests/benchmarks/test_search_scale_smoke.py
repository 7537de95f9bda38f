"""``benchmarks.search_scale`` at a tiny size on SQLite, so it cannot rot between runs (never timing)."""

from benchmarks import search, search_scale


async def test_the_scale_benchmark_reports_every_query_on_both_paths_and_finds_the_planted_fact():
    measured = await search_scale.main(session=300, rounds=1, backends=["sqlite"], table=2_000)

    report = search_scale.section(measured)
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in report.splitlines()
        if line.startswith("| sqlite |")
    ]
    assert {(row[3], row[4]) for row in rows} == {
        (path, query) for path in ("index", "words (LIKE)") for query in search_scale.QUERIES
    }
    planted = {row[4]: row[6] for row in rows if row[3] == "index"}
    assert {query for query, (_question, fact) in search_scale.QUERIES.items() if fact} == {
        query for query, found in planted.items() if found == "yes"
    }
    assert measured[0].real_indexed == 300 - search_scale.N_MESSAGES + 1  # all but the next turn's window


def test_its_section_sits_before_the_search_section_and_is_renewed_in_place(tmp_path):
    markdown = tmp_path / "benchmarks.md"
    search_section = f"{search.SECTION_MARKER}\n## Search of older messages\n"
    markdown.write_text(f"# Benchmarks\n\nother parts\n\n{search_section}", encoding="utf-8")
    first = f"{search_scale.SECTION_MARKER}\n## Scale\n\nfirst run\n"
    second = f"{search_scale.SECTION_MARKER}\n## Scale\n\nsecond run\n"

    search_scale.write_section(markdown, first)
    search_scale.write_section(markdown, second)

    assert markdown.read_text(encoding="utf-8") == f"# Benchmarks\n\nother parts\n\n{second}\n{search_section}"
