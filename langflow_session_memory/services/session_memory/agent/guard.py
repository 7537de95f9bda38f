"""Where memory applies to a run, and the one failure rule: whatever of it fails, the Agent goes on as the stock one.

:func:`begin_turn` reads the component once, at the history hook (before the Agent runs), into the run's
:class:`Turn` (``component_inputs.read_inputs``, the one guard, then :func:`memory_turn`); :func:`with_memory`
hands that Turn to every later hook. Where memory must not apply, or anything of it fails, the caller gets None
and the Agent goes on as the stock one; :func:`stock_on_failure` is that rule for every hook and middleware of
ours.
"""

from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import UUID

from lfx.log.logger import logger
from lfx.schema.message import Message

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.component_inputs import Inputs, read_inputs
from langflow_session_memory.services.session_memory.agent.run import Phase, Run, begin_run, run_of
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import ranking
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
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
        inputs = read_inputs(component, run.model)
        turn = memory_turn(inputs) if inputs is not None else None
        if turn is not None:
            run.turn, run.fold_model, run.embedder = turn, inputs.fold_model, inputs.embedding_model
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock history
        await logger.aerror(f"{log_events.FALLBACK} reason={describe(error)}")
    run.enter(Phase.HISTORY_READ)
    return run


def memory_turn(inputs: Inputs) -> Turn:
    """The turn's key, input and sizes, from the component's inputs (read where memory applies: the one guard,
    :func:`component_inputs.read_inputs`)."""
    input_text = _text_start(inputs.given)
    return Turn(
        key=inputs.key,
        n_messages=inputs.n_messages,
        input_message_id=_uuid_or_none(inputs.given.get_id() if isinstance(inputs.given, Message) else None),
        context_window=inputs.context_window,
        # The passages a question may quote are counted inside the request's fit, not left to the answer's margin.
        fixed_tokens=inputs.fixed_tokens + ranking.room_for_passages(input_text, inputs.context_window),
        provider=inputs.provider,
        fold_context_window=inputs.fold_context_window,
        tracing=inputs.tracing,
        model_server=inputs.model_server,
        waits_for_folds=new_turn_waits_for_folds(inputs.model_server),
        declared_window=inputs.declared_window,
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
