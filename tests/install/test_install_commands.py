"""The README's "Using it in an existing Langflow" commands as written (`make test-install`, after `make dist`).

An existing Langflow is a fresh virtual environment with ``langflow==1.13.*`` (installed with uv, which resolves it
in seconds from its cache; the README says pip takes minutes). Into it: the wheel ``make dist`` built, with pip
(then Langflow's first start as the README gives it) and with uv.
"""

import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import httpx

from langflow_session_memory.migrations import runner
from tests.langflow_process import free_port, healthy, session_memory_revision, stop

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SECTION = README[README.index("## Using it in an existing Langflow") : README.index("## Settings")]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
WHEEL = ROOT / "dist" / f"langflow_session_memory-{VERSION}-py3-none-any.whl"
LANGFLOW = "langflow==1.13.*"


def uv() -> list[str]:
    return shlex.split(os.environ.get("UV", "uv"))


def command_in_readme(pattern: str) -> list[str]:
    """The README line that starts with ``pattern``, as arguments (the wheel's path made absolute)."""
    [line] = [line.strip() for line in SECTION.splitlines() if line.strip().startswith(pattern)]
    return [str(ROOT / word) if word.startswith("dist/") else word for word in shlex.split(line.split("#")[0])]


def existing_langflow(folder: Path) -> Path:
    """A virtual environment with pip and Langflow 1.13 in it; its bin folder."""
    subprocess.run([*uv(), "venv", "--quiet", "--seed", "--python", "python3", str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run([*uv(), "pip", "install", "--quiet", "--python", str(python), LANGFLOW], check=True)
    return folder / "bin"


def activated(bin_folder: Path) -> dict[str, str]:
    """The environment of a shell where ``bin_folder``'s virtual environment is activated."""
    return {**os.environ, "VIRTUAL_ENV": str(bin_folder.parent), "PATH": f"{bin_folder}:{os.environ['PATH']}"}


def test_make_dist_built_the_wheel_the_readme_names():
    assert WHEEL.exists(), "run `make dist` first (make test-install does)"
    assert f"dist/{WHEEL.name}" in SECTION
    assert "twine check" in (ROOT / "Makefile").read_text()


def test_pip_installs_the_wheel_into_langflow_1_13_which_starts_with_the_extension(tmp_path):
    bin_folder = existing_langflow(tmp_path / "langflow-env")
    shell = activated(bin_folder)
    install = command_in_readme("pip install dist/")
    subprocess.run(install, check=True, env=shell, cwd=tmp_path)

    start = command_in_readme("LANGFLOW_AUTO_LOGIN=true langflow run")
    settings = dict(word.split("=", 1) for word in start if "=" in word)
    port, database = free_port(), tmp_path / "langflow.db"
    environment = {
        **shell,
        **settings,
        "LANGFLOW_PORT": str(port),
        "LANGFLOW_HOST": "127.0.0.1",
        "LANGFLOW_DATABASE_URL": f"sqlite:///{database}",
        "LANGFLOW_CONFIG_DIR": str(tmp_path / "config"),
        "DO_NOT_TRACK": "true",
    }
    arguments = [word for word in start if "=" not in word]
    log = (tmp_path / "langflow.log").open("w")
    server = subprocess.Popen(
        arguments, env=environment, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        assert healthy(server, port), f"Langflow did not answer /health (exit code {server.poll()}): see langflow.log"
        base = f"http://127.0.0.1:{port}"
        token = httpx.get(f"{base}/api/v1/auto_login", timeout=10).json()["access_token"]
        catalogue = httpx.get(f"{base}/api/v1/all", headers={"Authorization": f"Bearer {token}"}, timeout=60).json()
        codes = [
            entry.get("template", {}).get("code", {}).get("value", "")
            for components in catalogue.values()
            for entry in components.values()
            if isinstance(entry, dict)
        ]
        assert any('name = "SessionMemoryAgent"' in code for code in codes)  # in the sidebar's catalogue
        assert session_memory_revision(database) == [(runner.head_revision(),)]
    finally:
        stop(server)
        log.close()


def test_uv_installs_the_wheel_into_langflow_1_13(tmp_path):
    bin_folder = existing_langflow(tmp_path / "langflow-env")
    line = next(line for line in SECTION.splitlines() if "uv pip install --python" in line)
    [written] = re.findall(r"`(uv pip install [^`]+)`", line)
    install = [
        str(bin_folder / "python") if word == "<langflow-env>/bin/python" else word for word in shlex.split(written)
    ]
    install = [*uv(), *install[1:]]
    subprocess.run([str(ROOT / word) if word.startswith("dist/") else word for word in install], check=True)
    registered = subprocess.run(
        [str(bin_folder / "python"), "-c", ENTRY_POINTS_AND_COMPONENT],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert registered == ["langflow-session-memory", "session_memory", "SessionMemoryAgent"]


# What Langflow reads at start-up: its extension and plugin entry points, and the component they lead to.
ENTRY_POINTS_AND_COMPONENT = """
from importlib.metadata import entry_points
from langflow_session_memory.components.session_memory.session_memory_agent import SessionMemoryAgentComponent
print(*[e.name for e in entry_points(group="langflow.extensions") if e.value == "langflow_session_memory"])
print(*[e.name for e in entry_points(group="langflow.plugins") if e.value.startswith("langflow_session_memory")])
print(SessionMemoryAgentComponent.name)
"""
