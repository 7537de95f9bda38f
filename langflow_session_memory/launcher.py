"""``make run``: Langflow with this extension, and the bundled model server when no model key is set.

One command from a fresh clone to a chat that remembers. Without ``OPENAI_API_KEY`` and
``ANTHROPIC_API_KEY`` the bundled deterministic server (``bundled_server/fake_openai``) starts as a
child process on 127.0.0.2 (inside a container Langflow rewrites 127.0.0.1), Langflow's OpenAI
and Anthropic providers are pointed at it, and it stops when Langflow stops. With a key set
Langflow talks to the real provider and nothing else starts. Once Langflow answers, the
address of the user's Session Memory Chat is printed (``starter_flow_link``). Ctrl-C or
SIGTERM stop Langflow, then the model server.

    python -m langflow_session_memory run [--host H] [--port P] [--model-host MH] [--model-port MP]
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

import httpx

from langflow_session_memory.bundled_server.langflow_env import model_providers_environment
from langflow_session_memory.starter_flow_link import NoStarterFlow, starter_flow_url

MODEL_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
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


def reachable_host(host: str) -> str:
    """The address a browser on this machine uses for a server bound to ``host``."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def require_free(host: str, port: int, setting: str) -> None:
    """Refuse to start on an address in use (Langflow would move to another port and the printed address be wrong)."""
    with socket.socket() as probe:
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


def run(host: str, port: int, model_host: str, model_port: int) -> int:
    """Start what is needed, print where it is, wait for Langflow to end; stop the model server with it."""
    bundled = uses_bundled_model(os.environ)
    require_free(host, port, "PORT")
    if bundled:
        require_free(model_host, model_port, "MODEL_PORT")
    environment = dict(os.environ)
    model_server = langflow = None
    try:
        if bundled:
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
            flow_url = starter_flow_url(address)
        except (NoStarterFlow, httpx.HTTPError) as reason:
            say(f"no starter flow to open ({reason}); in {address}: Templates, search 'session', Session Memory Chat")
        else:
            say(f"open the starter flow: {flow_url} (Langflow started in {time.monotonic() - started:.0f} s)")
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
    arguments = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        return run(arguments.host, arguments.port, arguments.model_host, arguments.model_port)
    except CannotStart as reason:
        say(str(reason))
        return FAILED
    except (KeyboardInterrupt, Stopped):
        say("stopped")
        return 0


if __name__ == "__main__":
    sys.exit(main())
