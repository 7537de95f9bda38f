"""The module path of ``store_without_notes``, which the component imported at f60b048 and 991bf29 (2026-11-30).

Saved flows re-run the component code they were saved with; a flow saved then still imports this name,
which hands on to what it became, ``agent.hooks.stored_message`` (same arguments: the message, Langflow's
write). ``tests/app/test_saved_flows.py`` runs that code.
"""

from langflow_session_memory.services.session_memory.agent.hooks import stored_message as store_without_notes

__all__ = ["store_without_notes"]
