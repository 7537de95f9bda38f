"""The operator CLI on SQLite and PostgreSQL: which database it opens, its one-line errors, list/show/reset, migrate."""

import asyncio
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from langflow_session_memory import operator_database
from langflow_session_memory.__main__ import main
from langflow_session_memory.migrations import runner
from langflow_session_memory.operator_database import CHECKOUT_LABEL, DEFAULT_LABEL, DatabaseProblem, choose_database
from langflow_session_memory.services.session_memory.rules.state import SessionKey, SessionState
from langflow_session_memory.services.session_memory.storage import store
from langflow_session_memory.services.session_memory.storage.model import TABLE_NAME
from tests.databases import fresh_postgres_database, langflow_schema_database

ROOT = Path(__file__).parent.parent
SUMMARY = "Key facts:\n- customer ACME-9\nConversation so far:\n- the user named the customer"
FLOW = "00000000-0000-0000-0000-000000000f10"


def seed(url: str, *keys: SessionKey) -> None:
    async def write():
        async with langflow_schema_database(url) as sessions, sessions.begin() as session:
            for key in keys:
                seen = await store.create_if_absent(session, key)
                await store.compare_and_swap(session, seen, SessionState(key, summary=SUMMARY, folded_count=20))

    asyncio.run(write())


def langflow_started_once(url: str) -> None:
    """The database file exists, as after Langflow's first start (PostgreSQL databases already do)."""
    if path := operator_database.sqlite_file(url):
        sqlite3.connect(path).close()


def drop_table(url: str) -> None:
    async def drop():
        engine = runner.database_engine(url)
        async with engine.begin() as connection:
            await connection.execute(text(f"DROP TABLE {TABLE_NAME}"))
        await engine.dispose()

    asyncio.run(drop())


@pytest.fixture
def no_database_setting(monkeypatch):
    monkeypatch.delenv("LANGFLOW_DATABASE_URL", raising=False)
    monkeypatch.delenv("LANGFLOW_SAVE_DB_IN_CONFIG_DIR", raising=False)


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
    langflow_started_once(database_url)
    assert main(["status", "--url", database_url]) == 1
    assert main(["migrate", "--url", database_url]) == 0
    head = runner.head_revision()
    assert f"migrated none -> {head} (created the table session_memory_state)" in capsys.readouterr().out
    assert main(["migrate", "--url", database_url]) == 0
    assert "up to date" in capsys.readouterr().out


def test_migrate_after_a_dropped_table_says_it_recreated_it(database_url, capsys):
    asyncio.run(runner.upgrade(database_url))
    drop_table(database_url)

    assert main(["status", "--url", database_url]) == 1
    assert "is recorded but the table is missing" in capsys.readouterr().out
    assert main(["migrate", "--url", database_url]) == 0
    out = capsys.readouterr().out
    assert f"recreated the table (revision {runner.head_revision()} was recorded without it)" in out
    assert "up to date" not in out
    assert main(["list", "--url", database_url, "--flow-id", FLOW]) == 0


def test_the_opened_database_is_named_on_stderr(database_url, monkeypatch, capsys):
    seed(database_url)
    monkeypatch.setenv("LANGFLOW_DATABASE_URL", database_url)

    assert main(["list", "--flow-id", FLOW]) == 0

    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"database: {operator_database.shown(database_url)} (LANGFLOW_DATABASE_URL)"]
    assert captured.out.startswith("session_id\t")  # stdout stays the table alone


