"""A running Agent component, read for session memory: its switches, its turn, and what one run carries.

The one guard every path goes through: :func:`begin_turn` reads the component once, at the
history hook (before the Agent runs), into the run's :class:`Turn`; :func:`with_memory` hands
that Turn to every later hook. Where memory must not apply, or anything of it fails, the caller
gets None and the Agent goes on as the stock one. What a run carries between Langflow's hooks
lives in one :class:`RunState`; nothing here calls back into the component once the Turn is built.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
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
from langflow_session_memory.services.session_memory.reasons import describe
from langflow_session_memory.services.session_memory.rules import context_size, ranking, token_estimate, usage
from langflow_session_memory.services.session_memory.rules.call_fit import Reduction
from langflow_session_memory.services.session_memory.rules.policy import RETRIEVAL
from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.runtime import get_session_memory_service
from langflow_session_memory.services.session_memory.service import History
from langflow_session_memory.services.session_memory.settings import new_turn_waits_for_folds

# Langflow's date and calculator tools: their schemas measured at 78 and 82 tokens.
BUILT_IN_TOOL_TOKENS = 90
STATE_ATTRIBUTE = "_session_memory"
T = TypeVar("T")


class ModelCalls(AsyncCallbackHandler):
    """Counts the Agent's model calls in a run and keeps what the provider reported for the last one.

    Attached to the Agent's own model, so it sees every call of the tool loop (and none of
    the folds, which run on a copy without callbacks). The last call's size is what the
    next turn's prompt grows from; the usage Langflow stores sums every call of the turn.
    """

    def __init__(self) -> None:
        self.started = 0
        self.last_call_tokens: int | None = None
        self.usage = TokenUsage()  # over the run's calls: as reported, else estimated
        self._prompt_estimate = 0

    async def on_chat_model_start(self, _serialized, messages, **_kwargs) -> None:
        self.started += 1
        self._prompt_estimate = token_estimate.messages_tokens(messages[0])

    async def on_llm_end(self, response, **_kwargs) -> None:
        """The call's size as the provider reported it; estimated when it reported none (llama.cpp's streams)."""
        for generations in response.generations:
            for generation in generations:
                call = usage.of_call(
                    getattr(getattr(generation, "message", None), "usage_metadata", None),
                    prompt_tokens=self._prompt_estimate,
                    answer=generation.text,
                )
                self.usage += call
                self.last_call_tokens = call.input_tokens + call.output_tokens


@dataclass
class CallReductions:
    """What fitting the run's model calls to the window changed (``call_fit``): how many calls, whether one
    was retried after "prompt too long", and the last reduction, for the log line and the Session memory step."""

    calls: int = 0
    retried: bool = False
    last: Reduction | None = None

    def add(self, reduction: Reduction, retry: bool) -> None:
        self.calls += 1
        self.retried = self.retried or retry
        self.last = reduction

    def facts(self) -> dict:
        """Counts and estimated sizes, never text; empty when no call was reduced."""
        if self.last is None:
            return {}
        return {
            "calls_fitted_to_window": self.calls,
            "retried_after_too_long": self.retried,
            "history_left_out": self.last.history_left_out,
            "tool_results_clipped": self.last.results_clipped,
            "tool_result_tokens": f"{self.last.result_tokens_before} -> {self.last.result_tokens_after}",
        }


@dataclass
class RunState:
    """What one attempt of an Agent run carries from hook to hook: its model, the calls it made, its Turn (None
    where memory does not apply), the model that folds for it and the embedding model connected, the history it
    got, and what fitting its calls to the window changed.

    Created whole by the attempt's first model (:func:`begin_run`) and never reset piecemeal: lfx re-runs an
    attempt after a model remediation from its first model on, so nothing of the attempt before is carried.
    ``history_read`` and ``agent_built`` say where the attempt is: lfx builds its model a second time, to build
    the agent, after the history was read.
    """

    model: BaseChatModel | None = None
    calls: ModelCalls | None = None
    turn: Turn | None = None
    fold_model: BaseChatModel | None = None
    embedder: Embeddings | None = None
    history: History | None = None
    reductions: CallReductions = field(default_factory=CallReductions)
    history_read: bool = False
    agent_built: bool = False

    @property
    def builds_the_agent(self) -> bool:
        """Whether a model asked for now is the one lfx builds the agent with, after this attempt read its history."""
        return self.model is not None and self.history_read and not self.agent_built


def begin_run(component, model: BaseChatModel | None = None, calls: ModelCalls | None = None) -> RunState:
    """A new attempt's state, with the model it runs and the counter of its calls, in place of the one before."""
    state = RunState(model=model, calls=calls)
    setattr(component, STATE_ATTRIBUTE, state)
    return state


