"""The catalogue of log events (``log_events``) is what the code writes and what docs/operations.md lists.

Read from the package's source (its syntax tree): every line the code logs starts with an event of the
catalogue and carries only the fields the catalogue names for it, no event name is written as a bare
string, and the docs' table is the catalogue's.
"""

import ast
import re
from pathlib import Path

import pytest

import langflow_session_memory
from langflow_session_memory.services.session_memory import log_events
from tests.generated_docs import generated_table

PACKAGE = Path(langflow_session_memory.__file__).parent
CATALOGUE_MODULE = Path(log_events.__file__)
OPERATIONS = PACKAGE.parent / "docs" / "operations.md"
EVENT_NAME = re.compile(r"^session_(memory|summary|context)_[a-z_]+$")
EVENT_LINE = re.compile(r"^session_(memory|summary|context)_[a-z_]+ \w+=")  # what a log line looks like
FIELD = re.compile(r"(\w+)=")
NAMES = {event.name for event in log_events.CATALOGUE}
BY_CONSTANT = {name: value for name, value in vars(log_events).items() if isinstance(value, log_events.Event)}


def sources() -> list[Path]:
    return [path for path in PACKAGE.rglob("*.py") if path != CATALOGUE_MODULE]


def logged_lines(path: Path):
    """Each f-string of ``path`` that starts with ``log_events.<EVENT>``: the event and the keys written after it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.JoinedStr) or not node.values:
            continue
        first = node.values[0]
        if not (isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Attribute)):
            continue
        owner = first.value.value
        if isinstance(owner, ast.Name) and owner.id == "log_events":
            text = "".join(part.value for part in node.values[1:] if isinstance(part, ast.Constant))
            yield first.value.attr, set(FIELD.findall(text)), node.lineno


def test_the_catalogue_names_each_event_once_and_every_constant_is_in_it():
    names = [event.name for event in log_events.CATALOGUE]
    assert len(names) == len(set(names))
    assert set(BY_CONSTANT.values()) == set(log_events.CATALOGUE)
    assert all(EVENT_NAME.match(name) for name in names)


def test_every_logged_line_starts_with_a_catalogued_event_and_carries_only_its_fields():
    written, wrong = set(), []
    for path in sources():
        for constant, keys, line in logged_lines(path):
            event = BY_CONSTANT.get(constant)
            assert event is not None, f"{path.name}:{line} logs log_events.{constant}, which is not an event"
            unknown = keys - set(FIELD.findall(event.fields))
            wrong += [f"{path.name}:{line} writes {sorted(unknown)} on {event.name}"] if unknown else []
            written.add(event.name)
    assert wrong == [], "fields missing from the catalogue"
    # Two events are written through a parameter (``with_memory``'s failure_event), not an f-string of their own.
    by_parameter = {log_events.CALL_SIZE_FAILED.name, log_events.SEARCH_FAILED.name}
    assert written | by_parameter == {event.name for event in log_events.CATALOGUE}


@pytest.mark.parametrize("path", sources(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_event_is_written_as_a_bare_string(path):
    bare = [
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (EVENT_LINE.match(node.value) or node.value.split(" ", 1)[0] in NAMES)
    ]
    assert bare == []


def test_the_operations_guide_lists_the_catalogue():
    assert generated_table(OPERATIONS, "log_events.markdown_table") == log_events.markdown_table(), (
        "docs/operations.md's table of log events is not the catalogue's: replace it with the output of "
        "`python -m langflow_session_memory.services.session_memory.log_events`"
    )


def test_failures_are_the_error_events_and_problems_include_every_failed_fold_and_fallback():
    assert set(log_events.FAILURES) == {event.name for event in log_events.CATALOGUE if event.level == "ERROR"}
    assert {log_events.FALLBACK.name, log_events.FOLD_FAILED.name, log_events.PAUSED.name} <= set(log_events.PROBLEMS)


LOGGER_LEVELS = {
    "adebug": "DEBUG",
    "debug": "DEBUG",
    "ainfo": "INFO",
    "info": "INFO",
    "awarning": "WARNING",
    "warning": "WARNING",
    "aerror": "ERROR",
    "error": "ERROR",
    "aexception": "ERROR",
    "exception": "ERROR",
}


def logger_calls(path: Path):
    """Each ``logger.<level>(f"{log_events.<EVENT>} ...")`` call of ``path``: its event constant, level and line."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr not in LOGGER_LEVELS or not isinstance(node.args[0], ast.JoinedStr):
            continue
        first = node.args[0].values[0] if node.args[0].values else None
        if isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Attribute):
            owner = first.value.value
            if isinstance(owner, ast.Name) and owner.id == "log_events":
                yield first.value.attr, LOGGER_LEVELS[node.func.attr], node.lineno


def test_every_event_is_written_at_the_level_the_catalogue_gives_it():
    wrong = [
        f"{path.name}:{line} writes {BY_CONSTANT[constant].name} at {level}, the catalogue says"
        f" {BY_CONSTANT[constant].level}"
        for path in sources()
        for constant, level, line in logger_calls(path)
        if constant in BY_CONSTANT and level != BY_CONSTANT[constant].level
    ]
    assert wrong == []
