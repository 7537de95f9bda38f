"""Langflow components shipped by this extension (loaded as an lfx bundle)."""
