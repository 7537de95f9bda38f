"""``make run``'s launcher: when it starts the bundled model server, what it refuses, which flow it opens.

The launcher's whole run (``make run`` to the recalled fact, and the model server stopped
with Langflow) is the quick-start browser test's (``tests/app/test_quick_start.py``).
"""

import socket

import pytest

from langflow_session_memory.launcher import CannotStart, require_free, uses_bundled_model
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
