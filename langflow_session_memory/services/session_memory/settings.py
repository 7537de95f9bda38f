"""Operator settings read from the environment, each with the default that holds when it is unset.

A value that cannot be used is logged (``session_memory_setting_ignored``) and the default
applies: a typo in a deployment must not stop Langflow or its chats.
"""

import functools
import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import urlsplit

from lfx.log.logger import logger

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.rules.policy import (
    BOUNDS,
    CALL_FIT,
    DEFAULT_POLICY,
    EMBEDDING,
    FoldPolicy,
)

FOLD_TIMEOUT_VARIABLE = "SESSION_MEMORY_FOLD_TIMEOUT_SECONDS"
WAIT_FOR_FOLDS_VARIABLE = "SESSION_MEMORY_NEW_TURN_WAITS_FOR_FOLD"
WAIT_FOR_FOLDS_CHOICES = ("self-hosted", "always", "never")
# Replaced by WAIT_FOR_FOLDS_VARIABLE: cancelling a fold saved nothing on a one-slot server (new_turn_waits_for_folds).
RETIRED_CANCEL_VARIABLE = "SESSION_MEMORY_NEW_TURN_CANCELS_FOLD"
WAITING_TOKENS_VARIABLE = "SESSION_MEMORY_WAITING_TOKENS"
TOOL_RESULT_SHARE_VARIABLE = "SESSION_MEMORY_TOOL_RESULT_SHARE"
EMBEDDING_TIMEOUT_VARIABLE = "SESSION_MEMORY_EMBEDDING_TIMEOUT_SECONDS"
# Host names that only resolve on a local machine or a private network (Docker Compose service
# names have no dot at all).
_PRIVATE_NAME_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localhost")


def fold_policy(environ: Mapping[str, str] = os.environ) -> FoldPolicy:
    """The fold policy with what the operator set: the fold timeout and the budget for raw messages waiting."""
    return replace(
        DEFAULT_POLICY, fold_timeout_seconds=fold_timeout_seconds(environ), waiting_tokens=waiting_tokens(environ)
    )


def fold_timeout_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """How long one batch may take to fold (every model call of it): 60 s unless the operator says otherwise.

    A model on a CPU may need longer (Gemma 3 270M on one shared core: 30-70 s a batch).
    """
    return _positive_number(
        environ,
        FOLD_TIMEOUT_VARIABLE,
        DEFAULT_POLICY.fold_timeout_seconds,
        highest=BOUNDS.longest_fold_timeout_seconds,
        reason=f"not_a_number_of_seconds_up_to_{int(BOUNDS.longest_fold_timeout_seconds)}",
    )


def embedding_timeout_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """How long a turn may wait for the Embedding Model in all (the older messages' vectors and the question's): 5 s
    unless the operator says otherwise; past it the turn goes on with the words' excerpts."""
    return _positive_number(
        environ,
        EMBEDDING_TIMEOUT_VARIABLE,
        EMBEDDING.timeout_seconds,
        highest=EMBEDDING.longest_timeout_seconds,
        reason=f"not_a_number_of_seconds_up_to_{int(EMBEDDING.longest_timeout_seconds)}",
    )


def tool_result_share(environ: Mapping[str, str] = os.environ) -> float:
    """The share of the context window a tool result the model has already read may keep in the turn's next
    model calls (``call_fit``): 0.1 unless the operator says otherwise; 1 keeps every result whole while it fits."""
    return _positive_number(
        environ,
        TOOL_RESULT_SHARE_VARIABLE,
        CALL_FIT.tool_result_share,
        highest=1.0,
        reason="not_a_share_over_0_up_to_1",
    )


def waiting_tokens(environ: Mapping[str, str] = os.environ) -> int | None:
    """The operator's budget for raw messages waiting to be folded, in tokens; None (unset): a quarter of
    the model's known window, else 16,000 (``FoldPolicy.waiting_budget``)."""
    if not environ.get(WAITING_TOKENS_VARIABLE, "").strip():
        return None
    tokens = _positive_number(
        environ, WAITING_TOKENS_VARIABLE, 0.0, highest=BOUNDS.largest_waiting_tokens, reason="not_a_number_of_tokens"
    )
    return int(tokens) or None


def _positive_number(environ: Mapping[str, str], variable: str, default: float, *, highest: float, reason: str):
    """The number ``variable`` holds, over 0 and at most ``highest``; ``default`` when unset or not such a number."""
    raw = environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= highest:
        logger.warning(f"{log_events.SETTING_IGNORED} variable={variable} reason={reason} default={default}")
        return default
    return value


def new_turn_waits_for_folds(model_url: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a new turn waits for the folds still running on its model server before it reads its history.

    ``self-hosted`` (the default): only on a server of the local machine or a private network
    (llama.cpp, Ollama, LM Studio, vLLM), which often serves one request at a time with one cached
    prompt. There a request sent beside a fold queues behind it anyway, and llama.cpp's server
    cuts the fold's stream once it waits (the fold is lost), while a cancelled fold keeps
    evaluating its prompt and leaves the turn's cached prompt evicted: each next turn cancelled
    the fold again, 30-42 s a turn instead of 2-3 (docs/real-model.md). Waiting lets the fold land
    once, and the turn then sends the new summary. A hosted provider serves both at once, so there
    no turn waits. ``always`` and ``never`` decide for every server.
    """
    if environ.get(RETIRED_CANCEL_VARIABLE, "").strip():
        _retired_setting_noticed()
    choice = _wait_choice(environ.get(WAIT_FOR_FOLDS_VARIABLE, ""))
    if choice != "self-hosted":
        return choice == "always"
    return is_self_hosted(model_url)


@functools.cache
def _wait_choice(raw: str) -> str:
    """The choice ``raw`` names; a value that names none is logged once (every turn reads the setting)."""
    choice = raw.strip().lower() or WAIT_FOR_FOLDS_CHOICES[0]
    if choice in WAIT_FOR_FOLDS_CHOICES:
        return choice
    logger.warning(
        f"{log_events.SETTING_IGNORED} variable={WAIT_FOR_FOLDS_VARIABLE} "
        f"reason=not_one_of_{'|'.join(WAIT_FOR_FOLDS_CHOICES)} default={WAIT_FOR_FOLDS_CHOICES[0]}"
    )
    return WAIT_FOR_FOLDS_CHOICES[0]


@functools.cache
def _retired_setting_noticed() -> None:
    logger.warning(
        f"{log_events.SETTING_IGNORED} variable={RETIRED_CANCEL_VARIABLE} "
        f"reason=retired_no_turn_cancels_a_fold replacement={WAIT_FOR_FOLDS_VARIABLE}"
    )


def is_self_hosted(url: str | None) -> bool:
    """Whether ``url`` names a server on this machine or a private network; None (a provider's default) is not."""
    host = (urlsplit(url).hostname or "") if url else ""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(_PRIVATE_NAME_SUFFIXES)
    return address.is_loopback or address.is_private or address.is_link_local
