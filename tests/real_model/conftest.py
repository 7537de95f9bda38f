"""The real-model tier: the real Langflow app against a real OpenAI-compatible model server.

Not part of ``make test``: ``make test-real`` builds llama-cpp-python, serves Gemma 3 270M and
then Qwen2.5-Coder 1.5B Instruct on 127.0.0.2 and sets ``REAL_MODEL_URL`` (and the server's
request log); any other server works the same way (docs/real-model.md, "Running it"). Without
``REAL_MODEL_URL`` nothing here is collected (see ``tests/conftest.py``).
"""

import asyncio
import os

import pytest

from langflow_session_memory.migrations import runner
from tests.app.langflow_app import LangflowLog, running_langflow, shared_log_file
from tests.app.langflow_client import LangflowClient
from tests.databases import fresh_database


@pytest.fixture(scope="session")
def real_model() -> dict:
    """Where the model is served and what it can take, from the environment ``make test-real`` sets."""
    return {
        "url": os.environ["REAL_MODEL_URL"],
        "context_window": int(os.environ.get("REAL_MODEL_CONTEXT", "2048")),
        "agent_max_tokens": int(os.environ.get("REAL_MODEL_AGENT_MAX_TOKENS", "48")),
        "request_log": os.environ.get("REAL_MODEL_REQUEST_LOG"),  # the tier's own server logs each request
    }


# A fold on one shared CPU core takes 30-120 s (Gemma 3 270M): the operator's knob, as a user of such a model sets it.
FOLD_TIMEOUT_SECONDS = "240"


@pytest.fixture(scope="session")
def langflow(real_model, tmp_path_factory):
    """Langflow with this extension on SQLite, its OpenAI provider pointed at the real model server."""
    os.environ.setdefault("SESSION_MEMORY_FOLD_TIMEOUT_SECONDS", FOLD_TIMEOUT_SECONDS)
    home = tmp_path_factory.mktemp("langflow-real")
    log = LangflowLog(shared_log_file(tmp_path_factory))
    with fresh_database("sqlite", home) as url:
        asyncio.run(runner.upgrade(url))
        with running_langflow(
            url, home, log_file=log.path, model_base_url=real_model["url"], plays_hosted=False
        ) as client:
            yield LangflowClient(client, url=url, backend="sqlite", log_file=str(log.path))
