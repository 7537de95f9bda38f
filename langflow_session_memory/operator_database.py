"""Which database the operator CLI opens: the one Langflow uses, found without creating anything.

Precedence, first match wins:

1. ``--url``;
2. ``LANGFLOW_DATABASE_URL`` (it wins in Langflow too);
3. the checkout's ``.langflow/langflow.db``, when this package runs from a checkout and
   ``make run`` created that file: ``make run`` is how a checkout starts Langflow, and
   Langflow's own default there is a file inside ``.venv`` that only a bare
   ``langflow run`` creates;
4. Langflow's default SQLite file, when it exists, computed as
   ``lfx/services/settings/groups/database.py`` does: ``langflow.db`` beside the installed
   ``langflow`` package, or in ``LANGFLOW_CONFIG_DIR`` (else the user cache dir) with
   ``LANGFLOW_SAVE_DB_IN_CONFIG_DIR=true``.

Langflow's settings object is not used to find it: building it creates the config dir and
may copy a ``./langflow.db`` into site-packages. An SQLite file that does not exist is an
error here, never created: an operator command that creates an empty database hides the
real one.
"""

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import inspect, make_url
from sqlalchemy.exc import DBAPIError

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory.storage.model import TABLE_NAME

CHECKOUT = Path(__file__).resolve().parent.parent
CHECKOUT_LABEL = "the checkout's make run database"
DEFAULT_LABEL = "Langflow's default"
# pydantic's words for true, as Langflow's settings parse LANGFLOW_SAVE_DB_IN_CONFIG_DIR.
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})


class DatabaseProblem(Exception):
    """The database cannot be used as asked; the message is the one line the operator reads."""


@dataclass(frozen=True)
class DatabaseChoice:
    url: str
    source: str
    also_found: str | None = None  # a later candidate that exists too, named so nobody guesses

    def opened_line(self) -> str:
        line = f"database: {shown(self.url)} ({self.source})"
        return f"{line}; {self.also_found} exists too (--url picks it)" if self.also_found else line


def shown(url: str) -> str:
    """The URL without its password."""
    return make_url(url).render_as_string(hide_password=True)


def sqlite_file(url: str) -> Path | None:
    """The file an SQLite URL names, absolute; None for another backend or an in-memory database."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).resolve()


def checkout_database(checkout: Path = CHECKOUT) -> Path:
    """The file ``make run`` uses (the Makefile's ``LOCAL_DB``)."""
    return checkout / ".langflow" / "langflow.db"


def langflow_default_database(environ: Mapping[str, str] = os.environ) -> Path:
    """Where Langflow keeps its SQLite file when ``LANGFLOW_DATABASE_URL`` is unset.

    Found without importing ``langflow`` (a quarter of a minute). lfx 1.13 reads a stub
    version (0.1.0) for its pre-release check, so the name is always ``langflow.db``.
    """
    if environ.get("LANGFLOW_SAVE_DB_IN_CONFIG_DIR", "").strip().lower() in _TRUE:
        from platformdirs import user_cache_dir

        directory = Path(environ.get("LANGFLOW_CONFIG_DIR") or user_cache_dir("langflow", "langflow"))
    else:
        directory = Path(importlib.util.find_spec("langflow").origin).parent
    return directory.resolve() / "langflow.db"


def choose_database(
    url_option: str | None, environ: Mapping[str, str], candidates: Sequence[tuple[str, Path]]
) -> DatabaseChoice:
    """The first of ``--url``, ``LANGFLOW_DATABASE_URL`` and the existing candidate files (label, path)."""
    if url_option:
        return DatabaseChoice(url_option, "--url")
    if environ.get("LANGFLOW_DATABASE_URL"):
        return DatabaseChoice(environ["LANGFLOW_DATABASE_URL"], "LANGFLOW_DATABASE_URL")
    existing = [(label, path) for label, path in candidates if path.exists()]
    if not existing:
        looked = " nor ".join(f"{label} {path}" for label, path in candidates)
        raise DatabaseProblem(
            f"no Langflow database found: LANGFLOW_DATABASE_URL is unset and neither {looked} exists;"
            " start Langflow once (make run), or pass --url"
        )
    (label, path), *others = existing
    return DatabaseChoice(f"sqlite:///{path}", label, f"{others[0][0]} {others[0][1]}" if others else None)


def require_existing_file(choice: DatabaseChoice) -> None:
    """Refuse an SQLite file that does not exist, before any driver would create it."""
    path = sqlite_file(choice.url)
    if path is not None and not path.exists():
        raise DatabaseProblem(
            f"no database at {path} (from {choice.source}); nothing was created:"
            " check the path, or start Langflow once to create it"
        )


async def has_table(url: str) -> bool:
    """Whether ``session_memory_state`` exists; a database that cannot be opened is a :class:`DatabaseProblem`."""
    engine = runner.database_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(lambda sync: inspect(sync).has_table(TABLE_NAME))
    except DBAPIError as error:
        first_line = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else ""
        raise DatabaseProblem(f"cannot open {shown(url)}: {type(error.orig).__name__}: {first_line}") from error
    finally:
        await engine.dispose()
