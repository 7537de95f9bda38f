"""Operator CLI: ``python -m langflow_session_memory migrate|status [--url URL]``."""

import argparse
import asyncio
import sys

from langflow_session_memory.migrations import runner


def langflow_database_url() -> str:
    """The database Langflow itself would use: ``LANGFLOW_DATABASE_URL`` or its default SQLite file."""
    from lfx.services.deps import get_settings_service

    return get_settings_service().settings.database_url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m langflow_session_memory")
    parser.add_argument("command", choices=["migrate", "status"])
    parser.add_argument("--url", help="database URL (default: Langflow's own, from LANGFLOW_DATABASE_URL)")
    args = parser.parse_args(argv)
    url = args.url or langflow_database_url()
    if args.command == "migrate":
        asyncio.run(runner.upgrade(url))
    current = asyncio.run(runner.current_revision(url))
    head = runner.head_revision()
    state = "up to date" if current == head else "behind"
    print(f"session_memory_state: revision {current or 'none'} (head {head}, {state}) on {url.split('://')[0]}")
    return 0 if current == head else 1


if __name__ == "__main__":
    sys.exit(main())
