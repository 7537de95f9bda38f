"""Count ``tests/services/token_samples`` with real tokenizers and record the counts (``token_counts.json``).

``python -m tests.real_model.token_counts`` (the tier's llama-cpp-python and models, built by ``make test-real``):
Qwen2.5's and Gemma 3's tokenizers, loaded from their GGUF files without weights (``vocab_only``).
With ``TIKTOKEN_JS`` naming a folder where the npm package js-tiktoken is installed
(``npm install --prefix <folder> js-tiktoken@1``: its ranks ship in the package, no download),
OpenAI's ``cl100k_base`` and ``o200k_base`` are counted too, by Node.js.
``tests/services/test_token_estimate.py`` holds the estimate to the recorded counts;
``tests/real_model/test_token_counts.py`` counts again and checks that the record still holds.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from local_model import tier
from tests.services.token_samples import digest, samples

RECORD = Path(__file__).resolve().parents[1] / "services" / "token_counts.json"
GGUF_TOKENIZERS = {"qwen2.5": tier.QWEN_FILE, "gemma3": tier.MODEL_FILE}
COUNT_WITH_LLAMA_CPP = """
import json, sys
import llama_cpp
texts = json.load(open(sys.argv[2]))
model = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
counts = {name: len(model.tokenize(text.encode(), add_bos=False, special=False)) for name, text in texts.items()}
print(json.dumps(counts))
"""
COUNT_WITH_TIKTOKEN_JS = """
const { getEncoding } = require("js-tiktoken");
const texts = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const counts = {};
for (const name of ["cl100k_base", "o200k_base"]) {
  const encoding = getEncoding(name);
  counts[name] = Object.fromEntries(Object.entries(texts).map(([key, text]) => [key, encoding.encode(text).length]));
}
console.log(JSON.stringify(counts));
"""


def gguf_counts(texts_file: Path) -> dict[str, dict[str, int]]:
    python = str(tier.VENV / "bin" / "python")
    counts = {}
    for name, model in GGUF_TOKENIZERS.items():
        counted = subprocess.run(
            [python, "-c", COUNT_WITH_LLAMA_CPP, str(model), str(texts_file)],
            check=True,
            capture_output=True,
            text=True,
        )
        counts[name] = json.loads(counted.stdout)
    return counts


def tiktoken_counts(texts_file: Path, folder: str) -> dict[str, dict[str, int]]:
    counted = subprocess.run(
        ["node", "-e", COUNT_WITH_TIKTOKEN_JS, "-", str(texts_file)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "NODE_PATH": str(Path(folder) / "node_modules")},
    )
    return json.loads(counted.stdout)


def measured() -> dict:
    texts = samples()
    with tempfile.TemporaryDirectory() as folder:
        texts_file = Path(folder) / "samples.json"
        texts_file.write_text(json.dumps(texts))
        counts = gguf_counts(texts_file)
        if folder_js := os.environ.get("TIKTOKEN_JS"):
            counts |= tiktoken_counts(texts_file, folder_js)
    return {"samples": {name: digest(text) for name, text in texts.items()}, "counts": counts}


def main() -> int:
    tier.ensure_server_environment()
    tier.ensure_qwen()
    record = measured()
    if "cl100k_base" not in record["counts"] and RECORD.exists():  # keep OpenAI's counts measured before
        before = json.loads(RECORD.read_text())
        if before["samples"] == record["samples"]:
            record["counts"] |= {k: v for k, v in before["counts"].items() if k not in record["counts"]}
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    tier.say(f"recorded in {RECORD}: {json.dumps(record['counts'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
