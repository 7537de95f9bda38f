"""The Langflow side of a turn: from a running Agent component to the service and back.

Everything here is a guard or a translation; the rules live in ``service``. Whatever goes
wrong, the Agent gets Langflow's stock history and the turn goes on.
"""

from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import cache
from uuid import UUID

from lfx.log.logger import logger
from lfx.memory.flow_context import coerce_flow_id, resolve_message_owner_id, should_persist_messages
from lfx.schema.message import Message
from lfx.schema.properties import Usage
from lfx.utils.langflow_utils import has_langflow_db_backend

from langflow_session_memory.services.session_memory import context_size

HISTORY_ATTRIBUTE = "_session_memory_history"
MODEL_ATTRIBUTE = "_session_memory_model"
CONTEXT_TOO_LONG = (
    "This conversation no longer fits the model's context window, even with older messages summarized. "
    "Shorten your last message or the Agent's instructions, start a new session, or choose a model with a "
    "larger context window."
)


class ContextTooLongError(ValueError):
    """The prompt does not fit even after hard compaction; the text tells the user what to do."""


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


def agent_model(component, llm):
    """The Agent's model for this run, asked to report usage while streaming.

    Some OpenAI-compatible providers report token usage only when asked
    (``stream_usage``); the early fold needs it. Kept on the component so the fold uses
    the very model the Agent runs, without building a second one.
    """
    if hasattr(llm, "stream_usage") and not llm.stream_usage:
        llm.stream_usage = True
    setattr(component, MODEL_ATTRIBUTE, llm)
    return llm


def _model_of(component):
    return getattr(component, MODEL_ATTRIBUTE, None) or component._get_llm()


def _fixed_tokens(component) -> int:
    """Estimated tokens the history does not control: instructions and the user's input."""
    input_text = component.input_value.text if isinstance(component.input_value, Message) else component.input_value
    return context_size.estimate_tokens(component.system_prompt or "") + context_size.estimate_tokens(
        input_text if isinstance(input_text, str) else ""
    )


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
    return Turn(
        key=key,
        n_messages=int(component.n_messages or 0),
        input_message_id=_uuid_or_none(input_id),
        context_window=context_size.context_window(
            _model_of(component), getattr(component, "context_window_tokens", 0)
        ),
        fixed_tokens=_fixed_tokens(component),
    )


def _uuid_or_none(value) -> UUID | None:
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None


async def history_with_memory(component, stock: Callable[[], Awaitable[list[Message]]]) -> list[Message]:
    """The Agent's history with the summary first; the stock history whenever memory cannot apply."""
    if not component.n_messages or not has_langflow_db_backend() or not should_persist_messages():
        return await stock()
    try:
        turn = _turn_of(component)
        if turn is None:
            return await stock()
        history = await get_session_memory_service().build_history(turn, _model_of(component))
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


async def run_with_context_recovery(component, agent, run: Callable[[object], Awaitable[Message]]) -> Message:
    """Run the Agent; if the provider says the prompt is too long, compact hard and retry once.

    The user's message is stored once (by Chat Input, before this); the retry only sends
    a shorter history. A second refusal, or a prompt that cannot shrink below the window,
    ends the turn with :data:`CONTEXT_TOO_LONG` instead of a provider stack trace.
    """
    try:
        return await run(agent)
    except Exception as error:
        if not context_size.is_context_length_error(error):
            raise
        await logger.awarning(f"session_context_overflow attempt=1 result=refused reason={str(error)[:300]!r}")
        compacted = await _compacted_history(component)
        if compacted is None:
            raise ContextTooLongError(CONTEXT_TOO_LONG) from error
        component.chat_history = compacted.messages
    try:
        result = await run(agent)
    except Exception as error:
        if not context_size.is_context_length_error(error):
            raise
        await logger.awarning("session_context_overflow attempt=2 result=refused action=give_up")
        raise ContextTooLongError(CONTEXT_TOO_LONG) from error
    await logger.ainfo("session_context_overflow attempt=2 result=answered")
    return result


async def _compacted_history(component):
    """The summary-only history, or None when even that cannot fit (so retrying is pointless)."""
    if not has_langflow_db_backend() or not should_persist_messages():
        return None
    try:
        turn = _turn_of(component)
        if turn is None:
            return None
        history = await get_session_memory_service().compact(turn, _model_of(component))
    except Exception as error:  # noqa: BLE001 - compaction is best effort; the turn then ends with the clear message
        await logger.aexception(f"session_memory_fallback reason={type(error).__name__}: {error}")
        return None
    size_after = turn.fixed_tokens + context_size.estimated_size(m.text for m in history.messages)
    await logger.awarning(
        f"session_context_overflow action=compact size_after={size_after} context_window={turn.context_window} "
        f"folded={history.folded}"
    )
    if turn.context_window and size_after > turn.context_window:
        return None
    previous = getattr(component, HISTORY_ATTRIBUTE, None)
    if previous is not None:
        history = replace(
            history,
            input_tokens=history.input_tokens + previous.input_tokens,
            output_tokens=history.output_tokens + previous.output_tokens,
        )
    setattr(component, HISTORY_ATTRIBUTE, history)
    return history
