# Everything a developer or CI needs; `make test` is the one command that must pass.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
STAMP := $(VENV)/.installed
# The database `make run`, `make backend`, `make migrate` and `make memory-*` use unless LANGFLOW_DATABASE_URL says otherwise.
LOCAL_DB := sqlite:///$(CURDIR)/.langflow/langflow.db
export LANGFLOW_DATABASE_URL ?= $(LOCAL_DB)

.PHONY: install test test-fast test-install dist lint format migrate validate-migrations

# --compile-bytecode: every process that imports Langflow (each test worker, each Langflow the tests start) reads
# its ~5,000 modules compiled instead of compiling them again, which it does where PYTHONDONTWRITEBYTECODE is set
# (about 10 s of CPU each; docs/testing.md).
$(STAMP): pyproject.toml
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@[ -x $(BIN)/python ] || $(UV) venv --quiet --python $(PYTHON) $(VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# The whole suite in one process per core (each backend's app tests in one; tests/conftest.py); it ends with its
# wall-clock time (docs/testing.md).
test: install
	@started=$$(date +%s); $(BIN)/pytest -q -n auto --dist loadgroup --durations=25; status=$$?; \
	echo "make test: $$(( $$(date +%s) - started )) s"; exit $$status

# The wheel and the source distribution in dist/, checked as PyPI checks an upload (metadata, the README rendering).
dist: install
	rm -rf dist
	$(UV) build --quiet --out-dir dist
	$(BIN)/twine check --strict dist/*

# The README's install commands as written, each from a fresh virtual environment with Langflow 1.13, and
# Langflow's first start with the extension (about 3 min; .ci/run runs it after `make test`).
test-install: dist
	SESSION_MEMORY_INSTALL_TESTS=1 UV="$(UV)" $(BIN)/pytest -q -p no:cacheprovider tests/install

# Everything but the tests that start Langflow (marker app, set in tests/conftest.py): docs/testing.md.
test-fast: install
	$(BIN)/pytest -q -n auto -m "not app"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Our migration only: Langflow creates its database at its first start (and our plugin migrates then).
migrate: install
	$(BIN)/python -m langflow_session_memory migrate

validate-migrations: install
	$(BIN)/python -m langflow.alembic.migration_validator --strict langflow_session_memory/migrations/versions/*.py

# Langflow with this extension, on the project-local SQLite file unless LANGFLOW_DATABASE_URL is set.
HOST ?= 127.0.0.1
PORT ?= 7860
# Langflow's own settings folder (its secret key among them), beside the database.
CONFIG_DIR ?= $(CURDIR)/.langflow/config
# DO_NOT_TRACK: Langflow's usage telemetry off (offline, each event logs a ConnectError at ERROR);
# `make run DO_NOT_TRACK=false` sends it. LANGFLOW_AUTO_LOGIN: logged in as the local superuser unless exported false
# (the launcher's defaults, langflow_session_memory/launcher.py, which `python -m langflow_session_memory run` has too).
DO_NOT_TRACK ?= true
export LANGFLOW_AUTO_LOGIN ?= true
LANGFLOW_ENV := LANGFLOW_CONFIG_DIR=$(CONFIG_DIR) LITELLM_LOCAL_MODEL_COST_MAP=True DO_NOT_TRACK=$(DO_NOT_TRACK)
# The bundled deterministic model server (OpenAI and Anthropic APIs): `make run` starts it when no model key is set.
MODEL_HOST ?= 127.0.0.2
MODEL_PORT ?= 8765

.PHONY: backend run run-local model-server

backend: install
	@mkdir -p .langflow
	$(LANGFLOW_ENV) $(BIN)/langflow run --backend-only --host $(HOST) --port $(PORT) --workers 1

# Langflow with its UI; without OPENAI_API_KEY and ANTHROPIC_API_KEY also the bundled model server, which stops with
# it (langflow_session_memory/launcher.py). Prints the address of the Session Memory Chat flow once Langflow answers.
# MODEL=ollama (or ollama:NAME) runs that flow on an Ollama already running, MODEL=openai-compatible[:NAME] on LM
# Studio, llama-server or vLLM (langflow_session_memory/flow_model.py); no model server of ours starts then.
MODEL ?=
run: install
	@mkdir -p .langflow
	@$(LANGFLOW_ENV) $(BIN)/python -m langflow_session_memory run --host $(HOST) --port $(PORT) \
		--model-host $(MODEL_HOST) --model-port $(MODEL_PORT) $(if $(MODEL),--model '$(MODEL)')

# `make run` on a real model, no account: Qwen2.5-Coder 1.5B Instruct served by llama-cpp-python on this machine (the
# real-model tier's build and model: minutes the first time, seconds after), Langflow's "OpenAI Compatible" provider
# pointed at it, the flow's Agent on the model's name (local_model/tier.py's local_launch).
run-local: install
	@mkdir -p .langflow
	@UV="$(UV)" PYTHON="$(PYTHON)" $(LANGFLOW_ENV) $(BIN)/python -m local_model.tier run --host $(HOST) --port $(PORT)

# The bundled model server alone, for a Langflow started otherwise.
model-server: install
	@echo "bundled model server on http://$(MODEL_HOST):$(MODEL_PORT)/v1 (Ctrl-C stops it); in another terminal:"
	@echo "  OPENAI_API_KEY=sk-local OPENAI_BASE_URL=http://$(MODEL_HOST):$(MODEL_PORT)/v1 make run"
	@echo "  (Claude models too: ANTHROPIC_API_KEY=sk-ant-local ANTHROPIC_API_URL=http://$(MODEL_HOST):$(MODEL_PORT))"
	@$(BIN)/python -m langflow_session_memory.bundled_server.fake_openai --host $(MODEL_HOST) --port $(MODEL_PORT)

# A session's notes on the database `make run` uses: FLOW is the id in the flow's URL; SESSION defaults
# to it, which is the Playground's "Default Session". CONTEXT narrows to one Agent Context ID.
FLOW ?=
SESSION ?=
CONTEXT ?=
# The ids reach the CLI through the environment of these recipes alone, never pasted into the shell command
# ("$$MEMORY_SESSION" is the shell's variable, quoted): an id with quotes, ';' or backticks is an id. A '$' in a make
# argument is make's own syntax ('$$' is one).
MEMORY := $(BIN)/python -m langflow_session_memory
NEED_FLOW = $(if $(FLOW),,$(error FLOW=<flow id> is required: the id in the flow's URL, /flow/<id>))
CONTEXT_OPTION = $(if $(CONTEXT),--context-id "$$MEMORY_CONTEXT")
memory-list memory-show memory-reset: export MEMORY_FLOW = $(FLOW)
memory-list memory-show memory-reset: export MEMORY_SESSION = $(or $(SESSION),$(FLOW))
memory-list memory-show memory-reset: export MEMORY_CONTEXT = $(CONTEXT)

.PHONY: memory-list memory-show memory-reset

memory-list: install
	@$(NEED_FLOW)$(MEMORY) list --flow-id "$$MEMORY_FLOW"

memory-show: install
	@$(NEED_FLOW)$(MEMORY) show --flow-id "$$MEMORY_FLOW" --session-id "$$MEMORY_SESSION" $(CONTEXT_OPTION)

memory-reset: install
	@$(NEED_FLOW)$(MEMORY) reset --flow-id "$$MEMORY_FLOW" --session-id "$$MEMORY_SESSION" $(CONTEXT_OPTION)

# The demo and the benchmarks (benchmarks/, results written to docs/); both use fresh databases of their own.
# `make demo MODEL_NAME=gpt-4o-mini` (with OPENAI_API_KEY set) runs the demo against a real model; OPENAI_BASE_URL
# points it at any OpenAI-compatible server. A slow local model: TURNS= (filler turns), MAX_TOKENS= (the Agent's Max
# Tokens), WINDOW= (its context window in tokens, declared on the Agent).
# `make bench BENCH_ARGS=--quick` runs smaller sizes; `.venv/bin/python -m benchmarks.run --help` lists every knob.
# `make eval` runs the recall eval (docs/eval.md); `make eval QUICK=1` a reduced one; MODEL_NAME=, MAX_TOKENS=,
# WINDOW= as for the demo, EVAL_ARGS= for its sizes (`.venv/bin/python -m benchmarks.eval --help`).
# Each variable means one thing: MODEL is `make run`'s model server, CONTEXT the Agent Context ID of `make memory-*`.
MODEL_NAME ?=
BENCH_ARGS ?=
QUICK ?=
TURNS ?=
MAX_TOKENS ?=
WINDOW ?=
EVAL_ARGS ?=
MODEL_SETTINGS = $(if $(MODEL_NAME),--model $(MODEL_NAME)) $(if $(MAX_TOKENS),--agent-max-tokens $(MAX_TOKENS)) \
	$(if $(WINDOW),--context-window $(WINDOW))

.PHONY: demo bench bench-one-slot eval eval-real eval-real-short eval-locomo test-real

demo: install
	$(BIN)/python -m benchmarks.demo $(MODEL_SETTINGS) $(if $(TURNS),--filler-turns $(TURNS))

bench: install
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

# Back-to-back turns on a simulated one-slot local server (llama.cpp, Ollama, LM Studio): docs/one-slot.md.
bench-one-slot: install
	$(BIN)/python -m benchmarks.one_slot $(BENCH_ARGS)

eval: install
	$(BIN)/python -m benchmarks.eval $(MODEL_SETTINGS) $(if $(QUICK),--quick) $(EVAL_ARGS)

# Recall on a real model: a long chatty session (benchmarks/long_chat.py: 300 stored messages, questions about what
# was said 225+ messages earlier) against Qwen2.5-Coder 1.5B Instruct served by the real-model tier's llama-cpp-python
# (built once, as for make test-real): stock Agent at N=100 and N=10, the switch on at N=10 (search on, off), an oracle; ~35 min,
# into its section of docs/eval.md. eval-real-short: the scripted recall eval at a reduced size (~15 min).
eval-real: install
	UV="$(UV)" PYTHON="$(PYTHON)" $(BIN)/python -m local_model.tier long-chat $(EVAL_ARGS)

# Recall over a real long conversation (benchmarks/locomo.py: LoCoMo's conversation 26, 419 turns, 15 questions
# about turns older than the newest 100) on the same Qwen: stock Agent N=10, the switch on N=10, an oracle; per
# question whether the answering turn was quoted, and token F1; into docs/eval.md. EVAL_ARGS="--conversation 30".
eval-locomo: install
	UV="$(UV)" PYTHON="$(PYTHON)" $(BIN)/python -m local_model.tier locomo $(EVAL_ARGS)

eval-real-short: install
	UV="$(UV)" PYTHON="$(PYTHON)" $(BIN)/python -m local_model.tier eval $(EVAL_ARGS)

# The real-model tier (not part of `make test`): builds llama-cpp-python in .venv-real (once; the wheel and the models
# are kept in ~/.cache/langflow-session-memory), serves Gemma 3 270M (survival on a base model) and then Qwen2.5-Coder
# 1.5B Instruct (memory judged by an instruct model) on 127.0.0.2 and runs tests/real_model through the real app.
# REAL_MODEL=gemma|qwen runs one; REAL_MODEL_URL= runs the instruct-model tests against any OpenAI-compatible server
# instead (docs/real-model.md).
test-real: install
	UV="$(UV)" PYTHON="$(PYTHON)" $(BIN)/python -m local_model.tier
