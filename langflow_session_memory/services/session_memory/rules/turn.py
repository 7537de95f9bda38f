"""The small values one Agent turn travels with: what it is, why a fold runs, what folding cost."""

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import Enum
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage

SessionFactory = Callable[[], AbstractAsyncContextManager[AsyncSession]]


@dataclass(frozen=True)
class Turn:
    """One Agent turn: whose history, how many raw messages, and the stored input message.

    ``context_window`` (tokens, None when unknown) and ``fixed_tokens`` (the estimated
    system prompt, tools and input) let a turn that would not fit fold early, and keep its
    request within the window; ``declared_window`` is the builder's own Context Window (None
    when not set), the only one by which an empty stream counts as "prompt too long".
    ``fold_context_window`` is the window of the model that folds (the Agent's, or the
    Summary Model's). ``provider`` is the Langflow provider of the model
    that folds, for Langflow's remediation of refused parameters. ``tracing``: the Agent's
    tracing handlers (Langflow's tracing service), which see the turn's fold calls as runs.
    ``model_server``: where the Agent's model is served (None: the provider's default endpoint);
    ``waits_for_folds``: the turn first waits for the folds running there, which would compete
    with it for that server (:func:`settings.new_turn_waits_for_folds`). ``input_text``: the start of the
    user's message, whose words find the older messages it refers to (``rules.recall``).
    """

    key: SessionKey
    n_messages: int
    input_message_id: UUID | None
    context_window: int | None = None
    fixed_tokens: int = 0
    provider: str | None = None
    fold_context_window: int | None = None
    tracing: tuple = ()
    model_server: str | None = None
    waits_for_folds: bool = False
    declared_window: int | None = None
    input_text: str = ""


class Mode(Enum):
    """Why a fold runs: inside a turn (a backlog, an early fold), after the provider refused the prompt
    as too long (compaction), or after the answer (the routine fold)."""

    ROUTINE = "routine"
    COMPACT = "compact"
    AFTER_ANSWER = "after_answer"

    @property
    def runs(self) -> str:
        """Where a fold of this mode runs, for the log: inside the user's turn, or after its answer."""
        return "background" if self is Mode.AFTER_ANSWER else "inline"


@dataclass(frozen=True)
class FoldCost:
    """Messages folded and what the model calls cost."""

    folded: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)

    def __bool__(self) -> bool:
        return bool(self.folded or self.usage)

    def plus_tokens(self, other: "FoldCost") -> "FoldCost":
        """This cost's folds with both costs' tokens: a turn reports the tokens of folds it did not make."""
        return FoldCost(folded=self.folded, usage=self.usage + other.usage)
