"""One attempt of an Agent run: what it carries from hook to hook, and the phase it is in.

lfx makes an attempt as: its first model (``_get_llm``), the history (``get_memory_data``), the tools, a second
model to build the agent with and the middleware, the run, the answer. After a model remediation it makes the
whole attempt again from its first model, so a new attempt starts a new :class:`Run`, carrying nothing of the one
before. Each later phase is entered from the phases before it only (:meth:`Run.enter`). A hook that finds no run,
or a run in a phase it does not act in, gets None from :func:`run_for`, logged, and goes on as the stock Agent's:
a run is never made up for it.
"""

from dataclasses import dataclass, field
from enum import IntEnum

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from lfx.log.logger import logger
from lfx.schema.message import Message

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.model_calls import CallReductions, ModelCalls
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.service import History

RUN_ATTRIBUTE = "_session_memory"


class Phase(IntEnum):
    """Where an attempt is, in the order lfx goes through it."""

    CREATED = 0  # begun by the attempt's first model, or by its history hook where no model hook began it
    HISTORY_READ = 1  # its Turn read (None where memory does not apply), its history built
    AGENT_BUILT = 2  # lfx's second model of the attempt, to build the agent, answered with the first
    ANSWERED = 3  # the Agent answered: the turn is being finished (usage, the fold after the answer)
    FINISHED = 4


# The phases between the history and the answer, where the tools, the middleware, the run and the live step act.
IN_TURN = frozenset({Phase.HISTORY_READ, Phase.AGENT_BUILT})
# The phases each phase is entered from. The history hook of a component version without the model hook reads
# the history of a run no model began, and runs the Agent without a second model: it answers from HISTORY_READ.
ENTERED_FROM = {
    Phase.HISTORY_READ: frozenset({Phase.CREATED}),
    Phase.AGENT_BUILT: frozenset({Phase.HISTORY_READ}),
    Phase.ANSWERED: IN_TURN,
    Phase.FINISHED: frozenset({Phase.ANSWERED}),
}


@dataclass
class Run:
    """What one attempt carries from hook to hook: its model, the calls it made, its Turn (None where memory does
    not apply), the model that folds for it and the embedding model connected, the history it got, what fitting its
    calls to the window changed, the message shown while it waited for folds (until the answer's replaces it), and
    its phase."""

    model: BaseChatModel | None = None
    calls: ModelCalls | None = None
    turn: Turn | None = None
    fold_model: BaseChatModel | None = None
    embedder: Embeddings | None = None
    history: History | None = None
    reductions: CallReductions = field(default_factory=CallReductions)
    waiting_message: Message | None = None
    phase: Phase = Phase.CREATED

    @property
    def builds_the_agent(self) -> bool:
        """Whether a model asked for now is the one lfx builds the agent with, after this attempt read its history."""
        return self.phase is Phase.HISTORY_READ and self.model is not None

    @property
    def takes_model(self) -> bool:
        """Whether a model Langflow builds now is this attempt's own: its history hook began it without one."""
        return self.model is None and self.phase in (Phase.CREATED, Phase.HISTORY_READ)

    def enter(self, phase: Phase) -> bool:
        """Move on to ``phase`` if the attempt is in a phase it is entered from; whether it moved."""
        if self.phase not in ENTERED_FROM.get(phase, ()):
            return False
        self.phase = phase
        return True


def begin_run(component, model: BaseChatModel | None = None, calls: ModelCalls | None = None) -> Run:
    """A new attempt's run, with the model it runs and the counter of its calls, in place of the one before."""
    run = Run(model=model, calls=calls)
    setattr(component, RUN_ATTRIBUTE, run)
    return run


def run_of(component) -> Run | None:
    """The attempt's run, kept on the component (one attribute) from its first hook to the answer; None before."""
    run = getattr(component, RUN_ATTRIBUTE, None)
    return run if isinstance(run, Run) else None


def model_built(component, model: BaseChatModel, calls: ModelCalls) -> Run:
    """The run a model Langflow just built belongs to: the attempt its history hook began without a model (then,
    once that history is read, this model builds the agent), or else a new attempt it begins."""
    run = run_of(component)
    if run is None or not run.takes_model:
        return begin_run(component, model, calls)
    run.model, run.calls = model, calls
    run.enter(Phase.AGENT_BUILT)  # stays CREATED while the history hook reads the component (its Turn's sizes)
    return run


def run_for(component, hook: str, enters: Phase | None = None) -> Run | None:
    """The attempt's run for ``hook``, which acts between the history and the answer, or enters ``enters``;
    None where there is none or it is elsewhere, logged: the hook then goes on as the stock Agent's."""
    run = run_of(component)
    allowed = IN_TURN if enters is None else ENTERED_FROM[enters]
    if run is None or run.phase not in allowed:
        phase = run.phase.name.lower() if run is not None else "none"
        logger.error(f"{log_events.HOOK_OUT_OF_ORDER} hook={hook} phase={phase}")
        return None
    if enters is not None:
        run.enter(enters)
    return run