def run_state(component) -> RunState:
    """The attempt's state, kept on the component (one attribute) from the model's creation to the answer."""
    state = getattr(component, STATE_ATTRIBUTE, None)
    if not isinstance(state, RunState):
        state = RunState()
        setattr(component, STATE_ATTRIBUTE, state)
    return state


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
    """The model this run's Agent uses (the one :func:`run_state` kept), built by Langflow when not kept yet."""
    return run_state(component).model or component._get_llm()


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


def request_tokens(turn: Turn, messages) -> int:
    """The estimated size of the Agent's request with ``messages`` as its history."""
    return turn.fixed_tokens + token_estimate.estimated_size(token_estimate.text_of(message) for message in messages)


async def begin_turn(component) -> Turn | None:
    """Read this run's Turn from the component, once, at the history hook; kept on the run's state with the
    model that folds for it, so no later hook reads the component again. None where memory does not apply or
    reading it failed (logged without any text)."""
    state = run_state(component)
    if state.history_read:  # no model began this attempt (its hook failed): nothing of the one before is kept
        state = begin_run(component)
    state.history_read = True
    try:
        turn = memory_turn(component)
        if turn is not None:
            state.turn, state.fold_model, state.embedder = turn, fold_model_of(component), embedding_model_of(component)
    except Exception as error:  # noqa: BLE001 - memory must never break the user's turn; logged, then stock history
        await logger.aerror(f"{log_events.FALLBACK} reason={describe(error)}")
    return state.turn


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
        fixed_tokens=_fixed_tokens(component) + ranking.room_for_passages(input_text, context_window),
        provider=provider,
        fold_context_window=context_size.context_window(summary_model, None) if summary_model else context_window,
        tracing=tuple(tracing_callbacks(component)),
        model_server=server,
        waits_for_folds=new_turn_waits_for_folds(server),
        declared_window=declared_window,
        input_text=input_text,
    )


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


async def with_memory(state: RunState, build, failure_event: log_events.Event = log_events.FALLBACK):
    """Run ``build(service, turn)`` with the run's Turn; None where memory does not apply or failed (logged
    without any text)."""
    turn = state.turn
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


def _fixed_tokens(component) -> int:
    """Estimated tokens the history does not control: instructions, tools and the user's input."""
    given = getattr(component, "input_value", None)
    input_text = given.text if isinstance(given, Message) else given
    return (
        token_estimate.estimate_tokens(getattr(component, "system_prompt", None) or "")
        + token_estimate.estimate_tokens(input_text if isinstance(input_text, str) else "")
        + _tools_tokens(component)
    )


def _tools_tokens(component) -> int:
    """The tools' schemas, sent with every request: those on the component, and those added to it after
    the history is read (Langflow's date and calculator tools where switched on, the search tool)."""
    tools = [tool for tool in getattr(component, "tools", None) or [] if isinstance(tool, BaseTool)]
    names = {tool.name for tool in tools}
    added_later = [
        (wanted and name not in names, size)
        for wanted, name, size in (
            (bool_input(component, "add_current_date_tool", default=False), "get_current_date", BUILT_IN_TOOL_TOKENS),
            (bool_input(component, "add_calculator_tool", default=False), "evaluate_expression", BUILT_IN_TOOL_TOKENS),
            (search_switched_on(component), TOOL_NAME, tool_schema_tokens()),
        )
    ]
    return sum(token_estimate.tool_tokens(tool) for tool in tools) + sum(
        size for missing, size in added_later if missing
    )


def _text_start(given) -> str:
    """The start of the user's message, as much as the words of a search are read from (``recall.keywords``)."""
    text = given.text if isinstance(given, Message) else given
    return text[: RETRIEVAL.max_query_characters] if isinstance(text, str) else ""


def _uuid_or_none(value) -> UUID | None:
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None
