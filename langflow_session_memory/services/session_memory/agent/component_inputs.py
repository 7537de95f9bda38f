"""The running Agent component's inputs as session memory reads them: its switches, its models, its window.

Read once where a run begins (:func:`read_inputs`, for ``guard.memory_turn``) and by the hooks that act where
memory does not apply; a BoolInput is read as Langflow reads it, an input never set (an Agent built without
``__init__``) as its default.
"""

from dataclasses import dataclass

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from lfx.inputs.validators import validate_boolean
from lfx.log.logger import logger
from lfx.memory.flow_context import coerce_flow_id, resolve_message_owner_id, should_persist_messages
from lfx.schema.message import Message
from lfx.utils.langflow_utils import has_langflow_db_backend

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.search import TOOL_NAME, tool_schema_tokens
from langflow_session_memory.services.session_memory.rules import context_size, token_estimate
from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT
from langflow_session_memory.services.session_memory.rules.state import SessionKey

# Langflow's date and calculator tools, added to the Agent after its history is read: each one's switch, and name.
BUILT_IN_TOOLS = (("add_current_date_tool", "get_current_date"), ("add_calculator_tool", "evaluate_expression"))


@dataclass(frozen=True)
class Inputs:
    """What a run of the component gives memory, read at once: its chat's key, its window of messages and its
    input, its models (the Agent's, a Summary Model, an Embedding Model), the provider the fold's remediations are
    scoped to, the windows (declared, the Agent's, the fold's), where the Agent's model is served, the tracing
    handlers and the tokens the history does not control."""

    key: SessionKey
    n_messages: int
    given: object
    agent_model: BaseChatModel
    summary_model: BaseChatModel | None
    embedding_model: Embeddings | None
    provider: str | None
    declared_window: int | None
    context_window: int | None
    fold_context_window: int | None
    model_server: str | None
    tracing: tuple
    fixed_tokens: int

    @property
    def fold_model(self) -> BaseChatModel:
        return self.summary_model or self.agent_model


def read_inputs(component, model: BaseChatModel | None = None) -> Inputs | None:
    """The component's inputs, with ``model`` as the Agent's (the run's, else built by Langflow), or None wherever
    memory must not apply (the stock history is then used): N = 0, no Langflow database (standalone lfx), a run
    whose messages are not stored, or a run without a flow, an owner or a session."""
    if not component.n_messages or not has_langflow_db_backend() or not should_persist_messages():
        return None
    graph = getattr(component, "graph", None)
    flow_id = coerce_flow_id(getattr(graph, "flow_id", None))
    owner_id = resolve_message_owner_id(graph) if graph is not None else None
    if flow_id is None or owner_id is None or not getattr(graph, "session_id", None):
        return None
    summary_model = summary_model_of(component)
    agent_model = model if model is not None else component._get_llm()
    declared_window = configured_context_window(component) or None
    embedding_model = embedding_model_of(component)
    # The provider names Langflow's provider-scoped remediations for the model that folds; a connected
    # Summary Model's provider is not known here, so only the unscoped ones apply to it.
    provider = None if summary_model else component._selected_model_remediation_context()[0]
    tracing = tuple(tracing_callbacks(component))
    server = model_url(agent_model)
    fixed = fixed_tokens(component)
    context_window = context_size.context_window(agent_model, declared_window)
    return Inputs(
        key=SessionKey(
            flow_id=flow_id, owner_id=owner_id, session_id=str(graph.session_id), context_id=component.context_id or ""
        ),
        n_messages=int(component.n_messages),
        given=component.input_value,
        agent_model=agent_model,
        summary_model=summary_model,
        embedding_model=embedding_model,
        provider=provider,
        declared_window=declared_window,
        context_window=context_window,
        fold_context_window=context_size.context_window(summary_model, None) if summary_model else context_window,
        model_server=server,
        tracing=tracing,
        fixed_tokens=fixed,
    )


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


def summary_model_of(component) -> BaseChatModel | None:
    """The model connected to "Summary Model", if any: it folds instead of the Agent's own model."""
    model = getattr(component, "summary_model", None)
    return model if isinstance(model, BaseChatModel) else None


def embedding_model_of(component) -> Embeddings | None:
    """The model connected to "Embedding Model", if any: it finds older messages by meaning as well as words."""
    model = getattr(component, "embedding_model", None)
    return model if isinstance(model, Embeddings) else None


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


def fixed_tokens(component) -> int:
    """Estimated tokens the history does not control: instructions, the user's input, and the tools' schemas sent
    with every request (those on the component, and those added to it after the history is read: Langflow's date
    and calculator tools where switched on, the search tool)."""
    given = getattr(component, "input_value", None)
    input_text = given.text if isinstance(given, Message) else given
    tools = [tool for tool in getattr(component, "tools", None) or [] if isinstance(tool, BaseTool)]
    names = {tool.name for tool in tools}
    built_in = [
        name
        for switch, name in (
            ("add_current_date_tool", "get_current_date"),
            ("add_calculator_tool", "evaluate_expression"),
        )
        if bool_input(component, switch, default=False) and name not in names
    ]
    searches = search_switched_on(component) and TOOL_NAME not in names
    texts = [getattr(component, "system_prompt", None) or "", input_text if isinstance(input_text, str) else ""]
    return (
        sum(map(token_estimate.estimate_tokens, texts))
        + sum(map(token_estimate.tool_tokens, tools))
        + CALL_FIT.built_in_tool_tokens * len(built_in)
        + (tool_schema_tokens() if searches else 0)
    )
