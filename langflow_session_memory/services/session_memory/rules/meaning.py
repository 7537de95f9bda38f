"""Finding the older messages a turn's message means without sharing its words: the pure part.

With an embedding model connected ("Embedding Model"), the user's message and a bounded pool of
the session's older messages are vectors; a message is quoted when its similarity to the question
stands out of the pool's (:func:`standouts`), measured in the pool's own standard deviations, so
one rule holds for models whose similarities sit in different ranges. Words (``recall``) and
meaning each rank their candidates; :func:`fused` joins the two rankings by reciprocal rank.
No I/O: the service reads the pool and the adapter (``embeddings``) embeds it.
"""

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

# Calibrated on the chatty session of ``benchmarks.chatty`` with all-MiniLM-L6-v2 (docs/switch.md,
# "Excerpts of older messages"): the message holding the answer stood 3.9-5.5 deviations above the pool
# for 8 of its 10 questions, while the best unrelated message for them and for six unrelated questions
# stood 1.5-2.6 (one at 3.6, one at 4.1).
MIN_STANDOUT = 3.0
# A pool this small has no meaningful spread: words alone rank it.
MIN_POOL = 20
# Reciprocal rank fusion's constant (Cormack et al., 2009): a candidate's fused score is the sum over
# the rankings that hold it of 1 / (RANK_CONSTANT + its rank).
RANK_CONSTANT = 60

K = TypeVar("K", bound=Hashable)


def similarities(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """The cosine similarity of ``query`` to each of ``vectors``, in one matrix product (the query's norm taken
    once); 0 for a vector of another length (another model's) or where either is all zeros."""
    found = np.zeros(len(vectors))
    same = [index for index, vector in enumerate(vectors) if len(vector) == len(query)]
    if not same:
        return found
    matrix = np.asarray([vectors[index] for index in same], dtype=np.float64)
    asked = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(asked)
    products = matrix @ asked
    found[same] = np.divide(products, norms, out=np.zeros_like(products), where=norms > 0)
    return found


def standouts(
    query: Sequence[float], pool: Mapping[K, Sequence[float]], *, min_standout: float = MIN_STANDOUT, most: int = 3
) -> list[tuple[K, float]]:
    """The pool's keys whose similarity to ``query`` is at least ``min_standout`` standard deviations above
    the pool's mean, best first, at most ``most``, each with its standing; none from a pool smaller than
    :data:`MIN_POOL` or without spread."""
    if len(pool) < MIN_POOL:
        return []
    keys = list(pool)
    similar = similarities(query, [pool[key] for key in keys])
    mean = math.fsum(similar) / len(similar)
    spread = math.sqrt(math.fsum((value - mean) ** 2 for value in similar) / len(similar))
    if spread <= 1e-9:
        return []
    standing = {key: float(value - mean) / spread for key, value in zip(keys, similar, strict=True)}
    ranked = sorted((entry for entry in standing.items() if entry[1] >= min_standout), key=lambda e: -e[1])
    return ranked[:most]


def fused(*rankings: Sequence[K]) -> list[K]:
    """The keys of ``rankings`` (each best first) in order of their reciprocal rank fusion score, ties in the
    order they were first met."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1 / (RANK_CONSTANT + rank)
    return sorted(scores, key=lambda key: -scores[key])
