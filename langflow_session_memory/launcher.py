"""``make run``: Langflow with this extension, and the bundled model server when no model key is set.

One command from a fresh clone to a chat that remembers. Without ``OPENAI_API_KEY`` and
``ANTHROPIC_API_KEY`` the bundled deterministic server (``bundled_server/fake_openai``) starts as a
child process on 127.0.0.2 (inside a container Langflow rewrites 127.0.0.1), Langflow's OpenAI
and Anthropic providers are pointed at it, and it stops when Langflow stops. With a key set
Langflow talks to the real provider and nothing else starts. Once Langflow answers, the
address of the user's Session Memory Chat is printed (``starter_flow_link``). Ctrl-C or
SIGTERM stop Langflow, then the model server. ``--model ollama[:NAME]`` or ``--model openai-compatible[:NAME]``
runs the flow on a model server already running (``flow_model``) instead, and nothing else starts.

    python -m langflow_session_memory run [--host H] [--port P] [--model-host MH] [--model-port MP] [--model M]
"""

import argparse
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib.util import find_spec
from typing import NamedTuple

import httpx

from langflow_session_memory.bundled_server.langflow_env import model_providers_environment
from langflow_session_memory.flow_model import (
    FlowModel,
    LocalServer,
    ModelUnavailable,
    find_model,
    parse_model,
    url_host,
)
from langflow_session_memory.starter_flow_link import NoStarterFlow, starter_flow_url

