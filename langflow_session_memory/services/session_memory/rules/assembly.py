"""What a turn sends: the history built from its plan, the summary first as a user-role message.

The plan is ``planner``'s; here the stored rows it keeps become Langflow messages, opened by
the summary (never stored) so that roles alternate as strict chat templates require, and closed
by the older messages quoted for the turn (``recall``), never stored either.
"""

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage
from langflow.services.database.models.message.model import MessageTable
from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI, MESSAGE_SENDER_NAME_AI, MESSAGE_SENDER_NAME_USER, MESSAGE_SENDER_USER

from langflow_session_memory.services.session_memory.rules.ranking import NOTES_SENDER
from langflow_session_memory.services.session_memory.rules.recall import Excerpt

SUMMARY_SENDER_NAME = "Session memory"
SUMMARY_FRAME = (
    "Notes on the earlier part of this conversation (older messages are summarized here "
    "instead of being repeated; facts are listed in the order they were learnt, and a later "
    "fact replaces an earlier one it contradicts):\n\n{summary}"
)
SUMMARY_ACKNOWLEDGEMENT = "Understood. I will use these notes as context for the rest of the conversation."
HISTORY_START_NOTE = "(Earlier messages of this conversation are not shown here.)"
EXCERPTS_FRAME = (
    "Older messages of this conversation that the next message may refer to, quoted as they were written "
    "(date and time, who wrote it):\n{lines}"
)
EXCERPTS_ACKNOWLEDGEMENT = "Understood."
_SPEAKERS = {MESSAGE_SENDER_USER: "User", MESSAGE_SENDER_AI: "Assistant", NOTES_SENDER: "Earlier notes"}
_DEFAULT_NAMES = frozenset({MESSAGE_SENDER_NAME_USER, MESSAGE_SENDER_NAME_AI, SUMMARY_SENDER_NAME})


def carries_summary(message: BaseMessage, summary: str) -> bool:
    """Whether ``message`` is the one opening the history with ``summary`` (its :func:`summary_text`), as the Agent
    sends it. Langflow hands the history to the Agent as LangChain messages holding the text alone
    (``Message.to_lc_message``: no id, no sender name), so the text is what tells the summary's message."""
    return isinstance(message, HumanMessage) and message.content == summary


def summary_messages(summary: str, following: Sequence[MessageTable]) -> list[Message]:
    """What opens the history: the summary as a user-role message that is never stored.

    Roles alternate from a user message, as strict chat templates (Gemma, Mistral) require:
    when the next message sent is a user message (a stored one, or the current input when
    nothing with text follows), a short assistant acknowledgement follows the summary. Without
    one, a history whose window starts with an answer opens with a short user-role line
    saying earlier messages are not shown, so the answer is not the first message.
    """
    first = next((row for row in following if (row.text or "").strip()), None)
    if not summary:
        if _sent_as_user(first):
            return []
        return [Message(text=HISTORY_START_NOTE, sender=MESSAGE_SENDER_USER, sender_name=SUMMARY_SENDER_NAME)]
    opening = Message(text=summary_text(summary), sender=MESSAGE_SENDER_USER, sender_name=SUMMARY_SENDER_NAME)
    if not _sent_as_user(first):
        return [opening]
    ack = Message(text=SUMMARY_ACKNOWLEDGEMENT, sender=MESSAGE_SENDER_AI, sender_name=SUMMARY_SENDER_NAME)
    return [opening, ack]


def excerpt_messages(excerpts: Sequence[Excerpt]) -> list[Message]:
    """The older messages quoted for this turn, after the messages sent and before the input: a user-role
    message (never stored) and a short acknowledgement, so that roles still alternate into the input and the
    request up to the last message sent is the previous request's (the cached prefix holds)."""
    if not excerpts:
        return []
    lines = "\n".join(
        f"- [{excerpt.timestamp:%Y-%m-%d %H:%M}] {_speaker(excerpt)}: {excerpt.text}" for excerpt in excerpts
    )
    return [
        Message(text=EXCERPTS_FRAME.format(lines=lines), sender=MESSAGE_SENDER_USER, sender_name=SUMMARY_SENDER_NAME),
        Message(text=EXCERPTS_ACKNOWLEDGEMENT, sender=MESSAGE_SENDER_AI, sender_name=SUMMARY_SENDER_NAME),
    ]


def _speaker(excerpt: Excerpt) -> str:
    """Who a quoted line says wrote it: the stored sender name where the flow gave one (a persona, a person's
    name, which questions use), else User or Assistant."""
    if excerpt.sender_name and excerpt.sender_name not in _DEFAULT_NAMES:
        return excerpt.sender_name
    return _SPEAKERS.get(excerpt.sender, excerpt.sender)


def summary_text(summary: str) -> str:
    """The text of the message that carries the summary."""
    return SUMMARY_FRAME.format(summary=summary)


async def history_messages(
    summary: str, raw: Sequence[MessageTable], excerpts: Sequence[Excerpt] = ()
) -> list[Message]:
    """The history sent: the summary's opening, the raw rows as Langflow's own history query converts them,
    then the older messages quoted for this turn."""
    return [
        *summary_messages(summary, raw),
        *[await Message.create(**row.model_dump()) for row in raw],
        *excerpt_messages(excerpts),
    ]


def _sent_as_user(row: MessageTable | None) -> bool:
    """Whether lfx sends this row as a user message: the user's, or one without a sender (None: the input).

    lfx leaves out rows with blank text, so the caller passes the first row with text.
    """
    return row is None or row.sender in (MESSAGE_SENDER_USER, "", None)
