"""Session memory: fold older chat messages into a per-session summary."""
