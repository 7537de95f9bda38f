"""A table in the docs that code generates, read back from between its markers for a test to compare."""

from pathlib import Path


def generated_table(page: Path, name: str) -> str:
    """The text between ``<!-- {name} ... -->`` and ``<!-- /{name} -->`` on ``page``, without its last line break."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"<!-- {name}")
    return text[text.index("\n", start) + 1 : text.index(f"<!-- /{name} -->")].rstrip("\n")
