"""``benchmarks.search`` at a tiny size on SQLite, so it cannot rot between runs (never timing)."""

from benchmarks import search


async def test_the_search_benchmark_reports_every_query_and_renews_its_section(tmp_path):
    report = await search.main(sizes=[300], rounds=1, backends=["sqlite"])

    rows = [line.split("|") for line in report.splitlines() if line.startswith("| sqlite |")]
    assert len(rows) == 2 * len(search.QUERIES)  # the tool's search and a turn's excerpts
    assert {row[5].strip() for row in rows[-2:]} == {"0"}  # the word found nowhere shows nothing
    markdown = tmp_path / "benchmarks.md"
    markdown.write_text("# Benchmarks\n\nother parts\n", encoding="utf-8")
    search.write_section(markdown, report)
    search.write_section(markdown, report)
    assert markdown.read_text(encoding="utf-8") == f"# Benchmarks\n\nother parts\n\n{report}"


def test_a_report_of_make_bench_keeps_the_search_section(tmp_path, monkeypatch):
    from benchmarks import report

    section = f"{search.SECTION_MARKER}\n## Search of older messages\n\n| sqlite | ... |\n"
    (tmp_path / "benchmarks.md").write_text(f"# Benchmarks\n\nan older run\n\n{section}", encoding="utf-8")
    monkeypatch.setattr(report, "render", lambda _results, _seconds: "# Benchmarks\n\na new run\n")
    monkeypatch.setattr(report, "plot", lambda _results, _docs: [])
    monkeypatch.setattr(report, "asdict", lambda _results: {})

    report.write(results=None, docs=tmp_path, total_seconds=1.0)

    assert (tmp_path / "benchmarks.md").read_text(encoding="utf-8") == f"# Benchmarks\n\na new run\n\n{section}"


def test_a_report_of_make_bench_keeps_the_scale_section_too(tmp_path, monkeypatch):
    from benchmarks import report, search_scale

    scale = f"{search_scale.SECTION_MARKER}\n## Excerpts from the full-text index at scale\n\n| postgresql | ... |\n"
    section = f"{search.SECTION_MARKER}\n## Search of older messages\n\n| sqlite | ... |\n"
    (tmp_path / "benchmarks.md").write_text(f"# Benchmarks\n\nan older run\n\n{scale}\n{section}", encoding="utf-8")
    monkeypatch.setattr(report, "render", lambda _results, _seconds: "# Benchmarks\n\na new run\n")
    monkeypatch.setattr(report, "plot", lambda _results, _docs: [])
    monkeypatch.setattr(report, "asdict", lambda _results: {})

    report.write(results=None, docs=tmp_path, total_seconds=1.0)

    written = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert written.startswith("# Benchmarks\n\na new run\n")
    assert scale in written
    assert written.index(search_scale.SECTION_MARKER) < written.index(search.SECTION_MARKER)
    assert written.endswith(section)
