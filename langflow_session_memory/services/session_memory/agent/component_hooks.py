"""The Agent's hooks into session memory: each Langflow hook the component overrides calls one function here.

Everything here is a translation between Langflow's Agent and the service; what an attempt carries and the
phase it is in are ``run``'s, the guard ``guard``'s, the rules the service's. Whatever goes wrong, or comes in an
order ``run`` does not know, the Agent gets Langflow's stock behaviour and the turn goes on.

"Prompt too long" at the turn's first model call re-runs the Agent with the history folded
into a new summary (:func:`run_with_context_recovery`): no tool has run yet. Every later call is
fitted and, if refused, retried by a middleware around the model call
(``call_fit_middleware``), so no tool runs twice.
"""

from collections.abc import Awaitable, Callable
from dataclasses import replace
from uuid import uuid4

from lfx.components.models_and_agents.agent import AgentComponent
from lfx.log.logger import logger
from lfx.schema.message import Message
from lfx.schema.properties import Usage

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent import playground, prompt_caching
from langflow_session_memory.services.session_memory.agent.call_fit_middleware import CallFitMiddleware
from langflow_session_memory.services.session_memory.agent.component_inputs import configured_context_window, model_url
from langflow_session_memory.services.session_memory.agent.guard import (
    begin_turn,
    stock_on_failure,
    stock_on_failure_async,
    with_memory,
)
from langflow_session_memory.services.session_memory.agent.model_calls import CallReductions, ModelCalls
from langflow_session_memory.services.session_memory.agent.request_size import request_tokens
from langflow_session_memory.services.session_memory.agent.retry_smaller import Smaller, retry_smaller_once
from langflow_session_memory.services.session_memory.agent.run import Phase, Run, model_built, run_for, run_of
from langflow_session_memory.services.session_memory.agent.search_tool import with_search_tool
from langflow_session_memory.services.session_memory.rules import context_size
from langflow_session_memory.services.session_memory.rules.assembly import summary_messages, summary_text
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY, RETRIEVAL, SUMMARY
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.settings import tool_result_share

REMOVE_MESSAGE = "on_remove_message"  # Langflow's event manager's callback that takes a shown message back
# The node's help texts, from the policy the service folds by.
SWITCH_INFO = (
    "Keep the newest Number of Chat History Messages as they are, and fold older ones, "
    f"{DEFAULT_POLICY.batch_size} at a time, into a short per-session summary (at most {SUMMARY.word_limit} words) "
    "sent first in the history. Each fold is one extra call to the same model, about once every "
    f"{DEFAULT_POLICY.batch_size} messages; its tokens are added to the turn's usage. Off: exactly the stock Agent."
)
CONTEXT_WINDOW_INFO = (
    "With Summarize Older Messages on: the model's context window. When the last turn used more than "
    f"{DEFAULT_POLICY.early_fold_share:.0%} of it, older messages of the history are folded early; when the provider "
    "still answers 'prompt too long', the turn is retried once with the summary alone. 0 = the window LangChain "
    "knows for the model."
)


def agent_model(component, llm):
    """:func:`agent_model_once` for a model Langflow already built: the component code of flows saved up to
    2026-12-06 builds the model first, then hands it here."""
    return agent_model_once(component, lambda: llm)


def agent_model_once(component, build: Callable):
    """The Agent's model for this attempt, asked to report usage, with a counter of its calls; ``build`` is
    Langflow's own ``_get_llm``.

    Some OpenAI-compatible providers report token usage only when asked
    (``stream_usage``); the early fold needs it. lfx builds a model twice an attempt: the first
    begins the attempt (:func:`run.model_built`); the second, to build the agent once the
    history was read, is answered with the first without building another, so the Agent runs the
    very model that folds for it and whose calls are counted. Each build of an OpenAI-compatible
    model opens two HTTP clients, each loading the system's CA certificates (36 ms of CPU on an idle core).
    """
    run = run_of(component)
    if run is not None and run.builds_the_agent:
        run.enter(Phase.AGENT_BUILT)
        return run.model
    llm = build()
    return stock_on_failure("agent_model", llm, lambda: _attempt_model(component, llm))


