"""Environment for running Langflow in-process in tests, the demo and the benchmarks."""

from pathlib import Path


def langflow_environment(
    url: str, home: Path, *, model_base_url: str | None, log_file: Path | None = None
) -> dict[str, str]:
    """The variables Langflow reads at start-up: side files stay under ``home``, logs go to a file to parse.

    ``model_base_url`` points the OpenAI provider at a local server (use 127.0.0.2, see
    DESIGN.md); None leaves the real provider settings alone.
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
        environment |= {"OPENAI_API_KEY": "sk-local", "OPENAI_BASE_URL": model_base_url}
    return environment
