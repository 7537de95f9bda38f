"""The one module the Session Memory Agent imports its hooks from: the seam of docs/design.md's contracts.

Saved flows re-run the frozen copy of the component file they were saved with (every version is kept in
``tests/app/saved_components``, and ``tests/app/test_saved_flows.py`` runs each one). So the names below and
the parameters of each hook stay as they are; what they call (``agent.component_hooks``) can move. Names an
earlier version imported are kept under :data:`OLD_NAMES`, and the paths it imported them from are old names of
this module (``services.session_memory.OLD_SEAM_PATHS``).
"""

from langflow_session_memory.services.session_memory.agent.component_hooks import (
    CONTEXT_WINDOW_INFO,
    SWITCH_INFO,
    agent_middleware,
    agent_model,
    agent_model_once,
    agent_tools,
    finish_turn,
    history_with_memory,
    run_with_context_recovery,
    stored_message,
    with_memory_step,
)
from langflow_session_memory.services.session_memory.agent.component_inputs import memory_switched_on

# Every hook a version of the component calls, with its parameters in order (tests/services/test_seam.py).
HOOKS = {
    "agent_middleware": ("component", "llm", "middleware"),
    "agent_model": ("component", "llm"),
    "agent_model_once": ("component", "build"),
    "agent_tools": ("component", "tools"),
    "finish_turn": ("component", "result"),
    "history_with_memory": ("component", "stock"),
    "memory_switched_on": ("component",),
    "run_with_context_recovery": ("component", "agent", "run"),
    "stored_message": ("message", "write"),
    "with_memory_step": ("component", "message"),
}
# The node's help texts, which later versions read.
TEXTS = ("CONTEXT_WINDOW_INFO", "SWITCH_INFO")
# A hook's earlier name: ``add_fold_usage`` (2026-11-30) adds the folds' usage to the answer and starts the fold
# after it, as ``finish_turn`` does; ``store_without_notes`` and ``with_recall_tool`` (2026-11-30, under the old
# paths ``playground`` and ``recall_tool``) are ``stored_message`` and ``agent_tools``.
OLD_NAMES = {
    "add_fold_usage": "finish_turn",
    "store_without_notes": "stored_message",
    "with_recall_tool": "agent_tools",
}
add_fold_usage = finish_turn
store_without_notes = stored_message
with_recall_tool = agent_tools

__all__ = [  # TEXTS, HOOKS and OLD_NAMES (tests/services/test_seam.py)
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
    "store_without_notes",
    "stored_message",
    "with_memory_step",
    "with_recall_tool",
]
