"""The Langflow side of a turn: from a running Agent component to the service and back.

Everything here is a guard or a translation; the rules live in ``service``. Whatever goes
wrong, the Agent gets Langflow's stock history and the turn goes on.
"""

import json
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import cache
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from lfx.inputs.validators import validate_boolean
from lfx.log.logger import logger
from lfx.memory.flow_context import coerce_flow_id, resolve_message_owner_id, should_persist_messages
from lfx.schema.message import Message
from lfx.schema.properties import Usage
from lfx.utils.langflow_utils import has_langflow_db_backend

from langflow_session_memory.services.session_memory import context_size, playground
from langflow_session_memory.services.session_memory.reasons import describe

# Langflow's date and calculator tools: their schemas measured at 78 and 82 tokens.
BUILT_IN_TOOL_TOKENS = 90
HISTORY_ATTRIBUTE = "_session_memory_history"
MODEL_ATTRIBUTE = "_session_memory_model"
CALLS_ATTRIBUTE = "_session_memory_calls"
CONTEXT_TOO_LONG = (
    "This conversation no longer fits the model's context window, even with older messages summarized. "
    "Shorten your last message or the Agent's instructions, start a new session, or choose a model with a "
    "larger context window."
)


class ContextTooLongError(ValueError):
    """The prompt does not fit even after hard compaction; the text tells the user what to do."""


class ModelCalls(AsyncCallbackHandler):
    """Counts the Agent's model calls in a run and keeps what the provider reported for the last one.

    Attached to the Agent's own model, so it sees every call of the tool loop (and none of
    the folds, which run on a copy without callbacks). The last call's size is what the
    next turn's prompt grows from; the usage Langflow stores sums every call of the turn.
    """

    def __init__(self) -> None:
        self.started = 0
        self.last_call_tokens: int | None = None
        self._prompt_estimate = 0

    async def on_chat_model_start(self, _serialized, messages, **_kwargs) -> None:
        self.started += 1
        self._prompt_estimate = context_size.estimated_size(
            message.text if isinstance(message.text, str) else str(message.content) for message in messages[0]
        )

    async def on_llm_end(self, response, **_kwargs) -> None:
        """The call's size as the provider reported it; estimated when it reported none (llama.cpp's streams)."""
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                if usage.get("input_tokens"):
                    self.last_call_tokens = int(usage["input_tokens"]) + int(usage.get("output_tokens") or 0)
                else:
                    self.last_call_tokens = self._prompt_estimate + context_size.estimate_tokens(generation.text)


@asynccontextmanager
async def langflow_database_session():
    """A session from Langflow's own session maker; the service commits what it writes.

    Not ``session_scope``: that logs any error with its traceback, and SQLAlchemy's error
    text quotes the statement's parameters, such as the summary being written. Our
    failures are logged by the service, without text (see ``reasons``).
    """
    from lfx.services.deps import get_db_service

    async with get_db_service().async_session_maker() as session:
        yield session


@cache
def get_session_memory_service():
    """The process-wide service, on Langflow's own database.

    Also installs the cleanup listeners, for processes that run flows without building
    Langflow's app (and so without our plugin), such as a worker.
    """
    from langflow_session_memory.services.session_memory.cleanup import install_cleanup_listeners
    from langflow_session_memory.services.session_memory.service import SessionMemoryService
    from langflow_session_memory.services.session_memory.settings import fold_timeout_seconds

    install_cleanup_listeners()
    return SessionMemoryService(sessions=langflow_database_session, fold_timeout=fold_timeout_seconds())


def memory_switched_on(component) -> bool:
    """The switch as Langflow's BoolInput reads it; off when never set (an Agent built without ``__init__``)."""
    return bool_input(component, "summarize_older_messages", default=False)


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
        logger.warning("session_memory_setting_ignored input=context_window_tokens reason=not_a_whole_number")
        return 0


