"""``benchmarks.sections``: each command renews its own section of a report page and leaves the others."""

from benchmarks import sections

FIRST, SECOND = "<!-- benchmarks.first -->", "<!-- benchmarks.second -->"


def test_a_section_is_renewed_in_place_and_the_ones_after_it_are_kept(tmp_path):
    page = tmp_path / "eval.md"
    page.write_text(f"# Eval\n\nthe bundled run\n\n{FIRST}\n## old first\n\n{SECOND}\n## second\n", encoding="utf-8")

    sections.replace(page, FIRST, f"{FIRST}\n## new first")

    assert page.read_text(encoding="utf-8") == (
        f"# Eval\n\nthe bundled run\n\n{FIRST}\n## new first\n\n{SECOND}\n## second\n"
    )


def test_a_missing_section_is_added_at_the_end_and_a_missing_page_is_made(tmp_path):
    page = tmp_path / "eval.md"
    sections.replace(page, SECOND, f"{SECOND}\n## second")
    sections.replace(page, FIRST, f"{FIRST}\n## first")

    assert page.read_text(encoding="utf-8") == f"{SECOND}\n## second\n\n{FIRST}\n## first\n"


def test_a_new_section_goes_ahead_of_the_one_named_and_is_read_back_alone(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\n{SECOND}\n## second, to the end\n", encoding="utf-8")

    sections.replace(page, FIRST, f"{FIRST}\n## first", ahead_of=SECOND)

    assert page.read_text(encoding="utf-8") == f"# Benchmarks\n\n{FIRST}\n## first\n\n{SECOND}\n## second, to the end\n"
    assert sections.saved(page, FIRST) == f"{FIRST}\n## first\n"
    assert sections.saved(page, "<!-- benchmarks.none -->") == ""
