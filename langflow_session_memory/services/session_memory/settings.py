"""Operator settings read from the environment, each with the default that holds when it is unset.

A value that cannot be used is logged (``session_memory_setting_ignored``) and the default
applies: a typo in a deployment must not stop Langflow or its chats.
"""

import math
import os
from collections.abc import Mapping

from lfx.log.logger import logger

from langflow_session_memory.services.session_memory.summarizer import FOLD_TIMEOUT_SECONDS

FOLD_TIMEOUT_VARIABLE = "SESSION_MEMORY_FOLD_TIMEOUT_SECONDS"
LONGEST_FOLD_TIMEOUT_SECONDS = 3600.0


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