def agent_model(component, llm):
    """The Agent's model for this run, asked to report usage, with a counter of its calls.

    Some OpenAI-compatible providers report token usage only when asked
    (``stream_usage``); the early fold needs it. Kept on the component so the fold uses
    the very model the Agent runs, without building a second one.
    """
    if hasattr(llm, "stream_usage") and not llm.stream_usage:
        llm.stream_usage = True
    calls = ModelCalls()
    if hasattr(llm, "callbacks"):
        llm.callbacks = [*(handler for handler in llm.callbacks or [] if not isinstance(handler, ModelCalls)), calls]
    setattr(component, MODEL_ATTRIBUTE, llm)
    setattr(component, CALLS_ATTRIBUTE, calls)
    return llm


def _model_of(component):
    return getattr(component, MODEL_ATTRIBUTE, None) or component._get_llm()


def _summary_model_of(component) -> BaseChatModel | None:
    """The model connected to "Summary Model", if any: it folds instead of the Agent's own model."""
    model = getattr(component, "summary_model", None)
    return model if isinstance(model, BaseChatModel) else None


def _fold_model_of(component) -> BaseChatModel:
    return _summary_model_of(component) or _model_of(component)


def _fixed_tokens(component) -> int:
    """Estimated tokens the history does not control: instructions, tools and the user's input."""
    given = getattr(component, "input_value", None)
    input_text = given.text if isinstance(given, Message) else given
    return (
        context_size.estimate_tokens(getattr(component, "system_prompt", None) or "")
        + context_size.estimate_tokens(input_text if isinstance(input_text, str) else "")
        + _tools_tokens(component)
    )


def _tools_tokens(component) -> int:
    """The tools' schemas, sent with every request: the connected ones, Langflow's built-in date and
    calculator tools where switched on (added after the history is read), and the search tool."""
    from langflow_session_memory.services.session_memory.recall_tool import recall_tool_tokens, search_switched_on

    connected = [tool for tool in getattr(component, "tools", None) or [] if isinstance(tool, BaseTool)]
    built_in = sum(bool(getattr(component, flag, False)) for flag in ("add_current_date_tool", "add_calculator_tool"))
    return (
        sum(context_size.estimate_tokens(json.dumps(convert_to_openai_tool(tool))) for tool in connected)
        + built_in * BUILT_IN_TOOL_TOKENS
        + (recall_tool_tokens() if search_switched_on(component) else 0)
    )


def _request_tokens(component, messages) -> int:
    """The estimated size of the Agent's request with ``messages`` as its history."""
    return _fixed_tokens(component) + context_size.estimated_size(
        getattr(message, "text", "") if isinstance(getattr(message, "text", ""), str) else "" for message in messages
    )


def _memory_turn(component, *, folds_after_turn: bool = False):
    """The turn's key and input, or None wherever memory must not apply (the stock history is then used).

    The one guard for every path: N = 0, no Langflow database (standalone lfx), a run
    whose messages are not stored, or a run without a flow, an owner or a session.
    """
    from langflow_session_memory.services.session_memory.model import SessionKey
    from langflow_session_memory.services.session_memory.service import Turn

    if not component.n_messages or not has_langflow_db_backend() or not should_persist_messages():
        return None
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
    # The provider names Langflow's provider-scoped remediations for the model that folds; a connected
    # Summary Model's provider is not known here, so only the unscoped ones apply to it.
    summary_model = _summary_model_of(component)
    provider = None if summary_model else component._selected_model_remediation_context()[0]
    context_window = context_size.context_window(_model_of(component), configured_context_window(component))
    return Turn(
        key=key,
        n_messages=int(component.n_messages),
        input_message_id=_uuid_or_none(input_id),
        context_window=context_window,
        fixed_tokens=_fixed_tokens(component),
        provider=provider,
        folds_after_turn=folds_after_turn,
        fold_context_window=context_size.context_window(summary_model, None) if summary_model else context_window,
    )