@pytest.mark.parametrize(
    "command",
    [
        ["list", "--flow-id", FLOW],
        ["show", "--flow-id", FLOW, "--session-id", "s"],
        ["reset", "--flow-id", FLOW, "--session-id", "s"],
        ["migrate"],
        ["status"],
    ],
)
def test_a_missing_sqlite_file_is_one_line_and_never_created(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    assert main([*command, "--url", "sqlite:///missing.db"]) == 2

    assert capsys.readouterr().err.splitlines() == [
        f"no database at {tmp_path / 'missing.db'} (from --url); nothing was created:"
        " check the path, or start Langflow once to create it"
    ]
    assert not (tmp_path / "missing.db").exists()


def test_a_missing_table_is_one_line_naming_the_fix(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'langflow.db'}"
    langflow_started_once(url)

    assert main(["show", "--url", url, "--flow-id", FLOW, "--session-id", "s"]) == 2

    assert capsys.readouterr().err.splitlines()[1:] == [
        f"no table session_memory_state in {url}: start Langflow with this extension once (it migrates at"
        " start-up), or run: python -m langflow_session_memory migrate"
    ]


@pytest.mark.postgres
def test_a_missing_postgres_database_is_one_line(capsys):
    with fresh_postgres_database() as url:
        missing = f"{url}_missing"

    assert main(["list", "--url", missing, "--flow-id", FLOW]) == 2

    (error,) = capsys.readouterr().err.splitlines()[1:]
    assert error.startswith(f"cannot open {missing}: OperationalError: ")
    assert "does not exist" in error


def test_the_python_module_answers_a_missing_database_without_a_traceback(tmp_path):
    missing = tmp_path / "langflow.db"
    environment = {name: value for name, value in os.environ.items() if name != "LANGFLOW_DATABASE_URL"}

    result = subprocess.run(
        [sys.executable, "-m", "langflow_session_memory", "reset", "--flow-id", FLOW, "--session-id", "s"],
        env={**environment, "LANGFLOW_DATABASE_URL": f"sqlite:///{missing}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not missing.exists()


def run_make(*arguments: str, **variables: str) -> subprocess.CompletedProcess:
    """``make -s ...`` in the checkout as a user types it (this process's LANGFLOW_DATABASE_URL left out), with
    ``variables`` in its environment."""
    environment = {name: value for name, value in os.environ.items() if name != "LANGFLOW_DATABASE_URL"}
    environment |= variables
    return subprocess.run(
        ["make", "-s", *arguments], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


def test_make_memory_list_reads_the_database_make_run_uses(tmp_path):
    """``make memory-list`` and ``make run`` share the Makefile's LOCAL_DB (overridden here to a seeded file)."""
    url = f"sqlite:///{tmp_path / 'langflow.db'}"
    seed(url, SessionKey(uuid.UUID(FLOW), uuid.uuid4(), FLOW))

    result = run_make("memory-list", f"FLOW={FLOW}", f"LOCAL_DB={url}")

    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"database: {url} (LANGFLOW_DATABASE_URL)"]
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == ["session_id", FLOW]


def test_the_url_option_wins_over_langflow_database_url():
    choice = choose_database("sqlite:///a.db", {"LANGFLOW_DATABASE_URL": "sqlite:///b.db"}, [])
    assert (choice.url, choice.source) == ("sqlite:///a.db", "--url")


def test_langflow_database_url_wins_over_existing_files(tmp_path):
    (tmp_path / "checkout.db").touch()
    choice = choose_database(
        None, {"LANGFLOW_DATABASE_URL": "postgresql://db/langflow"}, [(CHECKOUT_LABEL, tmp_path / "checkout.db")]
    )
    assert (choice.url, choice.source) == ("postgresql://db/langflow", "LANGFLOW_DATABASE_URL")


def test_the_checkout_database_comes_before_langflows_default_which_is_named_too(tmp_path):
    checkout, default = tmp_path / "checkout.db", tmp_path / "default.db"
    checkout.touch()
    default.touch()

    choice = choose_database(None, {}, [(CHECKOUT_LABEL, checkout), (DEFAULT_LABEL, default)])

    assert choice.opened_line() == (
        f"database: sqlite:///{checkout} ({CHECKOUT_LABEL}); {DEFAULT_LABEL} {default} exists too (--url picks it)"
    )


def test_langflows_default_is_used_when_there_is_no_checkout_database(tmp_path):
    default = tmp_path / "default.db"
    default.touch()
    choice = choose_database(None, {}, [(CHECKOUT_LABEL, tmp_path / "none.db"), (DEFAULT_LABEL, default)])
    assert (choice.url, choice.source, choice.also_found) == (f"sqlite:///{default}", DEFAULT_LABEL, None)


def test_with_no_setting_and_no_file_the_cli_says_where_it_looked(tmp_path, monkeypatch, no_database_setting, capsys):
    monkeypatch.setattr(operator_database, "checkout_database", lambda: tmp_path / "checkout.db")
    monkeypatch.setattr(operator_database, "langflow_default_database", lambda: tmp_path / "default.db")

    assert main(["list", "--flow-id", FLOW]) == 2

    assert capsys.readouterr().err.splitlines() == [
        f"no Langflow database found: LANGFLOW_DATABASE_URL is unset and neither {CHECKOUT_LABEL}"
        f" {tmp_path / 'checkout.db'} nor {DEFAULT_LABEL} {tmp_path / 'default.db'} exists;"
        " start Langflow once (make run), or pass --url"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("save_db_in_config_dir", ["true", "false"])
def test_langflows_default_is_where_langflows_own_settings_put_it(
    save_db_in_config_dir, tmp_path, monkeypatch, no_database_setting
):
    from lfx.services.settings.base import Settings

    monkeypatch.chdir(tmp_path)  # Langflow copies a ./langflow.db it finds; there is none here
    monkeypatch.setenv("LANGFLOW_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("LANGFLOW_SAVE_DB_IN_CONFIG_DIR", save_db_in_config_dir)

    assert Settings().database_url == f"sqlite:///{operator_database.langflow_default_database()}"


def test_an_unusable_database_is_a_problem_not_a_traceback(tmp_path):
    not_a_database = tmp_path / "langflow.db"
    not_a_database.write_text("not sqlite")
    with pytest.raises(DatabaseProblem, match=r"^cannot open sqlite:///.*: DatabaseError: file is not a database$"):
        asyncio.run(operator_database.has_table(f"sqlite:///{not_a_database}"))


# ``$`` is make's own syntax (``$$`` passes one): a session id with one is given to the CLI directly.
ODD_SESSION = "x' ; echo INJECTED ; 'y \" ; echo QUOTED ; \" `echo TICKED`"


def test_make_memory_show_passes_a_session_id_with_quotes_to_the_cli_as_it_is(tmp_path):
    url = f"sqlite:///{tmp_path / 'langflow.db'}"
    seed(url, SessionKey(uuid.UUID(FLOW), uuid.uuid4(), ODD_SESSION))

    result = run_make("memory-show", f"FLOW={FLOW}", f"SESSION={ODD_SESSION}", f"LOCAL_DB={url}")

    assert result.returncode == 0, result.stderr
    assert f"session {ODD_SESSION!r}" in result.stdout
    for ran in ("INJECTED", "QUOTED", "TICKED"):
        assert f"\n{ran}" not in f"\n{result.stdout}"


def test_make_memory_reset_resets_only_the_session_named_however_it_is_quoted(tmp_path):
    url = f"sqlite:///{tmp_path / 'langflow.db'}"
    seed(url, SessionKey(uuid.UUID(FLOW), uuid.uuid4(), ODD_SESSION), SessionKey(uuid.UUID(FLOW), uuid.uuid4(), "x"))

    result = run_make("memory-reset", f"FLOW={FLOW}", f"SESSION={ODD_SESSION}", f"LOCAL_DB={url}")

    assert result.returncode == 0, result.stderr
    assert "reset 1 row(s)" in result.stdout
    assert "INJECTED" not in result.stdout


def test_the_list_prints_one_line_per_session_with_control_characters_escaped(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'langflow.db'}"
    forged = "a\nforged\t00000000-0000-0000-0000-000000000000\t99"
    seed(
        url, SessionKey(uuid.UUID(FLOW), uuid.uuid4(), forged), SessionKey(uuid.UUID(FLOW), uuid.uuid4(), "\x1b[31mred")
    )

    assert main(["list", "--url", url, "--flow-id", FLOW]) == 0

    lines = capsys.readouterr().out.splitlines()[1:]
    assert sorted(line.split("\t")[0] for line in lines) == [
        "\\x1b[31mred",
        "a\\nforged\\t00000000-0000-0000-0000-000000000000\\t99",
    ]
    assert all("\x1b" not in line for line in lines)


def test_make_memory_show_reads_the_default_session_whatever_an_outer_make_left_in_the_environment(tmp_path):
    """Under `make test` (or any make), the environment may hold SESSION set empty: the Default Session still."""
    url = f"sqlite:///{tmp_path / 'langflow.db'}"
    seed(url, SessionKey(uuid.UUID(FLOW), uuid.uuid4(), FLOW))

    result = run_make("memory-show", f"FLOW={FLOW}", f"LOCAL_DB={url}", SESSION="", CONTEXT="")

    assert result.returncode == 0, result.stderr
    assert f"session {FLOW!r}" in result.stdout
