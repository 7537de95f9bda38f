"""Operator CLI on the database Langflow uses (see ``operator_database`` for how it is found), and ``run``.

    python -m langflow_session_memory run [--host H] [--port P] [--model-host MH] [--model-port MP]
    python -m langflow_session_memory migrate|status [--url URL]
    python -m langflow_session_memory list  --flow-id F
    python -m langflow_session_memory show  --flow-id F --session-id S [--context-id C] [--owner-id O]
    python -m langflow_session_memory reset --flow-id F --session-id S [--context-id C] [--owner-id O]

Operators see every owner's rows; ``--owner-id`` narrows to one. The database it opened goes
to stderr. Exit codes: 0 done, 1 nothing to show or migrations behind, 2 no usable database
or table (one line on stderr, nothing created).
"""

import argparse
import asyncio
import os
import sys
from uuid import UUID

from sqlalchemy.ext.asyncio import async_sessionmaker

from langflow_session_memory import launcher, operator_database
from langflow_session_memory.migrations import runner
from langflow_session_memory.operator_database import DatabaseProblem, shown
from langflow_session_memory.services.session_memory.reasons import MIGRATE_COMMAND
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS
from langflow_session_memory.services.session_memory.storage import cleanup, store
from langflow_session_memory.services.session_memory.storage.model import TABLE_NAME
from langflow_session_memory.services.session_memory.summary.validation import word_count

CANNOT = 2


async def _on_database(url: str, work):
    engine = runner.database_engine(url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            return await work(session)
    finally:
        await engine.dispose()


def _rows(arguments):
    async def find(session):
        return await store.find(
            session,
            arguments.flow_id,
            owner_id=arguments.owner_id,
            session_id=getattr(arguments, "session_id", None),
            context_id=getattr(arguments, "context_id", None),
            limit=arguments.limit,
        )

    return find


def printable(text: str | None) -> str:
    """``text`` for a terminal: control characters (a newline that would forge a row, an escape code) and the backslash
    written as Python escapes, the rest (any script) as it is."""
    return "".join(
        character if character.isprintable() and character != "\\" else repr(character)[1:-1] for character in str(text)
    )


def _list(url: str, arguments) -> int:
    rows = asyncio.run(_on_database(url, _rows(arguments)))
    print("session_id\tcontext_id\towner_id\tfolded\twords\tupdated_at\tpaused_until")
    for row in rows:
        print(
            f"{printable(row.session_id)}\t{printable(row.context_id)}\t{row.owner_id}\t{row.folded_count}\t"
            f"{word_count(row.summary)}\t{row.updated_at.isoformat()}\t"
            f"{row.paused_until.isoformat() if row.paused_until else '-'}"
        )
    return 0


def _show(url: str, arguments) -> int:
    rows = asyncio.run(_on_database(url, _rows(arguments)))
    for row in rows:
        print(f"session {row.session_id!r} context {row.context_id!r} owner {row.owner_id}")
        print(f"  folded {row.folded_count} messages, version {row.version}, updated {row.updated_at.isoformat()}")
        if row.paused_until:
            print(f"  folding paused until {row.paused_until.isoformat()}: {printable(row.last_error)}")
        lines = (row.summary or "(no summary yet)").splitlines()
        print("\n".join(f"  {printable(line)}" for line in lines))
    if not rows:
        print("no session memory for that flow and session")
    return 0 if rows else 1


def _reset(url: str, arguments) -> int:
    async def reset(session):
        removed = await cleanup.reset(
            session,
            arguments.flow_id,
            owner_id=arguments.owner_id,
            session_id=arguments.session_id,
            context_id=arguments.context_id,
        )
        await session.commit()
        return removed

    removed = asyncio.run(_on_database(url, reset))
    print(f"reset {removed} row(s): the next turn folds the session again from its start")
    return 0


def _migration(url: str, command: str, table_existed: bool) -> int:
    where = shown(url)
    before = asyncio.run(runner.current_revision(url))
    if command == "migrate":
        asyncio.run(runner.upgrade(url))
    current = asyncio.run(runner.current_revision(url))
    head = runner.head_revision()
    if command == "migrate" and before != current:
        created = " (created the table session_memory_state)" if before is None else ""
        print(f"session_memory_state: migrated {before or 'none'} -> {current}{created} on {where}")
    elif command == "migrate" and not table_existed:
        print(f"session_memory_state: recreated the table (revision {current} was recorded without it) on {where}")
    elif current is not None and not table_existed:
        print(f"session_memory_state: revision {current} is recorded but the table is missing on {where}; run migrate")
        return 1
    else:
        state = "up to date" if current == head else "behind"
        print(f"session_memory_state: revision {current or 'none'} (head {head}, {state}) on {where}")
    return 0 if current == head else 1


def _parser() -> argparse.ArgumentParser:
    database = argparse.ArgumentParser(add_help=False)
    database.add_argument(
        "--url",
        help="database URL (default: LANGFLOW_DATABASE_URL, else the checkout's .langflow/langflow.db,"
        " else Langflow's default file; never created)",
    )
    parser = argparse.ArgumentParser(prog="python -m langflow_session_memory")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="Langflow with this extension; the bundled model server when no model key is set")
    commands.add_parser("migrate", parents=[database], help="bring session_memory_state to the newest revision")
    commands.add_parser("status", parents=[database], help="the revision applied; exit 1 when behind")
    for name, help_text, per_session in (
        ("list", "the flow's sessions that have session memory", False),
        ("show", "a session's summary and its state", True),
        ("reset", "forget a session's summary (the next turn folds it again)", True),
    ):
        command = commands.add_parser(name, parents=[database], help=help_text)
        command.add_argument("--flow-id", type=UUID, required=True)
        command.add_argument("--owner-id", type=UUID, help="only this owner's rows (default: every owner)")
        if per_session:
            command.add_argument("--session-id", required=True)
            command.add_argument("--context-id", help="only this Agent Context ID ('' for none; default: every one)")
        command.add_argument("--limit", type=int, default=BOUNDS.list_limit, help=argparse.SUPPRESS)
    return parser


def _database(url_option: str | None) -> operator_database.DatabaseChoice:
    candidates = [
        (operator_database.CHECKOUT_LABEL, operator_database.checkout_database()),
        (operator_database.DEFAULT_LABEL, operator_database.langflow_default_database()),
    ]
    choice = operator_database.choose_database(url_option, os.environ, candidates)
    operator_database.require_existing_file(choice)
    return choice


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:  # Langflow and, without a model key, the bundled model server (``launcher``)
        return launcher.main(argv[1:])
    arguments = _parser().parse_args(argv)
    try:
        choice = _database(arguments.url)
        print(choice.opened_line(), file=sys.stderr)
        table_exists = asyncio.run(operator_database.has_table(choice.url))
    except DatabaseProblem as problem:
        print(problem, file=sys.stderr)
        return CANNOT
    if arguments.command in ("migrate", "status"):
        return _migration(choice.url, arguments.command, table_exists)
    if not table_exists:
        print(
            f"no table {TABLE_NAME} in {shown(choice.url)}: start Langflow with this extension once"
            f" (it migrates at start-up), or run: {MIGRATE_COMMAND}",
            file=sys.stderr,
        )
        return CANNOT
    return {"list": _list, "show": _show, "reset": _reset}[arguments.command](choice.url, arguments)


if __name__ == "__main__":
    sys.exit(main())