def _attempt_model(component, llm):
    if hasattr(llm, "stream_usage") and not llm.stream_usage:
        llm.stream_usage = True
    calls = ModelCalls()
    if hasattr(llm, "callbacks"):
        llm.callbacks = [*(handler for handler in llm.callbacks or [] if not isinstance(handler, ModelCalls)), calls]
    model_built(component, llm, calls)
    return llm


def agent_middleware(component, llm, middleware: list) -> list:
    """Langflow's middleware for the Agent, then the fitting of calls after a tool to the window, then the
    prompt-cache breakpoints where the provider caches only what a request marks (Anthropic), so that they
    mark the request as sent. Both read the summary the run sends at each model call."""
    return stock_on_failure("agent_middleware", middleware, lambda: _with_our_middleware(component, llm, middleware))


def _with_our_middleware(component, llm, middleware: list) -> list:
    """Built once the attempt's Turn is read: its window is the Turn's (the component is read only where memory
    does not apply to the run)."""
    run = run_for(component, "agent_middleware")
    if run is None:
        return middleware
    if run.turn is not None:
        declared, window = run.turn.declared_window, run.turn.context_window
    else:
        declared = configured_context_window(component) or None
        window = context_size.context_window(llm, declared)
    fit = CallFitMiddleware(
        window=window,
        declared_window=declared,
        result_share=tool_result_share(),
        summary=lambda: _summary_sent(run),
        report=run.reductions.add,
    )
    return [*middleware, fit, *prompt_caching.cache_breakpoints(llm, lambda: _summary_sent(run))]


def _summary_sent(run: Run) -> str | None:
    history = run.history
    return summary_text(history.summary) if history is not None and history.summary else None


async def agent_tools(component, tools):
    """The Agent's tools, with ``search_earlier_messages`` where it applies."""
    return await stock_on_failure_async("agent_tools", tools, lambda: with_search_tool(component, tools))


async def history_with_memory(component, stock: Callable[[], Awaitable[list[Message]]]) -> list[Message]:
    """The Agent's history with the summary first; the stock history whenever memory cannot apply.

    The run's Turn is read here, once (:func:`guard.begin_turn`): every later hook is handed it.
    """
    run = await begin_turn(component)

    async def waiting() -> None:
        await stock_on_failure_async("wait_step", None, lambda: _show_waiting(component, run))

    built = await with_memory(
        run, lambda service, turn: service.build_history(turn, run.fold_model, run.embedder, waiting)
    )
    if built is None:
        return await stock()
    _turn, run.history = built
    return run.history.messages


async def _show_waiting(component, run: Run) -> None:
    """Show the Agent's message in progress with the waiting step while the turn waits for the folds on its server.

    Langflow's Agent makes its message only once the history is read, so this is a message of its own, shown with
    Langflow's message event and never stored (its history is not read yet: a stored one would be in it); the
    answer's message takes its place (:func:`_take_back_waiting`). Only where the event stream can take a message
    back (the Playground's build; ``/run``'s stream cannot): elsewhere it would stay, a second answer.
    """
    events = getattr(component, "_event_manager", None)
    if events is None or REMOVE_MESSAGE not in events.events:
        return
    message = AgentComponent._build_initial_agent_message(component)  # the stock message, not ours with its step
    message.id = str(uuid4())
    message.flow_id = getattr(component.graph, "flow_id", None)
    message.content_blocks = [playground.waiting_step()]
    await component._send_message_event(message)
    run.waiting_message = message


def _take_back_waiting(component) -> None:
    """Remove the message shown while the turn waited, as the Agent's own message comes (Langflow's own "remove
    message" event, with the session and flow the Playground files it under)."""
    run = run_of(component)
    message = run.waiting_message if run is not None else None
    if message is None:
        return
    run.waiting_message = None
    scope = {"id": message.id, "session_id": message.session_id, "flow_id": message.flow_id}
    getattr(component._event_manager, REMOVE_MESSAGE)(data=scope)


