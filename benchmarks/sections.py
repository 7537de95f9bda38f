"""Sections of a report page that separate commands write: each from its marker to the next one (or the end).

``docs/eval.md`` holds the bundled server's eval and, after it, sections of real-model runs (``make eval-real-short``,
``make eval-real``, ``make eval-locomo``); a command renews its own and leaves the others as they are.
"""

from pathlib import Path

MARKER_START = "\n<!-- benchmarks."


def replace(page: Path, marker: str, text: str, *, ahead_of: str | None = None) -> None:
    """``page`` with ``text`` (which starts with ``marker``) in place of its section; a new one goes before the section
    ``ahead_of`` starts when the page has it (one that runs to the end of the page), else at the end."""
    current = page.read_text(encoding="utf-8") if page.exists() else ""
    before, found, after = current.partition(marker)
    if found:
        following = after[after.find(MARKER_START) :] if MARKER_START in after else ""
    elif ahead_of and ahead_of in current:
        before, found, after = current.partition(ahead_of)
        following = f"\n{found}{after}"
    else:
        following = ""
    head = before.rstrip("\n")
    page.write_text(f"{head}\n\n{text.rstrip()}\n{following}" if head else f"{text.rstrip()}\n{following}", "utf-8")


def saved(page: Path, marker: str) -> str:
    """The section of ``page`` that starts at ``marker`` (to the next section), or "" when it has none."""
    current = page.read_text(encoding="utf-8") if page.exists() else ""
    if marker not in current:
        return ""
    after = current.partition(marker)[2]
    return marker + (after[: after.find(MARKER_START)] if MARKER_START in after else after).rstrip("\n") + "\n"
