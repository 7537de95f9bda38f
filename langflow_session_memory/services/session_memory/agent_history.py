"""The module the Session Memory Agent imports its hooks from: the one stable path of docs/design.md's contracts.

Saved flows re-run the frozen copy of the component file they were saved with, and those copies
import their hooks from here (or, from c8a47b5 to c41bc1a, from ``agent.hooks``, which keeps these
names too). Every name any version of the component imported stays, handed on to what it became:
``add_fold_usage`` (144a3b0, f8f2c62) is ``finish_turn``, which adds the folds' usage to the answer
and starts the fold after it. ``tests/app/test_saved_flows.py`` runs every version from git history.
"""

from langflow_session_memory.services.session_memory.agent.hooks import (
    CONTEXT_WINDOW_INFO,
    SWITCH_INFO,
    agent_middleware,
    agent_model,
    agent_model_once,
    agent_tools,
    finish_turn,
    history_with_memory,
    memory_switched_on,
    run_with_context_recovery,
    stored_message,
    with_memory_step,
)

add_fold_usage = finish_turn

__all__ = [
    "CONTEXT_WINDOW_INFO",
    "SWITCH_INFO",
    "add_fold_usage",
    "agent_middleware",
    "agent_model",
    "agent_model_once",
    "agent_tools",
    "finish_turn",
    "history_with_memory",
    "memory_switched_on",
    "run_with_context_recovery",
    "stored_message",
    "with_memory_step",
]