def with_memory_step(component, message: Message) -> Message:
    """The Agent's new answer with the "Session memory" step first among its steps, when there is one to show; the
    message shown while the turn waited for folds is taken back as this one comes."""
    stock_on_failure("wait_step", None, lambda: _take_back_waiting(component))
    return stock_on_failure("memory_step", message, lambda: _with_step(component, message))


def _with_step(component, message: Message) -> Message:
    run = run_for(component, "with_memory_step")
    history = run.history if run is not None else None
    if history is None:
        return message
    step = playground.memory_step(history)
    if step is not None:
        message.content_blocks.insert(0, step)
    return message


async def stored_message(message: Message, write: Callable[[Message], Awaitable[Message]]) -> Message:
    """The message as Langflow stores it: the "Session memory" step without the summary.

    Should keeping the summary out fail, the message is stored without its steps: never with the summary.
    Langflow's own write is not inside the fallback: its failures are the stock Agent's.
    """
    to_store = stock_on_failure("stored_message", None, lambda: playground.stored_form(message))
    stored = await write(to_store if to_store is not None else _without_steps(message))
    return stock_on_failure("stored_message", stored, lambda: playground.with_live_blocks(stored, message))


async def finish_turn(component, result: Message) -> Message:
    """After the Agent answered: add the fold tokens to its usage, keep the last call's size if large,
    and fold what the answer makes due: in the background on a server, awaited here without one.

    The answer goes on to the rest of the flow (Chat Output stores it again) with the
    "Session memory" step's counts only, never the summary (also where the run is not found).
    """
    run = run_for(component, "finish_turn", enters=Phase.ANSWERED)
    if run is not None:
        await _record_call_size(run)
        result = await stock_on_failure_async("usage", result, lambda: _add_fold_usage(component, run, result))
        await stock_on_failure_async("index_after_answer", None, lambda: _index_after_answer(run))
        await stock_on_failure_async("fold_after_answer", None, lambda: _fold_after_answer(run))
        run.enter(Phase.FINISHED)
    handed_on = stock_on_failure("handed_on", None, lambda: playground.without_summary(result))
    return handed_on if handed_on is not None else _without_steps(result)


def _without_steps(message: Message) -> Message:
    """Where keeping the summary out of a message failed: the message without any step, so never with the summary."""
    return message.model_copy(update={"content_blocks": []})


async def _fold_after_answer(run: Run) -> None:
    """Fold the messages this turn leaves unfolded once the answer is given, so no turn waits for it.

    On a server's loop the fold is a background task; where none runs (``lfx run``, a
    script) it is awaited here, after the answer, by the same path.
    """
    if run.history is None or not run.history.fold_due:
        return
    llm = run.fold_model

    async def fold(service, turn):
        if service.background.available():
            server = model_url(llm)

            def idle() -> bool:  # asked by the fold between batches: a turn waiting for the server stops it
                return not service.background.turn_waits(server)

            service.background.start(turn.key, lambda: service.fold_after_turn(turn, llm, idle), server=server)
        else:
            await service.fold_after_turn(turn, llm)

    await with_memory(run, fold)


async def _index_after_answer(run: Run) -> None:
    """Add the messages the next turn's window leaves out to the full-text index, so a later question finds them.

    Usually the two a turn pushes out: one small insert here, before the fold after the answer starts, like the
    call size kept above (on SQLite a write from a task running beside Langflow's next request can make that
    request's delete fail: its snapshot went stale). A backlog (a session switched on late) goes on in the
    background, a batch a transaction, or here where no server loop runs.
    """
    if run.history is None:
        return

    async def index(service, turn):
        if await service.retrieval.index_older(turn, batches=1) < RETRIEVAL.index_batch:
            return
        if service.background.available():
            service.background.start_indexing(turn.key, lambda: service.retrieval.index_older(turn))
        else:
            await service.retrieval.index_older(turn)

    await with_memory(run, index)


