"""``make run MODEL=...``: which model the flow runs on, what an Ollama server says it has, and the user's copy for it.

The whole run on Ollama's wire (the starter's chat remembered, every request on ``/api/chat``) is
``tests/app/test_starter_flow.py``'s.
"""

import pytest

from langflow_session_memory.bundled_server.fake_openai import MODELS, FakeModelConfig, run_in_thread
from langflow_session_memory.flow_model import (
    OLLAMA,
    OPENAI_COMPATIBLE,
    FlowModel,
    ModelUnavailable,
    chosen_model,
    parse_model,
    server_url,
)
from langflow_session_memory.launcher import CannotStart, LocalModel, local_model, with_listed
from langflow_session_memory.starter_flow import saved_flow
from langflow_session_memory.starter_flow_link import AGENT_TYPE, copy_of, with_model

QWEN = FlowModel("Ollama", "qwen2.5:1.5b")
URL = "http://localhost:11434"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("ollama", (OLLAMA, None)),
        ("Ollama:qwen2.5:1.5b", (OLLAMA, "qwen2.5:1.5b")),
        ("openai-compatible:qwen2.5-coder-1.5b-instruct", (OPENAI_COMPATIBLE, "qwen2.5-coder-1.5b-instruct")),
    ],
)
def test_a_model_is_a_kind_of_server_and_maybe_a_name_with_colons_in_it(text, parsed):
    assert parse_model(text) == parsed


def test_another_kind_of_server_is_refused_with_the_kinds_there_are():
    with pytest.raises(ModelUnavailable, match="say ollama, ollama:NAME or openai-compatible, openai-compatible:NAME"):
        parse_model("openai:gpt-4.1")


@pytest.mark.parametrize(
    ("server", "environment", "url"),
    [
        (OLLAMA, {}, URL),
        (OLLAMA, {"OLLAMA_BASE_URL": "http://gpu-box:11434/v1/"}, "http://gpu-box:11434"),
        (OPENAI_COMPATIBLE, {}, "http://localhost:1234/v1"),
        (OPENAI_COMPATIBLE, {"OPENAI_COMPATIBLE_BASE_URL": "http://vllm:8000/v1/"}, "http://vllm:8000/v1"),
    ],
)
def test_the_server_is_langflows_variable_or_where_it_listens_by_default(server, environment, url):
    assert server_url(server, environment) == url


PULLED = {"nomic-embed-text": ["embedding"], "llama2": ["completion"], "qwen2.5:1.5b": ["completion", "tools"]}


def test_without_a_name_the_first_model_that_calls_tools_is_chosen():
    assert chosen_model(OLLAMA, None, PULLED, URL) == "qwen2.5:1.5b"


def test_where_the_server_says_nothing_the_first_model_not_named_for_embeddings_is_chosen():
    listed = {"text-embedding-nomic-embed-text-v1.5": ["embedding"], "qwen2.5-coder-1.5b-instruct": None}
    assert chosen_model(OPENAI_COMPATIBLE, None, listed, URL) == "qwen2.5-coder-1.5b-instruct"


def test_a_named_model_is_chosen_if_served_and_not_said_to_lack_tools():
    assert chosen_model(OLLAMA, "qwen2.5:1.5b", PULLED, URL) == "qwen2.5:1.5b"
    assert chosen_model(OLLAMA, "llama3.1", {"llama3.1": None}, URL) == "llama3.1"  # an Ollama too old to say


@pytest.mark.parametrize(
    ("server", "wanted", "served", "why"),
    [
        (OLLAMA, "llama3.1", PULLED, "has no model llama3.1 .*: ollama pull llama3.1"),
        (OPENAI_COMPATIBLE, "phi-4", {}, "has no model phi-4 \\(it has: none\\): load phi-4 in it"),
        (OLLAMA, "llama2", PULLED, "llama2 does not call tools \\(completion\\), which the Agent needs"),
        (OLLAMA, None, {"llama2": ["completion"]}, "has no model that calls tools.*ollama pull qwen2.5:1.5b"),
        (OPENAI_COMPATIBLE, None, {}, "has no model that calls tools.*load a chat model in it"),
    ],
)
def test_a_model_the_agent_cannot_use_is_refused_with_what_to_do(server, wanted, served, why):
    with pytest.raises(ModelUnavailable, match=why):
        chosen_model(server, wanted, served, URL)


