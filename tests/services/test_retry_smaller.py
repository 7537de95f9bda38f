"""The one "refused as too long, then smaller, once" rule (``agent/retry_smaller``) that the turn's first call
and every call after a tool go through: what is sent, what is logged, how it ends."""

import pytest

from langflow_session_memory.services.session_memory.agent.retry_smaller import Smaller, retry_smaller_once
from langflow_session_memory.services.session_memory.rules.context_size import ContextTooLongError


class TooLong(Exception):
    """A provider's refusal as too long."""


class Broken(Exception):
    """Any other failure."""


class Sender:
    """A request that fails with the given errors in order, then answers; counts what it was sent."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.sent = 0

    async def __call__(self) -> str:
        self.sent += 1
        if self.failures:
            raise self.failures.pop(0)
        return "answer"


def too_long(error: Exception) -> bool:
    return isinstance(error, TooLong)


def made_smaller(sender: Sender, asked: list[Exception], size: int = 500):
    async def smaller(refusal: Exception) -> Smaller[str]:
        asked.append(refusal)
        return Smaller(send=sender, refused=too_long, size=size, was=1000)

    return smaller


def overflow_lines(logs) -> list[str]:
    return [entry["event"] for entry in logs if entry["event"].startswith("session_context_overflow")]


async def test_an_answered_request_is_sent_once_and_nothing_is_made_smaller(captured_logs):
    first, retry, asked = Sender(), Sender(), []
    answer = await retry_smaller_once(first, refused=too_long, smaller=made_smaller(retry, asked))
    assert (answer, first.sent, retry.sent, asked) == ("answer", 1, 0, [])
    assert overflow_lines(captured_logs) == []


async def test_a_refused_request_is_made_smaller_from_its_refusal_and_sent_once_more(captured_logs):
    refusal = TooLong("prompt is too long")
    first, retry, asked = Sender(refusal), Sender(), []
    answer = await retry_smaller_once(first, refused=too_long, smaller=made_smaller(retry, asked), call="after_tool")
    assert (answer, first.sent, retry.sent, asked) == ("answer", 1, 1, [refusal])
    assert overflow_lines(captured_logs) == [
        "session_context_overflow call=after_tool attempt=1 result=refused reason='TooLong'",
        "session_context_overflow call=after_tool attempt=2 result=answered",
    ]


async def test_a_second_refusal_ends_the_turn_as_too_long(captured_logs):
    first, retry = Sender(TooLong()), Sender(TooLong())
    with pytest.raises(ContextTooLongError):
        await retry_smaller_once(first, refused=too_long, smaller=made_smaller(retry, []))
    assert retry.sent == 1
    assert overflow_lines(captured_logs)[-1] == "session_context_overflow attempt=2 result=refused action=give_up"


async def test_a_request_that_cannot_be_made_smaller_ends_the_turn_as_too_long_without_a_second_send():
    async def cannot(_refusal):
        return None

    first = Sender(TooLong())
    with pytest.raises(ContextTooLongError) as raised:
        await retry_smaller_once(first, refused=too_long, smaller=cannot)
    assert first.sent == 1
    assert isinstance(raised.value.__cause__, TooLong)


@pytest.mark.parametrize("failures", [(Broken(),), (TooLong(), Broken())], ids=["first", "second"])
async def test_any_other_failure_is_raised_as_it_is(failures):
    first, retry = Sender(failures[0]), Sender(*failures[1:])
    with pytest.raises(Broken):
        await retry_smaller_once(first, refused=too_long, smaller=made_smaller(retry, []))


async def test_a_turn_already_given_up_is_not_retried():
    first, retry, asked = Sender(ContextTooLongError("given up")), Sender(), []
    with pytest.raises(ContextTooLongError, match="given up"):
        await retry_smaller_once(first, refused=lambda _error: True, smaller=made_smaller(retry, asked))
    assert (retry.sent, asked) == (0, [])


@pytest.mark.parametrize("size", [1000, 1200], ids=["as-large", "larger"])
async def test_a_retry_no_smaller_than_the_refused_request_is_never_sent(size, captured_logs):
    refusal = TooLong("prompt is too long")
    first, retry = Sender(refusal), Sender()
    with pytest.raises(TooLong) as ended:  # the provider's own refusal, as the stock Agent's turn ends
        await retry_smaller_once(first, refused=too_long, smaller=made_smaller(retry, [], size=size))
    assert ended.value is refusal
    assert retry.sent == 0
    assert overflow_lines(captured_logs)[-1] == (
        f"session_context_overflow attempt=2 result=not_smaller size={size} action=give_up"
    )
