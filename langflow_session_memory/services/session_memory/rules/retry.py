"""Every retry of the service in one table: what was refused, what is sent next, and when it stops. Pure.

The Agent's calls and the folds are refused in different ways (a "prompt too long" from the provider, a summary
the checks refuse, a fold out of time, a database that refused a write), and each is answered by one rule here:
:func:`after` decides, :data:`RULES` says it in words, and docs/design.md's table is :func:`markdown_table`'s.
The callers only carry the decision out: ``agent.retry_smaller`` (the Agent's calls), ``summary.model_call`` (a
fold request), ``folding.runner`` (a fold) and ``retrieval`` (an index batch).
"""

from dataclasses import dataclass
from enum import StrEnum


class Refused(StrEnum):
    """What was refused."""

    AGENT_CALL = "a model call of the Agent, as too long (its first, or one after a tool)"
    FOLD_REQUEST = "a fold request, as too long for the model's window"
    FOLD_SUMMARY = "a fold's summary: by the checks, out of time, or its stream cut"
    FOLD = "a fold, any other way (a provider's error, a write)"
    INDEX_BATCH = "an index batch, by the database (SQLite: its snapshot went stale)"


class Send(StrEnum):
    """What is sent next."""

    SMALLER = "smaller"  # the same request made smaller, at once
    HALVES = "halves"  # its messages split in two requests, each sent in turn (a lone message clipped to half)
    AFTER_PAUSE = "after_pause"  # folding pauses for the session; the next fold asks ``limit`` messages a request
    AGAIN = "again"  # the same, after a short wait
    SKIP = "skip"  # nothing: the message is passed over, the summary unchanged
    GIVE_UP = "give_up"  # nothing: the caller's failure rule applies


@dataclass(frozen=True)
class Next:
    """What follows a refusal: what is sent, and for a fold after its pause, how many messages a request holds
    (None: whole batches)."""

    send: Send
    limit: int | None = None


@dataclass(frozen=True)
class Rule:
    sent_next: str
    stops: str


RULES = {
    Refused.AGENT_CALL: Rule(
        "the same call made smaller, once: the history folded into a new summary before a first call, the call "
        "fitted harder after a tool (`CallFitPolicy.retry_shrink` of its estimate)",
        'a second refusal, or a retry no smaller than the refused call: the turn ends with the "too long" answer',
    ),
    Refused.FOLD_REQUEST: Rule(
        "its messages in two requests, each in turn; a lone message clipped to half",
        "a lone message no longer than `SummaryPolicy.smallest_clip_tokens`: the fold fails (the next row)",
    ),
    Refused.FOLD_SUMMARY: Rule(
        "after the pause (`FoldPolicy.pause`), requests of half as many messages, at least one; each request that"
        " folds doubles it again, back to whole batches",
        "a lone message refused again is passed over, the summary unchanged (`session_summary_fold_skipped`); one"
        " whose stream was cut is asked again",
    ),
    Refused.FOLD: Rule(
        "after the pause, the same request",
        "never: each failure pauses folding again; the turns go on with the summary as it is",
    ),
    Refused.INDEX_BATCH: Rule(
        "the same batch, after `RetrievalPolicy.index_retry_seconds` times the try's number",
        "after `RetrievalPolicy.index_attempts` tries: logged, and the next answer indexes from where it stopped",
    ),
}


def after(
    refused: Refused,
    *,
    tries: int = 1,
    most_tries: int = 2,
    messages: int = 1,
    limit: int | None = None,
    clippable: bool = False,
) -> Next:
    """What follows the refusal of a request sent ``tries`` times (of ``most_tries``) holding ``messages`` messages,
    in a session whose folds ask ``limit`` messages a request; ``clippable``: a lone message may still be halved.

    A fold whose summary was refused is never asked again as it was (a model at temperature 0 answers alike): half
    as many messages, or, for a lone message, nothing (the caller asks a cut stream's message again).
    """
    if refused is Refused.AGENT_CALL:
        return Next(Send.SMALLER if tries < most_tries else Send.GIVE_UP)
    if refused is Refused.FOLD_REQUEST:
        return Next(Send.HALVES if messages > 1 or clippable else Send.GIVE_UP)
    if refused is Refused.FOLD_SUMMARY:
        return Next(Send.AFTER_PAUSE, limit=max(messages // 2, 1)) if messages > 1 else Next(Send.SKIP, limit=limit)
    if refused is Refused.FOLD:
        return Next(Send.AFTER_PAUSE, limit=limit)
    return Next(Send.AGAIN if tries < most_tries else Send.GIVE_UP)


def limit_after_fold(limit: int | None, batch_size: int) -> int | None:
    """Messages a fold request holds after one of ``limit`` folded: twice as many, back to whole batches (None)."""
    if limit is None or limit * 2 >= batch_size:
        return None
    return limit * 2


def markdown_table() -> str:
    """docs/design.md's table of the retries: one row per refusal."""
    rows = [f"| {refused.value} | {rule.sent_next} | {rule.stops} |" for refused, rule in RULES.items()]
    return "\n".join(["| refused | sent next | stops |", "| --- | --- | --- |", *rows])


if __name__ == "__main__":
    print(markdown_table())  # noqa: T201