def test_the_launcher_asks_the_running_ollama_and_lets_langflow_reach_it_from_the_editor():
    with run_in_thread(FakeModelConfig()) as server:
        root = server.base_url.removesuffix("/v1")
        local = local_model("ollama", {"OLLAMA_BASE_URL": root, "LANGFLOW_SSRF_ALLOWED_HOSTS": "10.0.0.5,127.0.0.2"})

    assert local == LocalModel(
        QWEN,
        root,
        {"OLLAMA_BASE_URL": root, "LANGFLOW_VARIABLES_TO_GET_FROM_ENVIRONMENT": "OLLAMA_BASE_URL"},
    )


@pytest.mark.parametrize("allowed", [None, "10.0.0.5"], ids=["unset", "another-host"])
def test_a_model_server_langflow_blocks_is_refused_with_the_allow_list_left_to_the_operator(allowed):
    """Langflow's SSRF allow-list is by host: naming the model server's opens all its ports to every flow's tools."""
    environ = {"OLLAMA_BASE_URL": "", **({"LANGFLOW_SSRF_ALLOWED_HOSTS": allowed} if allowed else {})}
    with run_in_thread(FakeModelConfig()) as server:
        environ["OLLAMA_BASE_URL"] = server.base_url.removesuffix("/v1")
        with pytest.raises(CannotStart) as refused:
            local_model("ollama", environ)

    assert "reach every port of 127.0.0.2" in str(refused.value)
    assert str(refused.value).endswith("To allow it: LANGFLOW_SSRF_ALLOWED_HOSTS=127.0.0.2 make run MODEL=ollama")


def test_with_ssrf_protection_off_the_model_server_is_not_refused():
    with run_in_thread(FakeModelConfig()) as server:
        root = server.base_url.removesuffix("/v1")
        local = local_model("ollama", {"OLLAMA_BASE_URL": root, "LANGFLOW_SSRF_PROTECTION_ENABLED": "false"})
    assert "LANGFLOW_SSRF_ALLOWED_HOSTS" not in local.environment


def test_the_launcher_asks_an_openai_compatible_server_for_its_models():
    with run_in_thread(FakeModelConfig()) as server:
        environ = {"OPENAI_COMPATIBLE_BASE_URL": server.base_url, "LANGFLOW_SSRF_ALLOWED_HOSTS": "127.0.0.2"}
        local = local_model("openai-compatible", environ)

    assert local.model == FlowModel("OpenAI Compatible", MODELS[0])
    assert local.environment["OPENAI_COMPATIBLE_BASE_URL"] == server.base_url


def test_no_server_running_says_how_to_start_it():
    with pytest.raises(ModelUnavailable, match=r"no Ollama server answers at http://127\.0\.0\.2:9 .*ollama serve"):
        local_model("ollama", {"OLLAMA_BASE_URL": "http://127.0.0.2:9"})


def test_a_value_is_added_once_to_a_list_langflow_reads():
    assert with_listed({"LANGFLOW_SSRF_ALLOWED_HOSTS": "127.0.0.2"}, "LANGFLOW_SSRF_ALLOWED_HOSTS", "127.0.0.2") == {
        "LANGFLOW_SSRF_ALLOWED_HOSTS": "127.0.0.2"
    }


def agent_models(data: dict) -> list:
    return [
        node["data"]["node"]["template"]["model"]["value"]
        for node in data["nodes"]
        if node["data"]["type"] == AGENT_TYPE
    ]


def test_the_flows_agent_is_set_to_the_model_and_nothing_else_changes():
    data = saved_flow()["data"]

    changed = with_model(data, QWEN)

    assert agent_models(changed) == [QWEN.input_value()]
    assert with_model(changed, FlowModel("OpenAI", "gpt-5.4-mini")) == data  # the model is all that changed
    assert with_model(changed, QWEN) is None  # already on it: nothing to save
    assert data == saved_flow()["data"]  # the template itself untouched


def test_the_copy_for_a_model_is_named_for_it_and_the_copy_on_the_templates_model_is_left_alone():
    body = copy_of(saved_flow(), QWEN)

    assert body["name"] == "Session Memory Chat on qwen2.5:1.5b"
    assert agent_models(body["data"]) == [QWEN.input_value()]
    assert copy_of(saved_flow())["name"] == "Session Memory Chat"
