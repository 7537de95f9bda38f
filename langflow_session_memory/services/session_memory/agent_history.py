"""The Langflow side of a turn: from a running Agent component to the service and back.

Everything here is a guard or a translation; the rules live in ``service``. Whatever goes
wrong, the Agent gets Langflow's stock history and the turn goes on.
"""

from collections.abc import Awaitable, Callable
from functools import cache
from uuid import UUID

from lfx.log.logger import logger
from lfx.memory.flow_context import coerce_flow_id, resolve_message_owner_id, should_persist_messages
from lfx.schema.message import Message
from lfx.schema.properties import Usage
from lfx.utils.langflow_utils import has_langflow_db_backend

HISTORY_ATTRIBUTE = "_session_memory_history"


@cache
def get_session_memory_service():
    """The process-wide service, on Langflow's own database sessions.

    Also installs the cleanup listeners, for processes that run flows without building
    Langflow's app (and so without our plugin), such as a worker.
    """
    from lfx.services.deps import session_scope

    from langflow_session_memory.services.session_memory.cleanup import install_cleanup_listeners
    from langflow_session_memory.services.session_memory.service import SessionMemoryService

    install_cleanup_listeners()
    return SessionMemoryService(sessions=session_scope)


def _turn_of(component):
    """The turn's key and input, or None when the run has no stored, owned history."""
    from langflow_session_memory.services.session_memory.model import SessionKey
    from langflow_session_memory.services.session_memory.service import Turn

    graph = getattr(component, "graph", None)
    flow_id = coerce_flow_id(getattr(graph, "flow_id", None))
    owner_id = resolve_message_owner_id(graph) if graph is not None else None
    if flow_id is None or owner_id is None or not getattr(graph, "session_id", None):
        return None
    input_id = component.input_value.get_id() if isinstance(component.input_value, Message) else None
    key = SessionKey(
        flow_id=flow_id,
        owner_id=owner_id,
        session_id=str(graph.session_id),
        context_id=component.context_id or "",
    )
    return Turn(key=key, n_messages=int(component.n_messages or 0), input_message_id=_uuid_or_none(input_id))


def _uuid_or_none(value) -> UUID | None:
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None


async def history_with_memory(component, stock: Callable[[], Awaitable[list[Message]]]) -> list[Message]:
    """The Agent's history with the summary first; the stock history whenever memory cannot apply."""
    if not component.n_messages or not has_langflow_db_backend() or not should_persist_messages():
        return await stock()
    turn = _turn_of(component)
    if turn is None:
        return await stock()
    try:
        history = await get_session_memory_service().build_history(turn, component._get_llm)
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock history
        await logger.aexception(f"session_memory_fallback reason={type(error).__name__}: {error}")
        return await stock()
    setattr(component, HISTORY_ATTRIBUTE, history)
    return history.messages


async def add_fold_usage(component, result: Message) -> Message:
    """Add this turn's fold tokens to the usage the Agent reports and stores.

    Both places matter: the stored Agent message, and ``_token_usage``, from which
    Langflow's Chat Output recomputes the usage it stores last.
    """
    history = getattr(component, HISTORY_ATTRIBUTE, None)
    usage = result.properties.usage if result.properties else None
    if history is None or not (history.input_tokens or history.output_tokens) or usage is None:
        return result
    input_tokens = (usage.input_tokens or 0) + history.input_tokens
    output_tokens = (usage.output_tokens or 0) + history.output_tokens
    total = Usage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens)
    result.properties.usage = total
    component._token_usage = total
    if result.get_id():
        result = await component._update_stored_message(result)
    return result