def _uuid_or_none(value) -> UUID | None:
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None


async def _with_memory(component, build, failure_event: str = "session_memory_fallback"):
    """Run ``build(service, turn)``; None where memory does not apply or failed (logged without any text)."""
    try:
        service = get_session_memory_service()
        turn = _memory_turn(component, folds_after_turn=service.background.available())
        if turn is None:
            return None
        return turn, await build(service, turn)
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock history
        await logger.aerror(f"{failure_event} reason={describe(error)}")
        return None


async def history_with_memory(component, stock: Callable[[], Awaitable[list[Message]]]) -> list[Message]:
    """The Agent's history with the summary first; the stock history whenever memory cannot apply."""
    built = await _with_memory(component, lambda service, turn: service.build_history(turn, _fold_model_of(component)))
    if built is None:
        return await stock()
    _turn, history = built
    setattr(component, HISTORY_ATTRIBUTE, history)
    return history.messages


def with_memory_step(component, message: Message) -> Message:
    """The Agent's new answer with the "Session memory" step first among its steps, when there is one to show."""
    history = getattr(component, HISTORY_ATTRIBUTE, None)
    graph = getattr(component, "graph", None)
    if history is None or graph is None:
        return message
    step = playground.memory_step(history, session_id=str(graph.session_id), flow_id=graph.flow_id)
    if step is not None:
        message.content_blocks.insert(0, step)
    return message


async def finish_turn(component, result: Message) -> Message:
    """After the Agent answered: add the fold tokens to its usage, keep the last call's size if large,
    and start the fold the answer makes due, in the background.

    The answer goes on to the rest of the flow (Chat Output stores it again) with the
    "Session memory" step's counts only, never the notes.
    """
    await _record_call_size(component)
    result = await _add_fold_usage(component, result)
    await _start_fold_after_answer(component)
    return playground.without_notes(result)


async def _start_fold_after_answer(component) -> None:
    """Fold the messages this turn leaves unfolded after the answer is given, so no turn waits for it."""
    history = getattr(component, HISTORY_ATTRIBUTE, None)
    if history is None or not history.fold_due:
        return
    llm = _fold_model_of(component)

    async def start(service, turn):
        service.background.start(turn.key, lambda: service.fold_after_turn(turn, llm))

    await _with_memory(component, start, failure_event="session_summary_fold_failed mode=background")


async def _add_fold_usage(component, result: Message) -> Message:
    """Add this turn's fold tokens to the usage the Agent reports and stores, and log the turn's figures.

    Both places matter: the stored Agent message, and ``_token_usage``, from which
    Langflow's Chat Output recomputes the usage it stores last. A provider that reported no
    usage (llama.cpp ignores ``stream_options``) gets the estimate instead, marked as one
    on the "Session memory" step and in the log line, so no figure goes missing unsaid.
    """
    history = getattr(component, HISTORY_ATTRIBUTE, None)
    if history is None or result.properties is None:
        return result
    usage = result.properties.usage
    estimated = history.tokens_estimated
    if usage is None or not usage.input_tokens:
        usage = Usage(
            input_tokens=_request_tokens(component, getattr(component, "chat_history", None) or []),
            output_tokens=context_size.estimate_tokens(result.text if isinstance(result.text, str) else ""),
        )
        estimated = True
    input_tokens = (usage.input_tokens or 0) + history.input_tokens
    output_tokens = (usage.output_tokens or 0) + history.output_tokens
    await logger.ainfo(
        f"session_memory_turn input_tokens={input_tokens} output_tokens={output_tokens} "
        f"fold_input_tokens={history.input_tokens} fold_output_tokens={history.output_tokens} "
        f"usage={'estimated' if estimated else 'reported'} folded={history.folded} "
        f"history_messages={len(history.messages)}"
    )
    if not (history.input_tokens or history.output_tokens or estimated):
        return result
    total = Usage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens)
    result.properties.usage = total
    component._token_usage = total
    if estimated:
        result = playground.with_usage_estimated(result)
    if result.get_id():
        result = await component._update_stored_message(result)
    return result


