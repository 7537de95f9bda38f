"""The module path the Session Memory Agent imported before the adapter moved to ``agent/``.

Saved flows re-run the frozen copy of the component file they were saved with, and those
copies import their hooks from here; this module hands on the same hooks, so a flow saved
before the move keeps running. New code imports ``agent.hooks``.
"""

from langflow_session_memory.services.session_memory.agent.hooks import (
    agent_middleware,
    agent_model,
    agent_tools,
    finish_turn,
    history_with_memory,
    memory_switched_on,
    run_with_context_recovery,
    stored_message,
    with_memory_step,
)

__all__ = [
    "agent_middleware",
    "agent_model",
    "agent_tools",
    "finish_turn",
    "history_with_memory",
    "memory_switched_on",
    "run_with_context_recovery",
    "stored_message",
    "with_memory_step",
]
