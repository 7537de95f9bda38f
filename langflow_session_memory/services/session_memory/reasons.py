"""What a log line or the state row may say about an error: its kind, never its text.

Error texts carry what users wrote: SQLAlchemy's errors quote the statement's parameters
(a summary being written), and providers quote the prompt or the partial answer. So only
the exception's type, the database driver's error type, an HTTP status and a provider's
error code leave this module; our own validation messages, which hold counts only, are the
one text kept.
"""

import re

from sqlalchemy.exc import StatementError

from langflow_session_memory.services.session_memory.rules.state import TABLE_NAME

MIGRATE_COMMAND = "python -m langflow_session_memory migrate"
# SQLite's and PostgreSQL's wording for a missing table; matched, never logged.
_TABLE_MISSING = re.compile(rf"no such table: {TABLE_NAME}\b|relation \"{TABLE_NAME}\" does not exist")


class CountsOnlyError(ValueError):
    """An error of ours whose message holds counts and names only, never what users wrote: logged as it is."""


def describe(error: BaseException) -> str:
    """A short, text-free reason such as ``BadRequestError status=400 code=unsupported_value``.

    A missing ``session_memory_state`` says so, with the command that restores it.
    """
    if isinstance(error, CountsOnlyError):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, StatementError):
        if table_missing(error):
            return f"table_missing table={TABLE_NAME} fix={MIGRATE_COMMAND!r}"
        return f"{type(error).__name__} driver={type(error.orig).__name__}"
    parts = [type(error).__name__]
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        parts.append(f"status={status}")
    code = getattr(error, "code", None)
    if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) <= 64:
        parts.append(f"code={code}")
    return " ".join(parts)


def table_missing(error: StatementError) -> bool:
    """Whether the database said ``session_memory_state`` does not exist (the driver's text, matched, never logged)."""
    return bool(_TABLE_MISSING.search(str(error.orig)))
