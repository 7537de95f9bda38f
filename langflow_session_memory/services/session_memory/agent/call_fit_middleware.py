"""The Agent's model calls after a tool ran, fitted to the context window (``call_fit``) and, when the
provider still refuses one as too long, retried once, smaller, in the same turn.

A LangChain middleware around each model call (lfx's ``_build_middleware``): retrying the call,
not the Agent's run, runs no tool twice and stores the user's message once. The turn's first
call is left to :func:`component_hooks.run_with_context_recovery`, which folds the history into
a new summary before it runs the Agent again (no tool has run yet).

Only ``awrap_model_call``: Langflow runs the Agent's graph asynchronously (``astream_events``).
"""

from collections.abc import Awaitable, Callable

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.retry_smaller import Smaller, retry_smaller_once
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import call_fit, context_size, token_estimate
from langflow_session_memory.services.session_memory.rules.call_fit import FittedCall, Reduction
from langflow_session_memory.services.session_memory.rules.context_size import CONTEXT_TOO_LONG, ContextTooLongError
from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT


class CallFitMiddleware(AgentMiddleware):
    """Fits each model call that follows a tool to the window; retries one refused as too long, smaller.

    ``window``: the window to respect (the builder's Context Window, else the model profile's; None when
    unknown); ``declared_window``: the builder's alone, which decides whether an empty stream is an
    overflow (a profile's window is a cloud model's, not a local server's). ``summary``: the text of the
    message carrying the summary as this run sends it. ``report``: told of every reduction, and whether it was a retry.
    """

    def __init__(
        self,
        *,
        window: int | None,
        declared_window: int | None,
        result_share: float,
        summary: Callable[[], str | None],
        report: Callable[[Reduction, bool], None],
    ) -> None:
        self.window = window
        self.declared_window = declared_window
        self.result_share = result_share
        self.summary = summary
        self.report = report

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        if not call_fit.after_tool(request.messages):
            return await handler(request)
        try:
            fixed = fixed_tokens(request)
            sent = await self._sent(request, fixed)
        except ContextTooLongError:
            raise
        except Exception as error:  # noqa: BLE001 - memory must never break the user's turn: the call as the stock Agent's
            await logger.aerror(f"{log_events.FALLBACK} where=call_fit reason={describe(error)}")
            return await handler(request)

        def refused(error: Exception) -> bool:
            return self._refused(error, fixed + token_estimate.messages_tokens(sent.messages))

        async def smaller(refusal: Exception) -> Smaller[ModelResponse]:
            size = fixed + token_estimate.messages_tokens(sent.messages)
            limit = context_size.window_named_in(refusal) or self.window
            try:
                retry = await self._fitted(request, fixed, call_fit.retry_target(size, limit), retry=True)
            except Exception as error:  # noqa: BLE001 - the stock Agent's turn ends with the provider's refusal; so does this
                await logger.aerror(f"{log_events.FALLBACK} where=call_fit reason={describe(error)}")
                raise refusal from None
            return Smaller(
                send=lambda: handler(request.override(messages=retry.messages)),
                refused=lambda error: self._refused(error, retry.size),
                size=retry.size,
                was=size,
            )

        return await retry_smaller_once(lambda: handler(sent), refused=refused, smaller=smaller, call="after_tool")

    async def _sent(self, request: ModelRequest, fixed: int) -> ModelRequest:
        """The request fitted to the window (as it is when no window is known)."""
        if not self.window:
            return request
        fitted = await self._fitted(request, fixed, int(CALL_FIT.fit_ratio * self.window), retry=False)
        if fitted.size > self.window:
            await logger.awarning(f"{log_events.OVERFLOW} call=after_tool size={fitted.size} action=give_up")
            raise ContextTooLongError(CONTEXT_TOO_LONG)
        return request.override(messages=fitted.messages)

    async def _fitted(self, request: ModelRequest, fixed: int, limit: int, *, retry: bool) -> FittedCall:
        result_cap = int(self.result_share * self.window) if self.window else None
        fitted = call_fit.fit_call(
            request.messages, fixed_tokens=fixed, limit=limit, result_cap=result_cap, summary=self.summary()
        )
        reduction = fitted.reduction
        if reduction.changed:
            self.report(reduction, retry)
            await logger.ainfo(
                f"{log_events.REDUCED} reason={'refused' if retry else 'window'} limit={limit} "
                f"size_before={reduction.size_before} size_after={reduction.size_after} "
                f"history_left_out={reduction.history_left_out} tool_results_clipped={reduction.results_clipped} "
                f"tool_result_tokens_before={reduction.result_tokens_before} "
                f"tool_result_tokens_after={reduction.result_tokens_after}"
            )
        return fitted

    def _refused(self, error: Exception, size: int) -> bool:
        return context_size.is_probable_overflow(error, request_tokens=size, context_window=self.declared_window)


def fixed_tokens(request: ModelRequest) -> int:
    """The estimated tokens of what fitting does not change: the system prompt and the tools' schemas."""
    system = request.system_message
    system_tokens = token_estimate.estimate_tokens(token_estimate.text_of(system)) if system is not None else 0
    return system_tokens + sum(token_estimate.tool_tokens(tool) for tool in request.tools)
