"""Test doubles at the edges only: stored chat rows in Langflow's real table, and a scripted chat model."""

import uuid
from datetime import UTC, datetime, timedelta

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langflow.services.database.models.message.model import MessageTable
from lfx.schema.properties import Properties
from pydantic import Field

from langflow_session_memory.services.session_memory.rules.state import SessionKey

START = datetime(2026, 1, 1, tzinfo=UTC)


def chat_rows(key: SessionKey, count: int, *, first: int = 0, tie_every: int = 1) -> list[MessageTable]:
    """``count`` alternating User/Machine rows; ``tie_every=k`` gives k rows the same timestamp.

    The defaults Langflow's table would make with a factory (``properties``, ``content_blocks``) are given, as
    the same values: pydantic reads each default factory's signature per row, 3.2 ms a row against 0.8.
    """
    return [
        MessageTable(
            properties=Properties().model_dump(),
            content_blocks=[],
            id=uuid.uuid4(),
            sender="User" if i % 2 == 0 else "Machine",
            sender_name="User" if i % 2 == 0 else "AI",
            session_id=key.session_id,
            context_id=key.context_id or None,
            text=f"message {i} says fact-{i} about project PRJ-{i}",
            flow_id=key.flow_id,
            user_id=key.owner_id,
            timestamp=START + timedelta(seconds=i // tie_every),
        )
        for i in range(first, first + count)
    ]


async def store_rows(sessions, rows: list[MessageTable]) -> list[MessageTable]:
    async with sessions.begin() as session:
        session.add_all(rows)
    return rows


class ScriptedChatModel(BaseChatModel):
    """Answers fold requests from a script; records every request it receives.

    Script entries are summary texts, whole ``AIMessage`` answers (to set a finish reason or
    usage) or exceptions to raise; when the script runs out it writes a valid summary naming
    the first and last message of the batch.
    """

    script: list = Field(default_factory=list)
    calls: list = Field(default_factory=list)
    temperatures: list = Field(default_factory=list)
    temperature: float = 0.7

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls.append(messages)
        self.temperatures.append(self.temperature)
        answer = self.script.pop(0) if self.script else self._default_summary(messages)
        if isinstance(answer, BaseException):
            raise answer
        message = (
            answer
            if isinstance(answer, AIMessage)
            else AIMessage(
                content=answer, usage_metadata={"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
            )
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    @staticmethod
    def _default_summary(messages) -> str:
        lines = [line for line in messages[-1].content.splitlines() if line.startswith(("User:", "Machine:"))]
        return f"Key facts:\n- first {lines[0].split()[2]}\nConversation so far:\n- up to {lines[-1].split()[2]}"

    def batch_texts(self, call: int) -> list[str]:
        """The message lines sent in fold request number ``call``."""
        return [line for line in self.calls[call][-1].content.splitlines() if line.startswith(("User:", "Machine:"))]
