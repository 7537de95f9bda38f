"""Stateful parts of the extension: planner, store, queries, summarizer, cleanup."""