async def _record_call_size(component) -> None:
    """Store the last model call's size when it may matter to the next turn's early fold.

    Only a size of at least :data:`context_size.RECORD_RATIO` of the window is kept (and a
    kept one is overwritten or cleared), so an ordinary turn writes nothing.
    """
    history = getattr(component, HISTORY_ATTRIBUTE, None)
    calls = getattr(component, CALLS_ATTRIBUTE, None)
    if history is None or calls is None or calls.last_call_tokens is None:
        return

    async def record(service, turn):
        size = calls.last_call_tokens
        keep = size if turn.context_window and size >= context_size.RECORD_RATIO * turn.context_window else None
        if keep != (history.state.last_call_tokens if history.state else None):
            await service.record_call_size(turn.key, keep)

    await _with_memory(component, record, failure_event="session_memory_call_size_failed")


async def run_with_context_recovery(component, agent, run: Callable[[object], Awaitable[Message]]) -> Message:
    """Run the Agent; if the provider says the prompt is too long, compact hard and retry once.

    Only a run refused at its first model call is retried: after that a tool may have
    run, and running the Agent again would run it twice, so such a run ends with
    :data:`CONTEXT_TOO_LONG`. The user's message is stored once (by Chat Input, before
    this); the retry only sends a shorter history. A second refusal, or a prompt that
    cannot shrink below the window, ends the turn with :data:`CONTEXT_TOO_LONG` instead of
    a provider stack trace.
    """
    calls = getattr(component, CALLS_ATTRIBUTE, None)
    started_before = calls.started if calls else 0
    try:
        return await run(agent)
    except Exception as error:
        if not _refused_as_too_long(component, error):
            raise
        model_calls = (calls.started if calls else 0) - started_before
        await logger.awarning(
            f"session_context_overflow attempt=1 result=refused reason={describe(error)!r} model_calls={model_calls}"
        )
        if model_calls > 1:
            await logger.awarning("session_context_overflow attempt=1 action=give_up reason=tools_already_ran")
            raise ContextTooLongError(CONTEXT_TOO_LONG) from error
        compacted = await _compacted_history(component)
        if compacted is None:
            raise ContextTooLongError(CONTEXT_TOO_LONG) from error
        component.chat_history = compacted.messages
    try:
        result = await run(agent)
    except Exception as error:
        if not _refused_as_too_long(component, error):
            raise
        await logger.awarning("session_context_overflow attempt=2 result=refused action=give_up")
        raise ContextTooLongError(CONTEXT_TOO_LONG) from error
    await logger.ainfo("session_context_overflow attempt=2 result=answered")
    return result


def _refused_as_too_long(component, error: Exception) -> bool:
    """The provider's "prompt too long", or an empty stream where the request could overflow the window.

    llama-cpp-python's server answers an overflowing streamed request with an empty 200
    stream, which LangChain reports as "No generations found in stream"; the Agent always
    streams. See :func:`context_size.is_probable_overflow` for where an empty stream counts.
    """
    if not context_size.is_empty_stream(error):
        return context_size.is_context_length_error(error)
    # Only the builder's own Context Window: a local server behind the OpenAI provider serves under a
    # cloud model's name, whose LangChain profile claims a window the server does not have.
    return context_size.is_probable_overflow(
        error,
        request_tokens=_request_tokens(component, getattr(component, "chat_history", None) or []),
        context_window=configured_context_window(component) or None,
    )


async def _compacted_history(component):
    """The summary-only history, or None when even that cannot fit (so retrying is pointless)."""
    built = await _with_memory(component, lambda service, turn: service.compact(turn, _fold_model_of(component)))
    if built is None:
        return None
    turn, history = built
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
