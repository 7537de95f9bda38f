"""The bundled model server: a deterministic stand-in for OpenAI's and Anthropic's APIs (and Ollama's embeddings).

``make run`` starts it when no model key is set; the tests, the demo and the benchmarks run against it
so they need no network or API key. It shows what reaches the model, not what a model would answer.
"""
