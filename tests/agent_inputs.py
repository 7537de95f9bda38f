"""A run's component inputs for the hooks' service tests, where no Langflow graph stands behind the component."""

from langflow_session_memory.services.session_memory.agent.component_inputs import Inputs
from langflow_session_memory.services.session_memory.rules.state import SessionKey


def read_as(key: SessionKey, context_window: int | None = 1000):
    """A stand-in for ``component_inputs.read_inputs``: the chat ``key``, N = 10, the run's Agent model."""

    def read(_component, model) -> Inputs:
        return Inputs(
            key=key,
            n_messages=10,
            given=None,
            agent_model=model,
            summary_model=None,
            embedding_model=None,
            provider=None,
            declared_window=context_window,
            context_window=context_window,
            fold_context_window=context_window,
            model_server=None,
            tracing=(),
            fixed_tokens=0,
        )

    return read
