"""docs/design.md's table of the names others rely on, read from the code that defines them.

Saved flows, operators' scripts, dashboards and other checks use these names: the component's own inputs, the
tables' columns and indexes, the Playground step's counts, the REST routes, the log events, the migrations and the
environment variables. Changing a row is a breaking change. ``python -m langflow_session_memory.contracts`` prints
the table; ``tests/test_contracts.py`` fails when the page's copy differs.
"""

from pathlib import Path

from sqlalchemy import Index, UniqueConstraint

from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory import log_events, settings
from langflow_session_memory.services.session_memory.agent import playground
from langflow_session_memory.services.session_memory.storage.model import session_memory_metadata

MIGRATIONS = Path(runner.__file__).resolve().parent / "versions"


def component_inputs() -> list[str]:
    """The inputs the Session Memory Agent adds to the stock Agent's: name, kind, default, where it shows."""
    from lfx.components.models_and_agents.agent import AgentComponent

    from langflow_session_memory.components.session_memory.session_memory_agent import SessionMemoryAgentComponent

    stock = {field.name for field in AgentComponent.inputs}
    return [
        f"`{field.name}` ({type(field).__name__}{_default(field)}{', advanced' if field.advanced else ''})"
        for field in SessionMemoryAgentComponent.inputs
        if field.name not in stock
    ]


def _default(field) -> str:
    value = getattr(field, "value", None)
    if isinstance(value, bool):
        return ", on" if value else ", off"
    return f", {value}" if isinstance(value, int) else ""


def tables() -> list[tuple[str, str]]:
    """(table, its columns in order, then its unique constraints and indexes) for each table of ours."""
    rows = []
    for table in session_memory_metadata.sorted_tables:
        columns = ", ".join(f"`{column.name}`" for column in table.columns)
        keys = sorted(
            f"unique `{item.name}`" if isinstance(item, UniqueConstraint) else f"index `{item.name}`"
            for item in (*table.constraints, *table.indexes)
            if isinstance(item, UniqueConstraint | Index) and item.name
        )
        rows.append((f"table `{table.name}`", "; ".join([columns, *keys])))
    return rows


def routes() -> list[str]:
    """Every route of the REST API and the summary page, as ``METHOD path``."""
    from langflow_session_memory.api import router

    return [
        f"`{' '.join(sorted(route.methods))} {route.path}`"
        for route in router.routes
        if getattr(route, "methods", None)
    ]


def migrations() -> list[str]:
    """The revisions, oldest first (every one EXPAND; the version table is our own)."""
    return [path.stem.split("_", 1)[0] for path in sorted(MIGRATIONS.glob("sm*.py"))]


def environment() -> list[str]:
    """The environment variables the service reads (``settings.*_VARIABLE``; a retired one is logged, ignored)."""
    return [f"`{getattr(settings, name)}`" for name in sorted(dir(settings)) if name.endswith("_VARIABLE")]


def markdown_table() -> str:
    rows = [
        ("component inputs", ", ".join(component_inputs())),
        *tables(),
        ("Playground step counts", ", ".join(f"`{name}`" for name in playground.STEP_FIELDS)),
        ("REST routes (prefix `/api/v1/session_memory`)", ", ".join(routes()).replace("/api/v1/session_memory", "")),
        ("log events", ", ".join(f"`{event.name}`" for event in log_events.CATALOGUE)),
        (
            f"migrations (version table `{runner.VERSION_TABLE}`)",
            ", ".join(f"`{revision}`" for revision in migrations()),
        ),
        ("environment", ", ".join(environment())),
    ]
    return "\n".join(["| what | names |", "| --- | --- |", *(f"| {what} | {names} |" for what, names in rows)])


if __name__ == "__main__":
    print(markdown_table())  # noqa: T201
