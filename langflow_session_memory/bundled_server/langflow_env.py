"""Environment for running Langflow in-process in tests, the demo and the benchmarks."""

import signal
import sys
from pathlib import Path

from langflow_session_memory.services.session_memory.settings import WAIT_FOR_FOLDS_VARIABLE


def langflow_environment(
    url: str, home: Path, *, model_base_url: str | None, log_file: Path | None = None, plays_hosted: bool = False
) -> dict[str, str]:
    """The variables Langflow reads at start-up: side files stay under ``home``, logs go to a file to parse.

    ``model_base_url`` points the OpenAI provider at a local server (use 127.0.0.2:
    Langflow rewrites 127.0.0.1 inside a container, see docs/operations.md), and the Anthropic provider at
    the same server's Messages API (the bundled one serves both); None leaves the real provider
    settings alone. ``plays_hosted``: that server is the bundled one, standing in for a hosted provider.
    """
    environment = {
        "LANGFLOW_DATABASE_URL": url,
        "LANGFLOW_CONFIG_DIR": str(home / "config"),
        "LANGFLOW_AUTO_LOGIN": "true",
        "DO_NOT_TRACK": "true",
        "LANGFLOW_PRETTY_LOGS": "false",
        "LANGFLOW_LOG_LEVEL": "INFO",
        "LANGFLOW_LOG_FILE": str(log_file or home / "langflow.log"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    if model_base_url is not None:
        environment |= model_providers_environment(model_base_url)
    if plays_hosted:
        # The bundled server plays a hosted provider (OpenAI) from a loopback address, where a
        # self-hosted server would be: no turn waits for a fold, as on OpenAI.
        environment[WAIT_FOR_FOLDS_VARIABLE] = "never"
    return environment


def model_providers_environment(model_base_url: str) -> dict[str, str]:
    """Langflow's OpenAI and Anthropic providers pointed at one local server (the bundled one serves both APIs)."""
    return {
        "OPENAI_API_KEY": "sk-local",
        "OPENAI_BASE_URL": model_base_url,
        "ANTHROPIC_API_KEY": "sk-ant-local",
        "ANTHROPIC_API_URL": model_base_url.removesuffix("/v1"),  # the SDK adds /v1/messages
    }


def import_langflow_main() -> None:
    """Import ``langflow.__main__`` in the main thread, keeping this process's signal handlers.

    Langflow's shutdown imports it, and its module-level ``signal.signal`` fails outside the
    main thread; but the handlers it installs would turn a CI time-out's SIGTERM into a
    "graceful shutdown" that shows as a cascade of setup errors instead of one clear stop.
    """
    if "langflow.__main__" in sys.modules:
        return
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    import langflow.__main__  # noqa: F401

    for signum, handler in saved.items():
        signal.signal(signum, handler)
