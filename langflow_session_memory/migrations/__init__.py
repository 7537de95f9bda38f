"""Alembic environment for the session_memory_state table (own version table)."""
