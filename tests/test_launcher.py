"""``make run``'s launcher: when it starts the bundled model server, what it refuses, which flow it opens.

The launcher's whole run (``make run`` to the recalled fact, and the model server stopped
with Langflow) is the quick-start browser test's (``tests/app/test_quick_start.py``).
"""

import os
import socket
import subprocess
from pathlib import Path

import pytest

from langflow_session_memory.launcher import (
    CannotStart,
    langflow_environment,
    require_database_driver,
    require_free,
    uses_bundled_model,
)
from langflow_session_memory.starter_flow import saved_flow
from langflow_session_memory.starter_flow_link import copy_of, users_copy


@pytest.mark.parametrize(
    ("environment", "bundled"),
    [
        ({}, True),
        ({"OPENAI_API_KEY": "  "}, True),
        ({"OPENAI_BASE_URL": "http://127.0.0.2:1/v1"}, True),
        ({"OPENAI_API_KEY": "sk-real"}, False),
        ({"ANTHROPIC_API_KEY": "sk-ant-real"}, False),
    ],
)
def test_the_bundled_model_server_starts_only_when_no_model_key_is_set(environment, bundled):
    assert uses_bundled_model(environment) is bundled


ROOT = Path(__file__).resolve().parent.parent


def test_a_port_in_use_is_refused_with_the_setting_that_moves_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.2", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CannotStart) as refused:
            require_free("127.0.0.2", port, "MODEL_PORT")
    assert str(refused.value) == (
        f"127.0.0.2:{port} is in use (another `make run`, `make model-server` or Langflow?):"
        f" stop it, or choose another port: make run MODEL_PORT={port + 1}"
    )


def test_the_users_copy_of_the_template_is_found_by_name_and_never_the_template_itself():
    template = saved_flow()
    mine = {"id": "0b4c6f8e-0000-4000-8000-000000000001", "name": template["name"]}
    other = {"id": "0b4c6f8e-0000-4000-8000-000000000002", "name": "Simple Agent"}
    assert users_copy([other, template, mine], template["name"], template["id"]) == mine
    assert users_copy([other, template], template["name"], template["id"]) is None


def test_the_copy_carries_the_templates_flow_but_not_its_id_or_folder():
    template = {**saved_flow(), "folder_id": "starter-projects", "user_id": None}
    body = copy_of(template)
    assert (body["name"], body["data"]) == (template["name"], template["data"])
    assert not {"id", "folder_id", "user_id"} & set(body)


def test_a_port_just_freed_with_connections_in_time_wait_is_free():
    """After Ctrl-C the server's side of each closed connection waits a minute in TIME-WAIT on its port; uvicorn binds
    it anyway (SO_REUSEADDR), so the check must not call the port in use."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's (Langflow's) listener
        server.bind(("127.0.0.2", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.2", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server closes first: its side goes to TIME-WAIT
            client.recv(1)
    require_free("127.0.0.2", port, "PORT")  # the listener is closed: only TIME-WAIT remains


def test_langflow_logs_the_local_superuser_in_unless_the_caller_says_otherwise():
    assert langflow_environment({}, {})["LANGFLOW_AUTO_LOGIN"] == "true"
    assert langflow_environment({"LANGFLOW_AUTO_LOGIN": "false"}, {})["LANGFLOW_AUTO_LOGIN"] == "false"


def test_make_run_leaves_an_exported_auto_login_false_as_it_is():
    environment = {**os.environ, "LANGFLOW_AUTO_LOGIN": "false"}
    printed = subprocess.run(
        ["make", "-s", "-n", "run"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "LANGFLOW_AUTO_LOGIN=true" not in printed
    assert "python -m langflow_session_memory run" in printed


@pytest.mark.parametrize("url", ["postgresql://langflow:secret@db:5432/langflow", "postgres://u:p@db/langflow"])
def test_a_plain_postgresql_url_without_its_driver_is_refused_naming_the_url_that_works(url):
    with pytest.raises(CannotStart) as refused:
        require_database_driver({"LANGFLOW_DATABASE_URL": url}, installed=lambda _name: False)
    assert "postgresql+psycopg://USER:PASSWORD@db" in str(refused.value)
    assert "secret" not in str(refused.value)
    require_database_driver({"LANGFLOW_DATABASE_URL": url}, installed=lambda name: name == "psycopg2")
    require_database_driver({"LANGFLOW_DATABASE_URL": "postgresql+psycopg://db/x"}, installed=lambda _name: False)
