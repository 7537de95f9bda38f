"""``make run MODEL=...``: the starter flow on a model server already running on the machine.

``MODEL=ollama`` (or ``ollama:NAME``) uses Ollama through Langflow's own Ollama provider;
``MODEL=openai-compatible`` (or ``openai-compatible:NAME``) uses LM Studio, llama-server, vLLM or any server of
OpenAI's API through Langflow's "OpenAI Compatible" provider. The server is the one the provider's variable names
(``OLLAMA_BASE_URL``, ``OPENAI_COMPATIBLE_BASE_URL``), else where it listens by default. It is asked what it
serves, as Langflow's model list asks it, and the model NAME is taken, or the first that can run the Agent: one
that calls tools where Ollama says so (``/api/show``'s ``capabilities``), one not named for embeddings where the
server says nothing (``/v1/models``). The launcher then opens the user's copy of the flow for that model
(``starter_flow_link``).
"""

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

TOOLS = "tools"
EMBEDDING = "embedding"
# Embedding models as Ollama's library and LM Studio name them.
EMBEDDING_NAME = re.compile(r"embed|minilm|bge-|e5-", re.IGNORECASE)
SUGGESTED_OLLAMA_MODEL = "qwen2.5:1.5b"
PROBE_TIMEOUT_S = 10


class ModelUnavailable(Exception):
    """One line that says why the model asked for cannot be used, and what to do."""


@dataclass(frozen=True)
class FlowModel:
    """A model as Langflow's model input holds it: its provider's name in Langflow and the model's name."""

    provider: str
    name: str

    def input_value(self) -> list[dict]:
        """The Agent's ``model`` value, as the flow's JSON keeps a model picked in the editor."""
        return [{"name": self.name, "provider": self.provider, "metadata": {}}]


@dataclass(frozen=True)
class LocalServer:
    """A kind of model server, as Langflow's provider for it reaches it."""

    key: str  # MODEL=<key>[:NAME]
    provider: str  # Langflow's provider
    url_variable: str  # where that provider reads the server's address
    default_url: str
    start: str  # what to do when it does not answer
    get: str  # what to do when it lacks a model, for str.format(name=...)


OLLAMA = LocalServer(
    "ollama", "Ollama", "OLLAMA_BASE_URL", "http://localhost:11434", "start it (ollama serve)", "ollama pull {name}"
)
OPENAI_COMPATIBLE = LocalServer(
    "openai-compatible",
    "OpenAI Compatible",
    "OPENAI_COMPATIBLE_BASE_URL",
    "http://localhost:1234/v1",  # LM Studio's
    "start its server (LM Studio: Developer, Start Server)",
    "load {name} in it",
)
SERVERS = {server.key: server for server in (OLLAMA, OPENAI_COMPATIBLE)}


def parse_model(text: str) -> tuple[LocalServer, str | None]:
    """``ollama``, ``ollama:qwen2.5:1.5b`` or ``openai-compatible:NAME`` as the server and the model's name (None:
    the server's first that can run the Agent); another kind is refused."""
    key, _, name = text.strip().partition(":")
    server = SERVERS.get(key.lower())
    if server is None:
        raise ModelUnavailable(f"MODEL={text}: say {' or '.join(f'{key}, {key}:NAME' for key in SERVERS)}")
    return server, name or None


def server_url(server: LocalServer, environ: dict[str, str]) -> str:
    """The server Langflow's provider talks to: its variable, else the default; Ollama's without ``/v1``."""
    url = (environ.get(server.url_variable) or server.default_url).rstrip("/")
    return url.removesuffix("/v1") if server is OLLAMA else url


def url_host(url: str) -> str:
    return urlsplit(url).hostname or ""


def chosen_model(server: LocalServer, wanted: str | None, capabilities: dict[str, list[str] | None], url: str) -> str:
    """The model to run: ``wanted`` if the server has it and nothing says it cannot call tools, else the first
    listed that can. ``capabilities`` maps each model, in the server's order, to what the server says it can do
    (None: it says nothing)."""
    if wanted is not None:
        if wanted not in capabilities:
            served = ", ".join(capabilities) or "none"
            raise ModelUnavailable(f"{url} has no model {wanted} (it has: {served}): {server.get.format(name=wanted)}")
        can = capabilities[wanted]
        if can is not None and TOOLS not in can:
            raise ModelUnavailable(
                f"{wanted} does not call tools ({', '.join(can)}), which the Agent needs: choose another"
            )
        return wanted
    found = next((name for name, can in capabilities.items() if can is None or TOOLS in can), None)
    if found is None:
        example = server.get.format(name=SUGGESTED_OLLAMA_MODEL if server is OLLAMA else "a chat model")
        raise ModelUnavailable(f"{url} has no model that calls tools, which the Agent needs: {example}")
    return found


def served_models(server: LocalServer, url: str) -> dict[str, list[str] | None]:
    """What the running server serves and, where it says, what each model can do."""
    with httpx.Client(base_url=url, timeout=PROBE_TIMEOUT_S) as http:
        if server is OLLAMA:
            pulled = [model["name"] for model in http.get("/api/tags").raise_for_status().json().get("models", [])]
            shown = {name: http.post("/api/show", json={"model": name}) for name in pulled}
            return {
                name: answer.json().get("capabilities") if answer.is_success else [] for name, answer in shown.items()
            }
        listed = [model["id"] for model in http.get("models").raise_for_status().json().get("data", [])]
        return {name: [EMBEDDING] if EMBEDDING_NAME.search(name) else None for name in listed}


def find_model(server: LocalServer, wanted: str | None, environ: dict[str, str]) -> tuple[FlowModel, str]:
    """Ask the running server what it serves and choose; returns the model and the server's address."""
    url = server_url(server, environ)
    try:
        capabilities = served_models(server, url)
    except (httpx.HTTPError, ValueError, KeyError) as error:
        raise ModelUnavailable(
            f"no {server.provider} server answers at {url} ({error.__class__.__name__}): {server.start},"
            f" or set {server.url_variable} to where it listens"
        ) from None
    return FlowModel(server.provider, chosen_model(server, wanted, capabilities, url)), url
