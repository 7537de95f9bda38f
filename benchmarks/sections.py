"""Sections of a report page that separate commands write: each from its marker to the next one (or the end).

``docs/eval.md`` holds the bundled server's eval and, after it, sections of real-model runs (``make eval-real-short``,
``make eval-real``, ``make eval-locomo``); a command renews its own and leaves the others as they are.
"""

from pathlib import Path

MARKER_START = "\n<!-- benchmarks."


def replace(page: Path, marker: str, text: str) -> None:
    """``page`` with ``text`` (which starts with ``marker``) in place of its section, or added at its end."""
    current = page.read_text(encoding="utf-8") if page.exists() else ""
    before, found, after = current.partition(marker)
    following = after[after.find(MARKER_START) :] if found and MARKER_START in after else ""
    head = before.rstrip("\n")
    page.write_text(f"{head}\n\n{text.rstrip()}\n{following}" if head else f"{text.rstrip()}\n{following}", "utf-8")
