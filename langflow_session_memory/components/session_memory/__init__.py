"""The Session Memory bundle: Langflow's Agent with an opt-in summary of older messages."""
