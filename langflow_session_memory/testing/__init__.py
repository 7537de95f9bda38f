"""Test helpers: a deterministic fake OpenAI server so tests, demos and benchmarks need no network or API key."""