async def _add_fold_usage(component, run: Run, result: Message) -> Message:
    """Add this turn's fold tokens to the usage the Agent reports and stores, and log the turn's figures.

    Both places matter: the stored Agent message, and ``_token_usage``, from which
    Langflow's Chat Output recomputes the usage it stores last. Where the provider reported
    no usage (llama.cpp ignores ``stream_options``), Langflow has none and the Agent's calls
    are counted by their estimate (:class:`agent.model_calls.ModelCalls`), marked as one on the
    "Session memory" step and in the log line, so no figure goes missing unsaid.
    """
    history = run.history
    if history is None or result.properties is None:
        return result
    given = result.properties.usage
    chat = _chat_usage(given, run.calls)
    folds = history.fold_usage
    total = chat + folds
    await logger.ainfo(
        f"{log_events.TURN} input_tokens={total.input_tokens} output_tokens={total.output_tokens} "
        f"fold_input_tokens={folds.input_tokens} fold_output_tokens={folds.output_tokens} "
        f"cached_input_tokens={chat.cached_input_tokens} cache_write_input_tokens={chat.cache_write_input_tokens} "
        f"fold_cached_input_tokens={folds.cached_input_tokens} "
        f"usage={'estimated' if total.estimated else 'reported'} folded={history.folded} "
        f"history_messages={len(history.messages)} excerpts={len(history.excerpts)} "
        f"excerpt_tokens={history.excerpt_tokens}{_reduced_fields(run.reductions)}"
    )
    result = playground.with_step_facts(result, _cache_facts(chat, folds))
    result = playground.with_turn_facts(result, run.reductions.facts())
    if not folds and given is not None and given.input_tokens:
        return result  # Langflow's own figure is the turn's: Chat Output stores the step's counts with the answer
    stored = Usage(
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        total_tokens=total.input_tokens + total.output_tokens,
    )
    result.properties.usage = stored
    component._token_usage = stored
    if total.estimated:
        result = playground.with_step_facts(result, {"usage": playground.USAGE_ESTIMATED})
    if result.get_id():
        result = await component._update_stored_message(result)
    return result


def _reduced_fields(reductions: CallReductions) -> str:
    """The log line's account of calls fitted to the window (``call_fit``), when there were any."""
    last = reductions.last
    if last is None:
        return ""
    return (
        f" calls_fitted_to_window={reductions.calls} retried_after_too_long={reductions.retried}"
        f" history_left_out={last.history_left_out} tool_results_clipped={last.results_clipped}"
        f" tool_result_tokens_before={last.result_tokens_before} tool_result_tokens_after={last.result_tokens_after}"
    )


def _chat_usage(given: Usage | None, calls: ModelCalls | None) -> TokenUsage:
    """The Agent's own calls this turn: Langflow's usage where it has one (what Langflow stores), with what
    our counter saw of the prompt cache; else our counter's, as reported or estimated call by call."""
    counted = calls.usage if calls else TokenUsage(estimated=True)
    if given is None or not given.input_tokens:
        return counted if counted.input_tokens else TokenUsage(estimated=True)
    return replace(counted, input_tokens=given.input_tokens, output_tokens=given.output_tokens or 0, estimated=False)


def _cache_facts(chat: TokenUsage, folds: TokenUsage) -> dict:
    """What the provider served from its prompt cache and wrote to it, for the step (Langflow's ``Usage``
    has no field for either).

    The chat calls' and the folds' apart: a fold is a request of its own, billed on its own.
    """
    facts = {"cached_input_tokens": chat.cached_input_tokens} if chat.cached_input_tokens else {}
    if chat.cache_write_input_tokens:
        facts["cache_write_input_tokens"] = chat.cache_write_input_tokens
    if folds.input_tokens:
        facts |= {"fold_input_tokens": folds.input_tokens, "fold_cached_input_tokens": folds.cached_input_tokens}
    return facts


