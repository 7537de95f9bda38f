"""Operator settings read from the environment, each with the default that holds when it is unset.

A value that cannot be used is logged (``session_memory_setting_ignored``) and the default
applies: a typo in a deployment must not stop Langflow or its chats.
"""

import functools
import ipaddress
import math
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from lfx.log.logger import logger

from langflow_session_memory.services.session_memory.summarizer import FOLD_TIMEOUT_SECONDS

FOLD_TIMEOUT_VARIABLE = "SESSION_MEMORY_FOLD_TIMEOUT_SECONDS"
LONGEST_FOLD_TIMEOUT_SECONDS = 3600.0
CANCEL_FOLDS_VARIABLE = "SESSION_MEMORY_NEW_TURN_CANCELS_FOLD"
CANCEL_FOLDS_CHOICES = ("self-hosted", "always", "never")
# Host names that only resolve on a local machine or a private network (Docker Compose service
# names have no dot at all).
_PRIVATE_NAME_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localhost")


def fold_timeout_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """How long one batch may take to fold (every model call of it): 60 s unless the operator says otherwise.

    A model on a CPU may need longer (Gemma 3 270M on one shared core: 30-70 s a batch).
    """
    raw = environ.get(FOLD_TIMEOUT_VARIABLE, "").strip()
    if not raw:
        return FOLD_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= LONGEST_FOLD_TIMEOUT_SECONDS:
        logger.warning(
            f"session_memory_setting_ignored variable={FOLD_TIMEOUT_VARIABLE} "
            f"reason=not_a_number_of_seconds_up_to_{int(LONGEST_FOLD_TIMEOUT_SECONDS)} default={FOLD_TIMEOUT_SECONDS}"
        )
        return FOLD_TIMEOUT_SECONDS
    return seconds


def new_turn_cancels_fold(model_url: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a new turn cancels its session's fold still running after an earlier answer, on this model server.

    ``self-hosted`` (the default): only where the fold runs on a server of the local machine
    or a private network (llama.cpp, Ollama, LM Studio, vLLM), which often serves one request
    at a time: the user is answered first, the fold runs again after that answer, and a
    cancelled request costs nothing. A hosted provider serves both at once and bills a
    cancelled request, so there the fold runs on. ``always`` and ``never`` decide for every server.
    """
    choice = _cancel_folds_choice(environ.get(CANCEL_FOLDS_VARIABLE, ""))
    if choice != "self-hosted":
        return choice == "always"
    return is_self_hosted(model_url)


@functools.cache
def _cancel_folds_choice(raw: str) -> str:
    """The choice ``raw`` names; a value that names none is logged once (every turn reads the setting)."""
    choice = raw.strip().lower() or CANCEL_FOLDS_CHOICES[0]
    if choice in CANCEL_FOLDS_CHOICES:
        return choice
    logger.warning(
        f"session_memory_setting_ignored variable={CANCEL_FOLDS_VARIABLE} "
        f"reason=not_one_of_{'|'.join(CANCEL_FOLDS_CHOICES)} default={CANCEL_FOLDS_CHOICES[0]}"
    )
    return CANCEL_FOLDS_CHOICES[0]


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
