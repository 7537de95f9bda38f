"""Where memory applies to a run, and the one failure rule: whatever of it fails, the Agent goes on as the stock one.

:func:`begin_turn` reads the component once, at the history hook (before the Agent runs), into the run's
:class:`Turn` (:func:`memory_turn`, the one guard); :func:`with_memory` hands that Turn to every later hook.
Where memory must not apply, or anything of it fails, the caller gets None and the Agent goes on as the stock
one; :func:`stock_on_failure` is that rule for every hook and middleware of ours.
"""

from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import UUID

from lfx.log.logger import logger
from lfx.memory.flow_context import coerce_flow_id, resolve_message_owner_id, should_persist_messages
from lfx.schema.message import Message
from lfx.utils.langflow_utils import has_langflow_db_backend

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.component_inputs import (
    agent_model_of,
    configured_context_window,
    embedding_model_of,
    fold_model_of,
    model_url,
    summary_model_of,
    tracing_callbacks,
)
from langflow_session_memory.services.session_memory.agent.request_size import fixed_tokens
from langflow_session_memory.services.session_memory.agent.run import Phase, Run, begin_run, run_of
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import context_size, ranking
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.runtime import get_session_memory_service
from langflow_session_memory.services.session_memory.settings import new_turn_waits_for_folds

T = TypeVar("T")


async def begin_turn(component) -> Run:
    """The attempt's run with its history read: its Turn read from the component, once, and kept with the model
    that folds for it, so no later hook reads the component again. The Turn is None where memory does not apply
    or reading it failed (logged without any text).

    A run its first model began reads its history here; else this hook begins the attempt's run: a component
    version without the model hook, or an attempt whose model hook failed, carries nothing of the one before.
    """
    run = run_of(component)
    if run is None or run.phase is not Phase.CREATED:
        run = begin_run(component)
    try:
        turn = memory_turn(component)
        if turn is not None:
            run.turn, run.fold_model, run.embedder = turn, fold_model_of(component), embedding_model_of(component)
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock history
        await logger.aerror(f"{log_events.FALLBACK} reason={describe(error)}")
    run.enter(Phase.HISTORY_READ)
    return run


def memory_turn(component) -> Turn | None:
    """The turn's key, input and sizes, or None wherever memory must not apply (the stock history is then used).

    The one guard for every path: N = 0, no Langflow database (standalone lfx), a run whose
    messages are not stored, or a run without a flow, an owner or a session.
    """
    if not component.n_messages or not has_langflow_db_backend() or not should_persist_messages():
        return None
    graph = getattr(component, "graph", None)
    flow_id = coerce_flow_id(getattr(graph, "flow_id", None))
    owner_id = resolve_message_owner_id(graph) if graph is not None else None
    if flow_id is None or owner_id is None or not getattr(graph, "session_id", None):
        return None
    given = component.input_value
    key = SessionKey(
        flow_id=flow_id, owner_id=owner_id, session_id=str(graph.session_id), context_id=component.context_id or ""
    )
    # The provider names Langflow's provider-scoped remediations for the model that folds; a connected
    # Summary Model's provider is not known here, so only the unscoped ones apply to it.
    summary_model = summary_model_of(component)
    provider = None if summary_model else component._selected_model_remediation_context()[0]
    declared_window = configured_context_window(component) or None
    context_window = context_size.context_window(agent_model_of(component), declared_window)
    server = model_url(agent_model_of(component))
    input_text = _text_start(given)
    return Turn(
        key=key,
        n_messages=int(component.n_messages),
        input_message_id=_uuid_or_none(given.get_id() if isinstance(given, Message) else None),
        context_window=context_window,
        # The passages a question may quote are counted inside the request's fit, not left to the answer's margin.
        fixed_tokens=fixed_tokens(component) + ranking.room_for_passages(input_text, context_window),
        provider=provider,
        fold_context_window=context_size.context_window(summary_model, None) if summary_model else context_window,
        tracing=tuple(tracing_callbacks(component)),
        model_server=server,
        waits_for_folds=new_turn_waits_for_folds(server),
        declared_window=declared_window,
        input_text=input_text,
    )


async def with_memory(run: Run, build, failure_event: log_events.Event = log_events.FALLBACK):
    """Run ``build(service, turn)`` with the run's Turn; None where memory does not apply or failed (logged
    without any text)."""
    turn = run.turn
    if turn is None:
        return None
    try:
        return turn, await build(get_session_memory_service(), turn)
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock history
        await logger.aerror(f"{failure_event} reason={describe(error)}")
        return None


def stock_on_failure(where: str, stock: T, attempt: Callable[[], T]) -> T:
    """``attempt()``, or ``stock`` (what the stock Agent has at this point) when it raises, logged without any text.

    The one failure rule for every hook and middleware of ours: memory never breaks the user's turn.
    """
    try:
        return attempt()
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock
        logger.error(f"{log_events.FALLBACK} where={where} reason={describe(error)}")
        return stock


async def stock_on_failure_async(where: str, stock: T, attempt: Callable[[], Awaitable[T]]) -> T:
    """:func:`stock_on_failure` for a coroutine."""
    try:
        return await attempt()
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock
        await logger.aerror(f"{log_events.FALLBACK} where={where} reason={describe(error)}")
        return stock


def _text_start(given) -> str:
    """The start of the user's message, as much as the words of a search are read from (``recall.keywords``)."""
    text = given.text if isinstance(given, Message) else given
    return text[: RETRIEVAL.max_query_characters] if isinstance(text, str) else ""


def _uuid_or_none(value) -> UUID | None:
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None
