"""A request the provider refuses as too long, carried out as ``rules.retry`` says: made smaller, sent once more,
then given up.

Two places apply it: the turn's first model call, whose smaller form is the history folded into a new
summary and the Agent run again (:func:`component_hooks.run_with_context_recovery`, no tool has run yet), and
each call after a tool, whose smaller form is the call fitted harder (``call_fit_middleware``, so no
tool runs twice). Both log the same ``session_context_overflow`` lines and end the same way: a second
refusal, or a request that cannot be made smaller, ends the turn with :data:`CONTEXT_TOO_LONG` instead
of a provider's stack trace.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import retry
from langflow_session_memory.services.session_memory.rules.context_size import CONTEXT_TOO_LONG, ContextTooLongError
from langflow_session_memory.services.session_memory.rules.retry import Refused, Send

T = TypeVar("T")


@dataclass(frozen=True)
class Smaller(Generic[T]):
    """The request made smaller: how to send it, how to tell its refusal as too long from another failure, and its
    estimated size against the refused one's (a retry no smaller is never sent)."""

    send: Callable[[], Awaitable[T]]
    refused: Callable[[Exception], bool]
    size: int
    was: int


async def retry_smaller_once(
    send: Callable[[], Awaitable[T]],
    *,
    refused: Callable[[Exception], bool],
    smaller: Callable[[Exception], Awaitable[Smaller[T] | None]],
    call: str | None = None,
) -> T:
    """``send()``; when ``refused`` judges its failure a "prompt too long", ``smaller(refusal)`` sent once more.

    ``smaller`` gives None when the request cannot be made smaller (then :class:`ContextTooLongError`);
    it may raise instead, to end the turn another way. A retry that is not smaller than the refused request is
    never sent: the provider's own refusal ends the turn, as it ends the stock Agent's. ``call`` names the call
    in the log lines (``call=after_tool``); the turn's first call is logged without it. Any other failure is
    raised as it is.
    """
    where = f"call={call} " if call else ""
    tries, request, is_refusal = 1, send, refused
    while True:
        try:
            result = await request()
        except ContextTooLongError:
            raise
        except Exception as error:
            if not is_refusal(error):
                raise
            if retry.after(Refused.AGENT_CALL, tries=tries).send is Send.GIVE_UP:
                await logger.awarning(f"{log_events.OVERFLOW} {where}attempt={tries} result=refused action=give_up")
                raise ContextTooLongError(CONTEXT_TOO_LONG) from error
            await logger.awarning(
                f"{log_events.OVERFLOW} {where}attempt={tries} result=refused reason={describe(error)!r}"
            )
            smaller_request = await smaller(error)
            if smaller_request is None:
                raise ContextTooLongError(CONTEXT_TOO_LONG) from error
            tries += 1
            if smaller_request.size >= smaller_request.was:
                await logger.awarning(
                    f"{log_events.OVERFLOW} {where}attempt={tries} result=not_smaller size={smaller_request.size} "
                    "action=give_up"
                )
                raise
            request, is_refusal = smaller_request.send, smaller_request.refused
        else:
            if tries > 1:
                await logger.awarning(f"{log_events.OVERFLOW} {where}attempt={tries} result=answered")
            return result
