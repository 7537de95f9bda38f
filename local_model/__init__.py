"""The real-model tier's machinery: llama-cpp-python built for this CPU, small models from PyPI, served on 127.0.0.2
for `make run-local`, `make test-real` and the real-model evals (docs/real-model.md). Never in the wheel."""
