"""The estimated size of the Agent's request with a given history, as the fitting and the "prompt too long" re-run
compare it with the window (what the history does not control is the Turn's ``fixed_tokens``, read with the
component's inputs)."""

from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.turn import Turn


def request_tokens(turn: Turn, messages) -> int:
    """The estimated size of the Agent's request with ``messages`` as its history."""
    return turn.fixed_tokens + token_estimate.estimated_size(token_estimate.text_of(message) for message in messages)
