"""The module path of ``with_recall_tool``, which the component imported at 991bf29 (2026-11-30).

Saved flows re-run the component code they were saved with; a flow saved then still imports this name,
which hands on to what it became, ``agent.hooks.agent_tools`` (same arguments: the component, its tools).
``tests/app/test_saved_flows.py`` runs that code.
"""

from langflow_session_memory.services.session_memory.agent.hooks import agent_tools as with_recall_tool

__all__ = ["with_recall_tool"]
