"""Alembic environment for this extension, run on a connection the runner hands in.

It never looks at Langflow's tables or its ``alembic_version``: our own version table and
``include_name`` keep the two migration histories apart in one database.
"""

from alembic import context
from sqlalchemy import text

from langflow_session_memory.migrations.runner import POSTGRES_LOCK_KEY, VERSION_TABLE
from langflow_session_memory.services.session_memory.storage.model import session_memory_metadata


def include_name(name: str | None, type_: str, parent_names: dict[str, str | None]) -> bool:  # noqa: ARG001
    """Compare only our own tables; the rest of the database belongs to Langflow and others."""
    if type_ != "table":
        return True
    return name in session_memory_metadata.tables


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=session_memory_metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Every Langflow worker migrates at start-up: the first one wins, the rest wait here.
            connection.execute(text("SET LOCAL lock_timeout = '180s'"))
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": POSTGRES_LOCK_KEY})
        context.run_migrations()


run_migrations_online()
