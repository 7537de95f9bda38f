"""What a turn knows of a session: its key, the row of ``session_memory_state`` as read, and the messages around it.

Plain values, no I/O: ``storage`` reads and writes them, the planner and the fold runner decide
from them. The table itself (``storage.model``) is named here because every error about it
(``reasons``) and every reader of it agree on that one name.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from langflow.services.database.models.message.model import MessageTable

from langflow_session_memory.services.session_memory.rules.usage import TokenUsage

TABLE_NAME = "session_memory_state"


@dataclass(frozen=True)
class SessionKey:
    """The scope of one chat history: Langflow's own (flow, owner, session, context)."""

    flow_id: UUID
    owner_id: UUID
    session_id: str
    context_id: str = ""


@dataclass(frozen=True)
class Cursor:
    """Position of the last folded message; order is ``(timestamp, id)`` everywhere."""

    timestamp: datetime
    message_id: UUID


@dataclass(frozen=True)
class SessionState:
    """What a turn needs from the row; ``version == 0`` with no cursor means nothing folded yet."""

    key: SessionKey
    summary: str = ""
    cursor: Cursor | None = None
    folded_count: int = 0
    version: int = 0
    paused_until: datetime | None = None
    last_error: str | None = None
    fold_claimed_until: datetime | None = None
    last_call_tokens: int | None = None
    unreported_usage: TokenUsage = field(default_factory=TokenUsage)  # of folds after answers, until a turn reports it
    fold_batch_limit: int | None = None  # messages per fold request after a refused fold; None: the batch size

    def is_paused(self, now: datetime) -> bool:
        return self.paused_until is not None and now < self.paused_until

    def is_claimed(self, now: datetime, longest_claim: timedelta) -> bool:
        """Whether a worker is folding this session now.

        A claim that has run out, or that reaches further than any legitimate claim can
        (a bad clock, a manual edit), holds nothing.
        """
        until = self.fold_claimed_until
        return until is not None and now < until <= now + longest_claim


@dataclass(frozen=True)
class Reading:
    """The newest N messages (ascending), the state row, and the unfolded messages before the window."""

    window: list[MessageTable]
    state: SessionState
    gap: list[MessageTable]
