"""``make run-local``: the flow it opens names the model that answers, the tier's Qwen, on a provider that lists it.

A stand-in lists what the tier's llama-cpp-python server lists at ``/v1/models`` (its ``--model_alias``); the real
one answering through the Playground is ``tests/real_model/test_playground_real_model.py``'s.
"""

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from langflow_session_memory.flow_model import FlowModel
from langflow_session_memory.launcher import local_model
from langflow_session_memory.starter_flow import saved_flow
from langflow_session_memory.starter_flow_link import AGENT_TYPE, copy_of
from local_model.tier import HOST, QWEN_ALIAS, local_launch


class ListsQwen(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": QWEN_ALIAS[1], "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        """Quiet: pytest shows what the test asserts."""


@contextmanager
def tier_server():
    """Its ``/v1`` address while it serves."""
    server = ThreadingHTTPServer((HOST, 0), ListsQwen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{HOST}:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_the_flow_run_local_opens_names_the_tiers_model_on_the_openai_compatible_provider():
    with tier_server() as base_url:
        arguments, environment = local_launch(base_url, {"LANGFLOW_SSRF_ALLOWED_HOSTS": "10.0.0.5"})
        option, model = arguments
        local = local_model(model, environment)  # what the launcher does with them; it refuses a blocked server

    assert option == "--model"
    assert local.model == FlowModel("OpenAI Compatible", QWEN_ALIAS[1])
    assert local.environment["OPENAI_COMPATIBLE_BASE_URL"] == base_url
    assert environment["LANGFLOW_SSRF_ALLOWED_HOSTS"] == "10.0.0.5,127.0.0.2"  # the operator's hosts kept
    (agent,) = [
        node for node in copy_of(saved_flow(), local.model)["data"]["nodes"] if node["data"]["type"] == AGENT_TYPE
    ]
    assert agent["data"]["node"]["template"]["model"]["value"][0]["name"] == QWEN_ALIAS[1]