async def _record_call_size(run: Run) -> None:
    """Store the last model call's size when it may matter to the next turn's early fold.

    Only a size of at least the policy's ``record_share`` of the window is kept (and a
    kept one is overwritten or cleared), so an ordinary turn writes nothing.
    """
    history, calls = run.history, run.calls
    if history is None or calls is None or calls.last_call_tokens is None:
        return

    async def record(service, turn):
        size = calls.last_call_tokens
        keep = size if turn.context_window and size >= service.policy.record_share * turn.context_window else None
        if keep != (history.state.last_call_tokens if history.state else None):
            await service.record_call_size(turn.key, keep)

    await with_memory(run, record, failure_event=log_events.CALL_SIZE_FAILED)


async def run_with_context_recovery(component, agent, run: Callable[[object], Awaitable[Message]]) -> Message:
    """Run the Agent; if the provider says the prompt is too long at its first model call, compact hard
    and run it once more.

    Only a run refused at its first model call is run again: after that a tool has run, and
    running the Agent again would run it twice; there the call itself is retried, smaller
    (``call_fit_middleware``), by the same rule (``retry_smaller``). The user's message is stored
    once (by Chat Input, before this); the retry only sends a shorter history.
    """
    attempt = run_for(component, "run_with_context_recovery")
    if attempt is None or attempt.turn is None:  # memory does not apply to this run: the stock Agent's run
        return await run(agent)
    turn, calls = attempt.turn, attempt.calls
    started_before = calls.started if calls else 0

    def refused_at_first_call(error: Exception) -> bool:
        # After a tool ran, the call-fitting middleware has already retried (or judged) the refused call.
        model_calls = (calls.started if calls else 0) - started_before
        return model_calls <= 1 and _refused_as_too_long(component, turn, error)

    async def compacted(_refusal: Exception) -> Smaller[Message] | None:
        was = request_tokens(turn, getattr(component, "chat_history", None) or [])
        history = await _compacted_history(attempt)
        if history is None:
            return None
        component.chat_history = history.messages
        return Smaller(
            send=lambda: run(agent),
            refused=lambda error: _refused_as_too_long(component, turn, error),
            size=request_tokens(turn, history.messages),
            was=was,
        )

    return await retry_smaller_once(lambda: run(agent), refused=refused_at_first_call, smaller=compacted)


def _refused_as_too_long(component, turn, error: Exception) -> bool:
    """The provider's "prompt too long", or an empty stream where the request could overflow the window.

    llama-cpp-python's server answers an overflowing streamed request with an empty 200
    stream, which LangChain reports as "No generations found in stream"; the Agent always
    streams. See :func:`context_size.is_probable_overflow` for where an empty stream counts.
    """
    # Only the builder's own Context Window: a local server behind the OpenAI provider serves under a
    # cloud model's name, whose LangChain profile claims a window the server does not have.
    return context_size.is_probable_overflow(
        error,
        request_tokens=request_tokens(turn, getattr(component, "chat_history", None) or []),
        context_window=turn.declared_window,
    )


async def _with_newest_notes(turn, history):
    """The summary-only history with as many of its newest notes as fit the window, logged; None when not even
    the message alone fits."""

    def fits(summary: str) -> bool:
        return request_tokens(turn, summary_messages(summary, [])) <= turn.context_window

    cut = history.with_newest_notes(fits)
    if cut is None:
        return None
    await logger.awarning(
        f"{log_events.OVERFLOW} action=cut_notes size_after={request_tokens(turn, cut.messages)} "
        f"context_window={turn.context_window}"
    )
    return cut


async def _compacted_history(run: Run):
    """The summary-only history, or None when even that cannot fit (so retrying is pointless); kept as the run's."""
    built = await with_memory(run, lambda service, turn: service.compact(turn, run.fold_model))
    if built is None:
        return None
    turn, history = built
    size_after = request_tokens(turn, history.messages)
    await logger.awarning(
        f"{log_events.OVERFLOW} action=compact size_after={size_after} context_window={turn.context_window} "
        f"folded={history.folded}"
    )
    if turn.context_window and size_after > turn.context_window:
        history = await _with_newest_notes(turn, history)
        if history is None:
            return None
    if run.history is not None:
        history = replace(history, fold_usage=history.fold_usage + run.history.fold_usage)
    run.history = history
    return history
