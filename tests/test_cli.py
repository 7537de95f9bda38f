"""The operator CLI on SQLite and PostgreSQL: list, show and reset a session's memory; migrate and status."""

import asyncio
import uuid

from langflow_session_memory.__main__ import main
from langflow_session_memory.migrations import runner
from langflow_session_memory.services.session_memory import store
from langflow_session_memory.services.session_memory.model import SessionKey, SessionState
from tests.databases import langflow_schema_database

NOTES = "Key facts:\n- customer ACME-9\nConversation so far:\n- the user named the customer"


def seed(url: str, *keys: SessionKey) -> None:
    async def write():
        async with langflow_schema_database(url) as sessions, sessions.begin() as session:
            for key in keys:
                seen = await store.create_if_absent(session, key)
                await store.compare_and_swap(session, seen, SessionState(key, summary=NOTES, folded_count=20))

    asyncio.run(write())


def test_list_show_and_reset_one_session(database_url, capsys):
    flow_id, owner = uuid.uuid4(), uuid.uuid4()
    mine, other = SessionKey(flow_id, owner, "s-1"), SessionKey(flow_id, owner, "s-2")
    seed(database_url, mine, other, SessionKey(uuid.uuid4(), owner, "s-1"))

    assert main(["list", "--url", database_url, "--flow-id", str(flow_id)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 3  # header and this flow's two sessions
    assert {line.split("\t")[0] for line in listed[1:]} == {"s-1", "s-2"}

    assert main(["show", "--url", database_url, "--flow-id", str(flow_id), "--session-id", "s-1"]) == 0
    shown = capsys.readouterr().out
    assert "ACME-9" in shown
    assert "folded 20 messages" in shown

    assert main(["reset", "--url", database_url, "--flow-id", str(flow_id), "--session-id", "s-1"]) == 0
    assert "reset 1 row(s)" in capsys.readouterr().out
    assert main(["show", "--url", database_url, "--flow-id", str(flow_id), "--session-id", "s-1"]) == 1
    assert main(["show", "--url", database_url, "--flow-id", str(flow_id), "--session-id", "s-2"]) == 0


def test_migrate_and_status_take_the_url_after_the_command(database_url, capsys):
    assert main(["status", "--url", database_url]) == 1
    assert main(["migrate", "--url", database_url]) == 0
    head = runner.head_revision()
    assert f"migrated none -> {head} (created the table session_memory_state)" in capsys.readouterr().out
    assert main(["migrate", "--url", database_url]) == 0
    assert "up to date" in capsys.readouterr().out