MODEL_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
# What Langflow starts with unless the environment says otherwise, for `make run` and `python -m langflow_session_memory
# run` alike: logged in as the local superuser, LiteLLM's bundled cost map (offline), no usage telemetry (offline, each
# event logs a ConnectError at ERROR).
LANGFLOW_DEFAULTS = {"LANGFLOW_AUTO_LOGIN": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DO_NOT_TRACK": "true"}
# After each of the bundled server's answers: it is no model, and a person trying it should know (no upper-case word or
# ID in it, which the server would take for a fact).
ANSWER_NOTE = (
    "(the bundled test server: it repeats identifiers it finds in the conversation; make run-local for a real model)"
)
MODEL_SERVER_START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 40  # Langflow itself gives its server 30 s
POLL_INTERVAL_S = 0.5
FAILED = 1


class Stopped(Exception):
    """SIGTERM arrived: stop as on Ctrl-C."""


class CannotStart(Exception):
    """One line that says why nothing was started, and what to do."""


def uses_bundled_model(environ: Mapping[str, str]) -> bool:
    """No model key set: the bundled server stands in for the providers."""
    return not any(environ.get(name, "").strip() for name in MODEL_KEYS)


def with_listed(environ: Mapping[str, str], variable: str, value: str) -> dict[str, str]:
    """``variable``, a comma-separated list of Langflow's, with ``value`` added once."""
    listed = [item.strip() for item in environ.get(variable, "").split(",") if item.strip()]
    return {variable: ",".join(dict.fromkeys([*listed, value]))}


def server_environment(environ: Mapping[str, str], server: LocalServer, url: str) -> dict[str, str]:
    """What Langflow needs to run a flow on the server at ``url`` from the editor as from the API.

    The provider's variable, and that variable among those Langflow copies from the environment into
    each user's variables at start, because its editor offers only the providers a user has variables
    for, and puts another model in place of one it does not offer. Langflow's SSRF allow-list is the
    operator's to widen (:func:`require_reachable`).
    """
    return {
        server.url_variable: url,
        **with_listed(environ, "LANGFLOW_VARIABLES_TO_GET_FROM_ENVIRONMENT", server.url_variable),
    }


def require_reachable(url: str, model: str, environ: Mapping[str, str]) -> None:
    """Refuse to start a flow on a model server Langflow's SSRF protection blocks, saying how to allow it.

    Langflow refuses a model server on a loopback or private address unless ``LANGFLOW_SSRF_ALLOWED_HOSTS``
    names its host, and its allow-list is by host: naming ``localhost`` opens every port on it to every
    flow's URL and API Request tools, so the launcher never adds it for the operator.
    """
    from lfx.utils.ssrf_protection import is_host_allowed, is_ip_blocked

    if environ.get("LANGFLOW_SSRF_PROTECTION_ENABLED", "true").strip().lower() in ("false", "0", "no", "off"):
        return
    host = url_host(url)
    address = _address(host)  # resolved once; unresolved counts as blocked, as Langflow counts it
    allowed = [item.strip() for item in environ.get("LANGFLOW_SSRF_ALLOWED_HOSTS", "").split(",") if item.strip()]
    if (address is not None and not is_ip_blocked(address)) or is_host_allowed(host, address, allowed):
        return
    raise CannotStart(
        f"Langflow's SSRF protection refuses the model server at {url} unless LANGFLOW_SSRF_ALLOWED_HOSTS names"
        f" {host}, and naming it lets every flow's URL and API Request tools reach every port of {host} too (Langflow's"
        f" own API, the model server's management API, any other local service). To allow it:"
        f" LANGFLOW_SSRF_ALLOWED_HOSTS={host} make run MODEL={model}"
    )


def _address(host: str) -> str | None:
    try:
        return socket.gethostbyname(host)
    except OSError:
        return None


class LocalModel(NamedTuple):
    """The model ``--model`` asks for, the server's address, and the variables Langflow needs to reach it."""

    model: FlowModel
    url: str
    environment: dict[str, str]


def local_model(model: str, environ: Mapping[str, str]) -> LocalModel:
    """Ask the server ``--model`` names what it serves, and choose (``flow_model.find_model``)."""
    server, name = parse_model(model)
    chosen, url = find_model(server, name, dict(environ))
    require_reachable(url, model, environ)
    return LocalModel(chosen, url, server_environment(environ, server, url))


def langflow_environment(environ: Mapping[str, str], model_server: Mapping[str, str]) -> dict[str, str]:
    """Langflow's environment: :data:`LANGFLOW_DEFAULTS` where the caller's says nothing, then the model server's."""
    return LANGFLOW_DEFAULTS | dict(environ) | dict(model_server)


def require_database_driver(environ: Mapping[str, str], installed=lambda name: find_spec(name) is not None) -> None:
    """Refuse to start on a PostgreSQL URL whose driver is missing, saying which URL works: Langflow opens a plain
    ``postgresql://`` URL with psycopg2 at start (its version check), which only its ``postgresql`` extra installs."""
    url = environ.get("LANGFLOW_DATABASE_URL", "")
    if url.partition("://")[0] in ("postgresql", "postgres") and not installed("psycopg2"):
        rest = url.partition("://")[2].rpartition("@")[2]
        raise CannotStart(
            "LANGFLOW_DATABASE_URL names PostgreSQL without a driver, and Langflow then uses psycopg2, which is not"
            " installed: install it (pip install 'langflow-session-memory[postgresql]'), or name psycopg 3, which is:"
            f" postgresql+psycopg://USER:PASSWORD@{rest}"
        )


def reachable_host(host: str) -> str:
    """The address a browser on this machine uses for a server bound to ``host``."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def require_free(host: str, port: int, setting: str) -> None:
    """Refuse to start on an address in use (Langflow would move to another port and the printed address be wrong).

    Probed as uvicorn binds (``SO_REUSEADDR``): a port whose only sockets are closed connections in TIME-WAIT (for a
    minute after Ctrl-C) is free to it, and only a listener makes the port in use.
    """
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CannotStart(
                    f"{host}:{port} is in use (another `make run`, `make model-server` or Langflow?):"
                    f" stop it, or choose another port: make run {setting}={port + 1}"
                ) from None
            raise CannotStart(f"cannot listen on {host}:{port}: {error.strerror}") from None


def wait_until_answers(url: str, process: subprocess.Popen, what: str, timeout_s: float | None = None) -> float:
    """Poll ``url`` until it answers 200 while ``process`` runs; returns the seconds it took."""
    started = time.monotonic()
    while process.poll() is None:
        try:
            if httpx.get(url, timeout=5).status_code == httpx.codes.OK:
                return time.monotonic() - started
        except httpx.TransportError:
            pass  # not listening yet
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise CannotStart(f"{what} did not answer {url} within {timeout_s} s")
        time.sleep(POLL_INTERVAL_S)
    raise CannotStart(f"{what} exited with code {process.returncode} before it answered {url}")


def stop(process: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``; a process that already ended is left alone."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def say(line: str) -> None:
    print(f"[make run] {line}", flush=True)  # noqa: T201 - the launcher talks to the terminal


def start_model_server(host: str, port: int) -> tuple[subprocess.Popen, str]:
    """The bundled server as a child process, once it answers; returns it and its OpenAI base URL."""
    base_url = f"http://{host}:{port}/v1"
    command = [
        *(sys.executable, "-m", "langflow_session_memory.bundled_server.fake_openai"),
        *("--host", host, "--port", str(port), "--answer-note", ANSWER_NOTE),
    ]
    server = subprocess.Popen(command)
    try:
        wait_until_answers(f"{base_url}/models", server, "the bundled model server", MODEL_SERVER_START_TIMEOUT_S)
    except CannotStart:
        stop(server)
        raise
    return server, base_url


def run(host: str, port: int, model_host: str, model_port: int, model: str | None = None) -> int:
    """Start what is needed, print where it is, wait for Langflow to end; stop the model server with it."""
    local = local_model(model, os.environ) if model else None
    chosen = local.model if local else None
    bundled = local is None and uses_bundled_model(os.environ)
    require_database_driver(os.environ)
    require_free(host, port, "PORT")
    if bundled:
        require_free(model_host, model_port, "MODEL_PORT")
    environment = langflow_environment(os.environ, local.environment if local else {})
    model_server = langflow = None
    try:
        if local is not None:
            say(f"the flow runs on {chosen.name}, served at {local.url} (Langflow's {chosen.provider} provider)")
        elif bundled:
            model_server, base_url = start_model_server(model_host, model_port)
            environment |= model_providers_environment(base_url)
            say(f"no OPENAI_API_KEY or ANTHROPIC_API_KEY: the bundled model server answers on {base_url}")
            say("(OpenAI and Anthropic providers point at it; it stops with Langflow)")
        elif base_url := os.environ.get("OPENAI_BASE_URL"):
            say(f"Langflow's OpenAI provider uses the server at {base_url}")
        else:
            say("a model key is set: Langflow uses the real provider; no model server started")
        started = time.monotonic()
        command = [sys.executable, "-m", "langflow", "run", "--host", host, "--port", str(port)]
        langflow = subprocess.Popen(command, env=environment)
        address = f"http://{reachable_host(host)}:{port}"
        wait_until_answers(f"{address}/health", langflow, "Langflow")
        try:  # the one address, the last line of the start-up: after Langflow's banner, which /health precedes
            flow_url = starter_flow_url(address, model=chosen)
        except (NoStarterFlow, httpx.HTTPError) as reason:
            say(f"no starter flow to open ({reason}); in {address}: Templates, search 'session', Session Memory Chat")
        else:
            on = f"its Agent on {chosen.provider} {chosen.name}; " if chosen else ""
            say(f"open the starter flow: {flow_url} ({on}Langflow started in {time.monotonic() - started:.0f} s)")
        return langflow.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not leave the model server running
            signal.signal(signum, signal.SIG_IGN)
        stop(langflow)
        stop(model_server)


def _raise_stopped(_signum, _frame):
    raise Stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m langflow_session_memory run", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="Langflow's address")
    parser.add_argument("--port", type=int, default=7860, help="Langflow's port")
    parser.add_argument("--model-host", default="127.0.0.2", help="the bundled model server's address")
    parser.add_argument("--model-port", type=int, default=8765, help="the bundled model server's port")
    parser.add_argument(
        "--model", help="ollama[:NAME] or openai-compatible[:NAME]: the flow on a model server already running"
    )
    arguments = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        return run(arguments.host, arguments.port, arguments.model_host, arguments.model_port, arguments.model)
    except (CannotStart, ModelUnavailable) as reason:
        say(str(reason))
        return FAILED
    except (KeyboardInterrupt, Stopped):
        say("stopped")
        return 0


if __name__ == "__main__":
    sys.exit(main())
