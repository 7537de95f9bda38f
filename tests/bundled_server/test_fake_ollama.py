"""The bundled server's Ollama API, through the clients Langflow uses (langchain-ollama, the ``ollama`` client, and
Langflow's own model discovery).

It answers by the OpenAI route's rules, in Ollama's wire: the tool calls' arguments as objects, the counts in the
last object, ``done_reason`` at the output cap, and Ollama's refusal of a model it has not pulled.
"""

import ollama
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_ollama import ChatOllama
from lfx.base.models.model_utils import get_ollama_llm_models

from langflow_session_memory.bundled_server.fake_openai import FakeModelConfig, run_in_thread
from langflow_session_memory.services.session_memory.rules.policy import SUMMARY
from langflow_session_memory.services.session_memory.summary.model_call import fold
from langflow_session_memory.services.session_memory.summary.prompt import ChatLine

MODEL = "qwen2.5:1.5b"
FACT = "Our project is PRJ-123 on the EU cluster."


@tool
def search_earlier_messages(query: str) -> str:
    """Search this session's older messages."""
    return f"2026-01-01 10:00 User: {FACT}"


@pytest.fixture
def ollama_server():
    """One server per test: langchain-ollama's async client is bound to the test's event loop."""
    with run_in_thread(FakeModelConfig()) as running:
        yield running


def chat(server, **settings) -> ChatOllama:
    return ChatOllama(model=MODEL, base_url=server.base_url.removesuffix("/v1"), **settings)


def test_langchain_reads_the_streamed_answer_and_its_counts(ollama_server):
    answer = chat(ollama_server).invoke([HumanMessage(FACT), HumanMessage("Which project were we on?")])

    assert answer.content == "From our conversation: PRJ-123, EU"
    assert answer.response_metadata["done_reason"] == "stop"
    (logged,) = ollama_server.requests()
    assert (logged["api"], logged["body"]["stream"]) == ("ollama", True)  # langchain-ollama always streams
    assert answer.usage_metadata["input_tokens"] == logged["prompt_tokens"]
    assert answer.usage_metadata["output_tokens"] == logged["completion_tokens"]


def test_the_ollama_client_reads_an_answer_not_streamed(ollama_server):
    client = ollama.Client(host=ollama_server.base_url.removesuffix("/v1"))

    answer = client.chat(MODEL, [{"role": "user", "content": FACT}, {"role": "user", "content": "Which project?"}])

    assert (answer.message.content, answer.done, answer.done_reason) == (
        "From our conversation: PRJ-123, EU",
        True,
        "stop",
    )
    assert answer.prompt_eval_count == ollama_server.requests()[-1]["prompt_tokens"]


async def test_a_tool_call_goes_out_with_object_arguments_and_its_result_comes_back(ollama_server):
    model = chat(ollama_server).bind_tools([search_earlier_messages])
    conversation = [HumanMessage("Which cluster were we on?")]

    call = await model.ainvoke(conversation)
    (requested,) = call.tool_calls
    conversation += [call, ToolMessage(search_earlier_messages.invoke(requested["args"]), tool_call_id=requested["id"])]
    answer = await model.ainvoke(conversation)

    assert (requested["name"], requested["args"]) == ("search_earlier_messages", {"query": "cluster"})
    sent_back = ollama_server.requests()[-1]["wire"]["messages"][1]["tool_calls"][0]["function"]
    assert sent_back["arguments"] == {"query": "cluster"}  # an object, as Ollama takes it, not a JSON string
    assert answer.content == "From our conversation: PRJ-123, EU"


def test_an_answer_cut_at_num_predict_says_length(ollama_server):
    answer = chat(ollama_server, num_predict=3).invoke([HumanMessage(FACT), HumanMessage("Which project?")])

    assert answer.response_metadata["done_reason"] == "length"
    assert len(answer.content) == 12


async def test_a_fold_over_ollama_asks_for_its_output_cap_as_num_predict(ollama_server):
    batch = [ChatLine("user", FACT), ChatLine("assistant", "OK: noted.")]

    result = await fold(chat(ollama_server), "", batch, provider="Ollama")

    assert "PRJ-123" in result.summary
    (logged,) = ollama_server.requests()
    assert (logged["kind"], logged["wire"]["options"]["num_predict"]) == ("summary", SUMMARY.output_tokens)


def test_a_model_that_is_not_pulled_is_refused_in_ollamas_words(ollama_server):
    with pytest.raises(ollama.ResponseError) as refused:
        ChatOllama(model="llama3", base_url=ollama_server.base_url.removesuffix("/v1")).invoke("hello")

    assert (refused.value.status_code, refused.value.error) == (404, 'model "llama3" not found, try pulling it first')


async def test_langflows_model_list_offers_the_pulled_chat_model_and_not_the_embedding_model(
    ollama_server, monkeypatch
):
    monkeypatch.setenv("LANGFLOW_SSRF_ALLOWED_HOSTS", "127.0.0.2")

    assert await get_ollama_llm_models(ollama_server.base_url.removesuffix("/v1")) == [MODEL]
