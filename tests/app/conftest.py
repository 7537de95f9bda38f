"""The real Langflow app in-process (``TestClient(create_app())``) against the bundled model server.

One app per backend and test module: start-up costs 15-40 s. Environment is set before
Langflow reads its settings; services are torn down between apps so the next one reads
its own database URL.
"""

import asyncio
import os

import pytest
from fastapi.testclient import TestClient

from langflow_session_memory.migrations import runner
from langflow_session_memory.testing.fake_openai import FakeModelConfig, run_in_thread
from langflow_session_memory.testing.langflow_env import langflow_environment
from tests.app.langflow_client import LangflowClient
from tests.databases import fresh_database


@pytest.fixture(scope="module")
def fake_model(tmp_path_factory):
    log = tmp_path_factory.mktemp("model") / "requests.jsonl"
    with run_in_thread(FakeModelConfig(request_log=str(log))) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def langflow(request, fake_model, tmp_path_factory):
    """A started Langflow app on a database that already carries our table (as after an earlier start)."""
    home = tmp_path_factory.mktemp(f"langflow-{request.param}")
    with fresh_database(request.param, home) as url:
        asyncio.run(runner.upgrade(url))
        # One log file for every app of the test session: Langflow's logger binds to its first configuration.
        log_file = tmp_path_factory.getbasetemp() / "langflow.log"
        environment = langflow_environment(url, home, model_base_url=fake_model.base_url, log_file=log_file)
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        try:
            import langflow.__main__  # noqa: F401  (its signal handlers must be set up in the main thread)
            from langflow.main import create_app
            from lfx.services.deps import get_settings_service

            get_settings_service().settings.database_url = url  # a new app in this process reads it from here
            with TestClient(create_app()) as client:
                yield LangflowClient(client, url=url, backend=request.param, log_file=environment["LANGFLOW_LOG_FILE"])
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
