"""The running Agent component's inputs as session memory reads them: its switches, its models, its window.

Read where a run begins (``guard.begin_turn``) and by the hooks that act where memory does not apply; a BoolInput
is read as Langflow reads it, an input never set (an Agent built without ``__init__``) as its default.
"""

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from lfx.inputs.validators import validate_boolean
from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.run import run_of


def memory_switched_on(component) -> bool:
    """The switch as Langflow's BoolInput reads it; off when never set (an Agent built without ``__init__``)."""
    return bool_input(component, "summarize_older_messages", default=False)


def search_switched_on(component) -> bool:
    """The "Search Older Messages" input; on when never set."""
    return bool_input(component, "search_older_messages", default=True)


def bool_input(component, name: str, *, default: bool) -> bool:
    """A BoolInput's value as Langflow reads it (``"true"``, ``"1"``, ``"yes"`` are on); ``default`` when never set."""
    value = getattr(component, name, default)
    try:
        return validate_boolean(value)
    except ValueError:
        return bool(value)


def configured_context_window(component) -> int:
    """The "Context Window (tokens)" input as a whole number; 0 (use the model's profile) when not one."""
    value = getattr(component, "context_window_tokens", 0)
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        logger.warning(f"{log_events.SETTING_IGNORED} input=context_window_tokens reason=not_a_whole_number")
        return 0


def agent_model_of(component):
    """The model this attempt's Agent uses (the one its run kept), built by Langflow when not kept yet."""
    run = run_of(component)
    return run.model if run is not None and run.model is not None else component._get_llm()


def summary_model_of(component) -> BaseChatModel | None:
    """The model connected to "Summary Model", if any: it folds instead of the Agent's own model."""
    model = getattr(component, "summary_model", None)
    return model if isinstance(model, BaseChatModel) else None


def embedding_model_of(component) -> Embeddings | None:
    """The model connected to "Embedding Model", if any: it finds older messages by meaning as well as words."""
    model = getattr(component, "embedding_model", None)
    return model if isinstance(model, Embeddings) else None


def fold_model_of(component) -> BaseChatModel:
    return summary_model_of(component) or agent_model_of(component)


def model_url(llm) -> str | None:
    """Where the model is served, as its LangChain class keeps it (None: the provider's own default).

    Without a trailing slash: the OpenAI client keeps ``.../v1/`` where Langflow's provider
    passes ``.../v1``, and both name one server.
    """
    for name in ("openai_api_base", "base_url", "anthropic_api_url", "api_base", "endpoint_url"):
        value = getattr(llm, name, None)
        if isinstance(value, str) and value:
            return value.rstrip("/")
    client_url = getattr(getattr(llm, "root_client", None), "base_url", None)
    return str(client_url).rstrip("/") if client_url else None


def tracing_callbacks(component) -> list:
    """The Agent's tracing handlers (Langflow's tracing service), as lfx gives them to the Agent's tools."""
    shared = getattr(component, "_get_shared_callbacks", None)
    return list(shared()) if callable(shared) else []
